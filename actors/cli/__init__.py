"""The `recovery` command line (a leaf: nothing in the runtime imports it).

`main` is the console script's entry point; each subcommand lives in a module of its own.
"""

from actors.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
