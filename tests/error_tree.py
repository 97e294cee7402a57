"""Every exception class a package of ours defines, found by importing all its modules."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def modules_of(package: str) -> list[ModuleType]:
    """The package and every module under it (`__main__` modules run when imported)."""
    root = importlib.import_module(package)
    names = [
        info.name
        for info in pkgutil.walk_packages(root.__path__, f"{package}.")
        if not info.name.endswith(".__main__")
    ]
    return [root, *(importlib.import_module(name) for name in names)]


def exception_classes(*packages: str) -> dict[str, type[BaseException]]:
    """Module-level classes deriving from BaseException, by dotted name, each counted in
    the module that defines it (never where it is re-exported)."""
    found: dict[str, type[BaseException]] = {}
    for package in packages:
        for module in modules_of(package):
            for value in vars(module).values():
                if (
                    isinstance(value, type)
                    and issubclass(value, BaseException)
                    and value.__module__ == module.__name__
                ):
                    found[f"{value.__module__}.{value.__qualname__}"] = value
    return dict(sorted(found.items()))
