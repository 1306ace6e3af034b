"""Statistics remembered for the same files: the views read immutable Parquet files (a write
or a compaction adds new ones and names them in the connection's variables), so a statistic
of the same arguments over the same file lists is the same. A report asks for some of them
several times (a model's drift in the Summary, the Statistics and the comparisons), on
connections of several threads: one of them computes it, the others wait for it.

Several statistics can be computed together (:func:`remembered_many`: the paired comparisons
read every side's answers once): a thread computes those of its keys that no other thread is
computing, and only then waits for the others' keys. It never waits while it holds a key, so
two threads asking for overlapping sets cannot deadlock, and no key is computed twice."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar

import duckdb

T = TypeVar("T")
Key = tuple[Hashable, ...]
SIZE = 128  # statistics kept (the oldest forgotten first)

_memo: OrderedDict[Key, Any] = OrderedDict()
_computing: dict[Key, threading.Lock] = {}  # held by the thread computing the key
_lock = threading.Lock()


def files_of(con: duckdb.DuckDBPyConnection) -> str | None:
    """What ``con``'s views read: a digest of its file lists (the ``needlescope_*`` variables;
    a setting such as the unstable range is not data, and the statistics remembered here do
    not read one). None for a connection that reads no warehouse files (tables of its own)."""
    rows = con.execute(
        "SELECT name, value::VARCHAR FROM duckdb_variables()"
        " WHERE starts_with(name, 'needlescope_') ORDER BY name"
    ).fetchall()
    return hashlib.sha256(repr(rows).encode()).hexdigest() if rows else None


def remembered(con: duckdb.DuckDBPyConnection, key: Key, compute: Callable[[], T]) -> T:
    """``compute()``, or what it gave for ``key`` over the same files before."""
    found: T = remembered_many(con, [key], lambda keys: {keys[0]: compute()})[key]
    return found


def remembered_many(
    con: duckdb.DuckDBPyConnection,
    keys: Sequence[Key],
    compute: Callable[[list[Key]], Mapping[Key, T]],
) -> dict[Key, T]:
    """For each of ``keys``, what ``compute`` gave for it over the same files before, or
    else now: ``compute`` is called with the keys neither remembered nor being computed by
    another thread (in the order given), and must return a value for each of them."""
    files = files_of(con)
    if files is None:  # nothing says what its tables hold: nothing to remember them by
        computed = compute(list(dict.fromkeys(keys)))
        return {key: computed[key] for key in keys}
    found: dict[Key, T] = {}
    pending = list(dict.fromkeys(keys))
    while pending:
        mine, theirs = _claim(files, pending, found)
        if mine:
            found |= _compute(files, mine, compute)
        for _, busy in theirs:
            with busy:  # the other thread is done with it (or failed: claimed again above)
                pass
        pending = [key for key, _ in theirs]
    return {key: found[key] for key in keys}


def _claim(
    files: str, keys: list[Key], found: dict[Key, Any]
) -> tuple[list[Key], list[tuple[Key, threading.Lock]]]:
    """Fill ``found`` with the keys remembered; of the others, those this thread now computes
    (their locks taken) and those another thread is computing (with its lock)."""
    mine: list[Key] = []
    theirs: list[tuple[Key, threading.Lock]] = []
    with _lock:
        for key in keys:
            full = (files, *key)
            if full in _memo:
                _memo.move_to_end(full)
                found[key] = _memo[full]
            elif full in _computing:
                theirs.append((key, _computing[full]))
            else:
                busy = threading.Lock()
                busy.acquire()
                _computing[full] = busy
                mine.append(key)
    return mine, theirs


def _compute(
    files: str, keys: list[Key], compute: Callable[[list[Key]], Mapping[Key, T]]
) -> dict[Key, T]:
    computed: Mapping[Key, T] = {}
    try:
        computed = compute(keys)
        missing = [key for key in keys if key not in computed]
        if missing:
            raise KeyError(f"nothing computed for {missing}")
        return {key: computed[key] for key in keys}
    finally:
        # remembered before the locks go: a thread woken by one finds the value
        with _lock:
            for key in keys:
                full = (files, *key)
                if key in computed:
                    _memo[full] = computed[key]
                _computing.pop(full).release()
            while len(_memo) > SIZE:
                _memo.popitem(last=False)
