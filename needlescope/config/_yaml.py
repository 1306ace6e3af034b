"""Reading a config's YAML defensively: bounded in size, without duplicate keys or alias bombs.

A config is small; anything past these bounds is a mistake or an attack, refused in one line
before it can cost memory or time (pydantic walks an alias bomb's expansion in full).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError

from needlescope.config._paths import file_problem
from needlescope.errors import ConfigError, NeedlescopeError

MAX_BYTES = 1 << 20  # 1 MiB: a config of every option and hundreds of models is under 50 KB
MAX_VALUES = 200_000  # values a config expands to, counting each alias as its anchor's content
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key written twice in one mapping (YAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:  # `<<: *defaults`, then overrides: allowed
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: the base class says so
                continue
            if duplicate:
                raise ConstructorError(
                    None, None, f"key {key!r} is given twice in one mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


class _Expansion(NeedlescopeError):
    def __init__(self, reason: str) -> None:
        self.reason = reason


def _expanded_size(value: Any) -> int:
    """How many values ``value`` holds once every alias is expanded (shared parts counted each
    time they appear), without expanding anything; stops past MAX_VALUES."""
    memo: dict[int, int] = {}
    path: set[int] = set()

    def size(node: Any) -> int:
        if not isinstance(node, list | dict):
            return 1
        key = id(node)
        if key in memo:
            return memo[key]
        if key in path:
            raise _Expansion("it refers to itself (a recursive alias)")
        path.add(key)
        children = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        total = 1
        for child in children:
            total += size(child)
            if total > MAX_VALUES:
                raise _Expansion(
                    f"it expands to more than {MAX_VALUES:,} values (aliases repeat their"
                    " anchors' content: an alias bomb?)"
                )
        path.discard(key)
        memo[key] = total
        return total

    return size(value)


def read_yaml(path: Path, what: str = "config file") -> Any:
    """The parsed YAML of ``path``, or a one-line ConfigError naming the file."""
    if path.is_dir():
        raise ConfigError(f"{path} is a directory, not a {what}")
    problem = file_problem(path)
    if problem == "not found":
        raise ConfigError(f"{what} not found: {path}")
    if problem is not None:
        raise ConfigError(f"{what} {path}: {problem}")
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{what} {path}: {(exc.strerror or str(exc)).lower()}") from None
    if len(raw) > MAX_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_BYTES:,} bytes, the most a config may be")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader: no Python objects
        _expanded_size(data)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "could not parse"
        raise ConfigError(_one_line(f"{path}: invalid YAML{where}: {problem}")) from None
    except _Expansion as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc.reason}") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid YAML: nested too deeply") from None
    except ValueError as exc:  # an integer of more digits than Python converts, a bad date
        reason = "a number too long" if "digits" in str(exc) else _one_line(str(exc))
        raise ConfigError(f"{path}: invalid YAML: {reason}") from None
    return data


def _one_line(text: str) -> str:
    return " ".join(text.split())
