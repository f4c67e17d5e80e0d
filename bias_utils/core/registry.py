"""Named registries of functions that extend the package (context sources, model backends): one rule for all.

A registry maps a name to a function registered with the :meth:`Registry.register`
decorator, in registration order. A second function under a taken name is an
error; the same function defined again (a rerun notebook cell, a reloaded
module) replaces it.
"""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

__all__: list[str] = []

_F = TypeVar("_F", bound=Callable)


class Registry(Generic[_F]):
    """``what`` names an entry in messages ("context source"); ``error`` is the exception a clash raises."""

    def __init__(self, what: str, error: type[Exception]):
        self.what, self.error = what, error
        self._items: dict[str, _F] = {}

    def register(self, name: str) -> Callable[[_F], _F]:
        def decorator(fn: _F) -> _F:
            old = self._items.get(name)
            if old is not None and (old.__module__, old.__qualname__) != (fn.__module__, fn.__qualname__):
                raise self.error(f"{self.what} {name!r} is already registered ({old.__module__}.{old.__qualname__})")
            self._items[name] = fn
            return fn
        return decorator

    def names(self) -> tuple[str, ...]:
        return tuple(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __getitem__(self, name: str) -> _F:
        return self._items[name]
