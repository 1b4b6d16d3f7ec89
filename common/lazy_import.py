"""A heavy library bound at import, loaded on first use.

The CLI's root, `--help` and a usage error must answer at once, yet modules on their import path use
pandas, pyarrow or scipy inside functions only. `lazy_module("pandas")` stands for the module (type
checkers see `import pandas as pd` under TYPE_CHECKING) and imports it at the first attribute read;
after that it holds the module's names itself, so later reads cost what a module attribute costs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any


#: a module's own dunder names, which a caller may read as it would the real module's
_MODULE_DUNDERS = frozenset({"__version__", "__all__", "__file__", "__path__"})


class _Deferred(ModuleType):
    def __getattr__(self, attr: str) -> Any:  # only for names not copied yet, i.e. before the first use
        if attr.startswith("__") and attr.endswith("__") and attr not in _MODULE_DUNDERS:
            raise AttributeError(attr)  # introspection (copy, pickle, doctest) must not load the module
        module = importlib.import_module(self.__name__)
        self.__dict__.update(module.__dict__)
        return getattr(module, attr)


def lazy_module(name: str) -> ModuleType:
    """A stand-in for `import name` that imports it when first used."""
    return _Deferred(name)


def lazy_exports(package: str, home: dict[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A package's `__getattr__` (PEP 562): each public name in `home` imports its submodule on first use and is
    then kept in the package's `namespace`, so the package itself imports nothing heavy."""

    def __getattr__(name: str) -> Any:
        if name in home:
            value = getattr(importlib.import_module(f"{package}.{home[name]}"), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
