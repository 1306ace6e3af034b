"""Statistics remembered for the same files: the views read immutable Parquet files (a write
or a compaction adds new ones and names them in the connection's variables), so a statistic
of the same arguments over the same file lists is the same. A report asks for some of them
several times (a model's drift in the Summary, the Statistics and the comparisons), on
connections of several threads: one of them computes it, the others wait for it."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import duckdb

T = TypeVar("T")
SIZE = 128  # statistics kept (the oldest forgotten first)

_memo: OrderedDict[tuple[Hashable, ...], Any] = OrderedDict()
_computing: dict[tuple[Hashable, ...], threading.Lock] = {}
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


def remembered(
    con: duckdb.DuckDBPyConnection, key: tuple[Hashable, ...], compute: Callable[[], T]
) -> T:
    """``compute()``, or what it gave for ``key`` over the same files before."""
    files = files_of(con)
    if files is None:
        return compute()  # nothing says what its tables hold: nothing to remember it by
    full = (files, *key)
    with _lock:
        if full in _memo:
            _memo.move_to_end(full)
            return _memo[full]
        busy = _computing.setdefault(full, threading.Lock())
    with busy:  # another thread computing the same waits here, then finds it
        with _lock:
            if full in _memo:
                return _memo[full]
        try:
            found = compute()
        finally:
            with _lock:
                _computing.pop(full, None)
        with _lock:
            _memo[full] = found
            while len(_memo) > SIZE:
                _memo.popitem(last=False)
        return found
