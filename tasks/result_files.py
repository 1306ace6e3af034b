"""Where the query task runs keep their replies: Prefect's local result storage, cheaper.

Each query task run looks for its cached reply and stores the new one. Prefect's
``LocalFileSystem`` resolves the base path and the file's path (``Path.resolve``: an
``lstat`` per path component, in Python) eight times per task run, and moves each read and
write through three worker-thread hops (open, read or write, close): Prefect's check-and-write
of one reply took 1.4-1.6 ms of CPU, 1.0-1.2 ms with this class (2,000 keys, three rounds;
measured 2026-11-27, commit f8cac0b). End to end, at ~12 ms a cell, the gain
was not measurable beside the benchmark machine's spread.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import ParamSpec, TypeVar

import anyio.to_thread
from prefect import Task
from prefect.context import FlowRunContext
from prefect.filesystems import LocalFileSystem, WritableFileSystem
from pydantic import PrivateAttr

P = ParamSpec("P")
R = TypeVar("R")


class ResultFiles(LocalFileSystem):
    """The same files in the same place as Prefect's default local storage: the base path
    resolved once, a plain file name under it joined without resolving, and each read or
    write one worker-thread hop. Anything else (a path with folders, ``..``, ``~``, an
    absolute path, a symbolic link) takes ``LocalFileSystem``'s own checks."""

    _block_type_name = "Needlescope Result Files"
    _resolved_base: Path | None = PrivateAttr(default=None)

    def _resolve_path(self, path: str) -> Path:
        base = self._base()
        if path is None:
            return base
        name = str(path)
        if name in ("", ".", "..") or "/" in name or os.sep in name or name.startswith("~"):
            return super()._resolve_path(path)
        joined = base / name
        if os.path.islink(joined):
            return super()._resolve_path(path)
        return joined

    def _base(self) -> Path:
        if self._resolved_base is None:
            self._resolved_base = super()._resolve_path(None)  # type: ignore[arg-type]
        return self._resolved_base

    async def aread_path(self, path: str) -> bytes:
        resolved = self._resolve_path(path)
        try:
            return await anyio.to_thread.run_sync(resolved.read_bytes)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            # what LocalFileSystem raises (a cache miss, to Prefect)
            raise ValueError(f"Path {resolved} does not exist or is not a file.") from None

    async def awrite_path(self, path: str, content: bytes) -> str:
        resolved = self._resolve_path(path)

        def write() -> None:
            resolved.parent.mkdir(exist_ok=True, parents=True)
            if resolved.exists() and not resolved.is_file():
                raise ValueError(f"Path {resolved} already exists and is not a file.")
            resolved.write_bytes(content)

        await anyio.to_thread.run_sync(write)
        return str(resolved)


def with_result_files(task: Task[P, R]) -> Task[P, R]:
    """``task`` storing its results in :class:`ResultFiles` when the running flow stores its
    own in Prefect's default local storage; else ``task`` as it is."""
    flow_run = FlowRunContext.get()
    storage = query_result_storage(flow_run.result_store.result_storage) if flow_run else None
    if storage is None:
        return task
    copied = task.with_options()
    # Set after construction: Task() refuses an unsaved block, which a worker elsewhere
    # could not load. These task runs run in the flow's own process, and the files are the
    # ones an unsaved LocalFileSystem (Prefect's default) would write.
    copied.result_storage = storage
    return copied


def query_result_storage(current: WritableFileSystem | None) -> ResultFiles | None:
    """The storage the query task runs use instead of the flow's ``current`` one: the same
    folder, when that is Prefect's own local storage, unsaved (the default); None for any
    storage a user chose (a saved block, a remote file system), which stays as it is."""
    if type(current) is not LocalFileSystem or current._block_document_id is not None:
        return None
    return ResultFiles(basepath=current.basepath)
