"""Named registries: the one way a method, a representation, a data set or a model is found by name.

A :class:`Registry` maps names (and optional aliases) to entries of one kind: editor factories,
multi-round strategy factories, Fisher representations, data sets, models. Each package builds its
registry once, in one place, from an explicit table (nothing registers itself by being imported);
an unknown name is refused with the kind and the names that exist.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(ValueError):
    """A name no entry of the registry carries."""


class Registry(Generic[T]):
    """Entries of one ``kind`` by name; ``aliases`` map further spellings to a name."""

    def __init__(
        self,
        kind: str,
        entries: Mapping[str, T] | None = None,
        aliases: Mapping[str, str] | None = None,
        plural: str | None = None,
    ) -> None:
        self.kind, self.plural = kind, plural or f"{kind}s"
        self._entries: dict[str, T] = {}
        self._aliases: dict[str, str] = {}
        for name, entry in (entries or {}).items():
            self.add(name, entry)
        for alias, name in (aliases or {}).items():
            self.alias(alias, name)

    def add(self, name: str, entry: T) -> T:
        """Register ``entry`` under ``name`` (a name is registered once)."""
        if name in self._entries or name in self._aliases:
            raise ValueError(f"{self.kind} {name!r} is registered already")
        self._entries[name] = entry
        return entry

    def alias(self, alias: str, name: str) -> None:
        """Let ``alias`` stand for the registered ``name``."""
        if name not in self._entries:
            raise UnknownNameError(f"alias {alias!r} of an unknown {self.kind} {name!r}")
        self._aliases[alias] = name

    def remove(self, name: str) -> None:
        """Take the registered ``name`` out, with the aliases that stand for it (a plug-in's entry
        removed again, as a test that registers one must)."""
        key = self.canonical(name)
        del self._entries[key]
        self._aliases = {a: n for a, n in self._aliases.items() if n != key}

    def canonical(self, name: str) -> str:
        """The registered name ``name`` stands for (itself, or what its alias names)."""
        key = self._aliases.get(name, name)
        if key not in self._entries:
            raise UnknownNameError(f"unknown {self.kind} {name!r}; known {self.plural}: {', '.join(self.names())}")
        return key

    def __getitem__(self, name: str) -> T:
        return self._entries[self.canonical(name)]

    def get(self, name: str, default: T | None = None) -> T | None:
        return self._entries.get(self._aliases.get(name, name), default)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._entries or name in self._aliases)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> list[str]:
        """The registered names, sorted (aliases left out)."""
        return sorted(self._entries)

    def items(self) -> list[tuple[str, T]]:
        return list(self._entries.items())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"
