"""What is wrong with a path a config names, said the way a user can act on it."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_KINDS = (
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _stat(path: Path) -> os.stat_result | str:
    try:
        return os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symlink loop"
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return "not found"
        return (exc.strerror or str(exc)).lower()
    except ValueError:  # a NUL in the name
        return "not a valid path"


def file_problem(path: Path) -> str | None:
    """Why ``path`` is not a regular file one can read (following symlinks), or None."""
    found = _stat(path)
    if isinstance(found, str):
        return found
    if stat.S_ISDIR(found.st_mode):
        return "a directory, not a file"
    for is_kind, kind in _KINDS:
        if is_kind(found.st_mode):
            return f"{kind}, not a regular file"
    if not os.access(path, os.R_OK):
        return "not readable (permission denied)"
    return None


def dir_problem(path: Path) -> str | None:
    """Why ``path`` is not a directory one can list, or None."""
    found = _stat(path)
    if isinstance(found, str):
        return found
    if not stat.S_ISDIR(found.st_mode):
        return "not a directory"
    return None
