"""A subpackage's public API, imported on first use.

Each subpackage's ``__init__`` lists its public names by role in one ``_EXPORTS`` mapping (module -> names)
and takes its ``__getattr__`` and ``__dir__`` from :func:`lazy_exports`. ``bias_utils.profiles.run_profiles``
then imports :mod:`bias_utils.profiles.population_profiles` when first read, so importing one module of a
subpackage (a notebook's parameter check, a context filter) does not load torch through its siblings.
``tests/test_structure.py`` and the run keys (:mod:`bias_utils.book.runs`) read ``_EXPORTS`` as the
``__init__``'s imports.
"""

from __future__ import annotations

import importlib
from typing import Callable

__all__: list[str] = []


def lazy_exports(package: str, exports: dict[str, tuple[str, ...]]) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` for ``package`` whose modules (keys) export the names (values)."""
    owner = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str):
        module = owner.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # the module name is a key of the package's _EXPORTS literal, which the import scans read
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    def __dir__() -> list[str]:
        return sorted(owner)

    return __getattr__, __dir__
