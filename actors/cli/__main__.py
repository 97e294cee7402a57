"""`python -m actors.cli`: the `recovery` command."""

from actors.cli.main import main

raise SystemExit(main())
