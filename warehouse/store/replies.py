"""Replies received and not yet stored as answers, kept in the warehouse in between.

A run killed after a reply came back and before its answer was written would otherwise pay for
the request again: the next run of the epoch finds the reply here instead. One file per
(epoch, cell, purpose), written when the reply arrives and removed once the cell's answer is
stored, so a finished sweep leaves none. The warehouse (answers, claims) is the record of what
is done; these files only bridge a kill.

Design: docs/design/orchestration.md#queries
"""

from __future__ import annotations

import contextlib
import os
import pickle
import time
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote

from needlescope.providers.base import Reply
from needlescope.warehouse.store.claims import alive

REPLIES_DIR = "replies"
KEEP_S = 7 * 24 * 3600  # a reply no run came back for in a week is pruned (tidy)


class PendingReplies:
    """The replies folder of one warehouse (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root / REPLIES_DIR

    def path(self, epoch: str, cell_id: str, purpose: str, resend: str = "") -> Path:
        """Where one reply waits. ``resend``: the run sending a graded cell again on purpose,
        which must not find the earlier reply."""
        name = cell_id + "." + purpose + (f".resend-{resend}" if resend else "")
        return self.root / _safe(epoch) / f"{_safe(name)}.pickle"

    def get(self, path: Path) -> Reply | None:
        """The reply kept at ``path``; None when there is none, or it cannot be read (then
        the request is sent again)."""
        try:
            data = path.read_bytes()
        except OSError:
            return None
        try:
            reply = pickle.loads(data)  # written by put() into the warehouse: trusted
        except Exception:
            return None
        return reply if isinstance(reply, Reply) else None

    def put(self, path: Path, reply: Reply) -> None:
        """Keep ``reply`` at ``path``: written aside and renamed, so a kill leaves no half."""
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        partial.write_bytes(pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(partial, path)

    def drop(self, paths: Iterable[Path]) -> None:
        for path in paths:
            path.unlink(missing_ok=True)

    def remove_orphaned_partials(self) -> int:
        """Replies half-written by a killed process of this machine (its pid is in the name):
        never read, safe to drop; how many."""
        removed = 0
        for partial in self.root.glob("*/*.partial"):
            pid = partial.name.rsplit(".", 2)[-2]
            if pid.isdigit() and not alive(int(pid)):
                partial.unlink(missing_ok=True)
                removed += 1
        return removed

    def prune(self, older_than_s: float = KEEP_S) -> int:
        """Remove replies (and leftovers of killed writes) no run came back for; how many."""
        if not self.root.is_dir():
            return 0
        cutoff = time.time() - older_than_s
        removed = 0
        for path in self.root.glob("*/*"):
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
        return removed


def _safe(text: str) -> str:
    """``text`` as one file name: every character but letters, digits, ``-`` and ``_``
    escaped, so two names never meet."""
    return quote(text, safe="-_")
