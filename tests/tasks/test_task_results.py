"""The sweep's task runs take a batch of cells each and keep no result: no cache key is
computed over their inputs, and Prefect writes no result file for them."""

from __future__ import annotations


def test_the_batch_tasks_hash_no_inputs_for_a_cache_nobody_reads() -> None:
    # A grade batch carries its prompts: 32 of 1M tokens took 0.77 s to hash for a cache key.
    from prefect.cache_policies import NO_CACHE

    from needlescope.tasks.prepare import build_prompts
    from needlescope.tasks.query import ask_batch

    for batch_task in (build_prompts, ask_batch):
        assert batch_task.cache_policy is NO_CACHE, batch_task.name
        assert batch_task.cache_policy.compute_key(None, {"answers": ["x" * 10]}, {}) is None
