"""YAML as configuration files read it: safe, and a key given twice in one mapping refused.

PyYAML keeps the last of two equal keys silently (``duration: 600`` then ``duration: 60`` runs
60 s); a scenario, a sweep or a LuST settings file is refused instead, naming the key, its
line, and the line it was first given on.
"""

from __future__ import annotations

from typing import Any

import yaml


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping gives one key twice."""


class _StrictLoader(yaml.SafeLoader):
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: merged keys may be overridden
                continue
            key = self.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
            if key in seen:
                raise DuplicateKeyError(
                    f"key {key!r} is given twice in one mapping (line {seen[key].start_mark.line + 1} and line "
                    f"{key_node.start_mark.line + 1}); keep one",
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> Any:
    """``text`` parsed as YAML (safe types only); a key given twice in a mapping raises
    :class:`DuplicateKeyError` (a ``yaml.YAMLError``) naming it and both lines."""
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
