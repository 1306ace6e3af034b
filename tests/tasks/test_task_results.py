"""Where task runs keep results: the query task runs' ResultFiles (Prefect's local files, the same
paths, fewer syscalls), and the batch tasks that keep none."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prefect.filesystems import LocalFileSystem

from needlescope.tasks.result_files import ResultFiles, query_result_storage


def test_a_plain_key_lands_where_prefects_own_storage_puts_it(tmp_path: Path) -> None:
    base = tmp_path / "storage"
    ours, prefects = ResultFiles(basepath=str(base)), LocalFileSystem(basepath=str(base))
    key = "needlescope-query-wh-2026-11-27-0123abcd"
    assert ours._resolve_path(key) == prefects._resolve_path(key)
    assert ours._resolve_path(None) == prefects._resolve_path(None)  # type: ignore[arg-type]


def test_a_base_path_through_a_symlink_resolves_as_prefect_resolves_it(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    ours = ResultFiles(basepath=str(tmp_path / "link"))
    assert ours._resolve_path("k") == real / "k"


def test_reads_and_writes_round_trip_and_a_missing_key_is_prefects_miss(tmp_path: Path) -> None:
    files = ResultFiles(basepath=str(tmp_path / "new" / "storage"))

    async def go() -> None:
        where = await files.awrite_path("k1", b"\x00reply\xff")
        assert Path(where) == tmp_path / "new" / "storage" / "k1"
        assert await files.aread_path("k1") == b"\x00reply\xff"
        # Prefect takes a ValueError from read_path as "no cached result"
        with pytest.raises(ValueError, match="does not exist"):
            await files.aread_path("k2")

    asyncio.run(go())
    # what LocalFileSystem reads back is what ours wrote
    assert LocalFileSystem(basepath=str(tmp_path / "new" / "storage")).read_path("k1") == (
        b"\x00reply\xff"
    )


@pytest.mark.parametrize("key", ["../outside", "a/../../outside", "/etc/passwd", "~/x"])
def test_a_key_that_leaves_the_base_path_is_refused_as_prefect_refuses_it(
    tmp_path: Path, key: str
) -> None:
    files = ResultFiles(basepath=str(tmp_path / "storage"))
    with pytest.raises(ValueError, match="outside of the base path"):
        files._resolve_path(key)


def test_a_symlinked_file_pointing_out_of_the_base_is_refused(tmp_path: Path) -> None:
    base = tmp_path / "storage"
    base.mkdir()
    (tmp_path / "secret").write_bytes(b"s")
    (base / "k").symlink_to(tmp_path / "secret")
    files = ResultFiles(basepath=str(base))
    with pytest.raises(ValueError, match="outside of the base path"):
        asyncio.run(files.aread_path("k"))


def test_writing_over_a_folder_is_refused(tmp_path: Path) -> None:
    files = ResultFiles(basepath=str(tmp_path))
    (tmp_path / "k").mkdir()
    with pytest.raises(ValueError, match="not a file"):
        asyncio.run(files.awrite_path("k", b"x"))


def test_only_prefects_own_unsaved_local_storage_is_replaced(tmp_path: Path) -> None:
    default = LocalFileSystem(basepath=str(tmp_path))
    replaced = query_result_storage(default)
    assert isinstance(replaced, ResultFiles)
    assert replaced.basepath == default.basepath
    saved = LocalFileSystem(basepath=str(tmp_path))
    saved._block_document_id = "00000000-0000-0000-0000-000000000001"  # type: ignore[assignment]
    assert query_result_storage(saved) is None  # a block the user saved and chose
    assert query_result_storage(ResultFiles(basepath=str(tmp_path))) is None
    assert query_result_storage(None) is None


def test_outside_a_flow_run_a_task_keeps_its_storage() -> None:
    from needlescope.tasks.query import query_model
    from needlescope.tasks.result_files import with_result_files

    assert with_result_files(query_model) is query_model


def test_the_batch_tasks_hash_no_inputs_for_a_cache_nobody_reads() -> None:
    # A grade batch carries its prompts: 32 of 1M tokens took 0.77 s to hash for a cache key.
    from prefect.cache_policies import NO_CACHE

    from needlescope.tasks.grade import grade_answers
    from needlescope.tasks.persist import persist
    from needlescope.tasks.prepare import build_prompts

    for batch_task in (grade_answers, persist, build_prompts):
        assert batch_task.cache_policy is NO_CACHE, batch_task.name
        assert batch_task.cache_policy.compute_key(None, {"answers": ["x" * 10]}, {}) is None
