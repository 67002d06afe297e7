"""Lazy package exports: a package's names imported from their modules on first use.

    __getattr__, __dir__ = lazy_exports(__name__, {"policy_loss": "ict.loss.policy"}, globals())

Packages whose modules import torch (ict.loss, ict.methods, ict.train) use it so that importing a
torch-free sibling (a config, `--help`) does not import torch through the package's __init__.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping


def lazy_exports(
    package: str, table: Mapping[str, str], namespace: dict, extra: Iterable[str] = ()
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """(`__getattr__`, `__dir__`) for `package`: `table` maps a name to the module defining it;
    the first look-up imports it and stores it in `namespace` (the package's globals), so later
    look-ups skip `__getattr__`. `extra`: names `__dir__` lists besides the table's."""
    listed = {*table, *extra}

    def __getattr__(name: str):
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *listed})

    return __getattr__, __dir__
