"""How long the Prefect servers needlescope starts keep their history: 30 days of flow runs
(with their task runs, states, logs and artifacts), 7 days of events. The warehouse keeps every
answer, so Prefect's copy of a sweep is only needed while someone may look at it in the UI.

Prefect keeps flow runs for ever unless its database vacuum is told to remove them; needlescope
turns that on through Prefect's own settings, as defaults a user's values override. The
vacuum runs hourly in a server that lives (``needlescope server``, ``make server``). The
ephemeral server a plain ``needlescope run`` starts runs only the event vacuum, so such a run
calls Prefect's flow-run vacuum itself when it ends, at most once an hour.

Design: docs/design/orchestration.md#retention
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

DAY_S = 24 * 3600
RETENTION = {
    "PREFECT_SERVER_SERVICES_DB_VACUUM_ENABLED": "events,flow_runs",
    "PREFECT_SERVER_SERVICES_DB_VACUUM_RETENTION_PERIOD": str(30 * DAY_S),
    # a plain timedelta setting: seconds as text do not parse, ISO 8601 does
    "PREFECT_SERVER_EVENTS_RETENTION_PERIOD": "P7D",
}
VACUUMED_STAMP = "needlescope-flow-run-vacuum"  # in PREFECT_HOME: when a run last vacuumed
VACUUM_EVERY_S = 3600.0
RESULT_FILE_PREFIX = "needlescope-query-"  # the query task runs' cache keys, up to 2026-11-28


def with_retention(env: MutableMapping[str, str]) -> MutableMapping[str, str]:
    """``env`` with the retention defaults where it sets none."""
    for name, value in RETENTION.items():
        env.setdefault(name, value)
    return env


def _settings() -> Any:
    """Prefect's settings as the environment says now (its context read them at import,
    before the command line set the retention defaults)."""
    from prefect.settings import Settings

    return Settings()


def on_ephemeral_api() -> bool:
    """Whether this process's flows run on Prefect's ephemeral server (no API URL set)."""
    settings = _settings()
    return settings.api.url is None and bool(settings.server.ephemeral.enabled)


def vacuum_after_ephemeral_run(now: float | None = None) -> int | None:
    """At most once an hour, after a run: result files older than the flow-run retention that
    needlescope's queries left in Prefect's local storage before 2026-11-29 (they write none
    since) removed, and, on the ephemeral server, Prefect's flow-run vacuum run on its
    database where it is on; the flow runs left (None: the vacuum did not run)."""
    settings = _settings()
    stamp = Path(settings.home) / VACUUMED_STAMP
    now = time.time() if now is None else now
    try:
        if now - stamp.stat().st_mtime < VACUUM_EVERY_S:
            return None
    except OSError:
        pass
    vacuum = settings.server.services.db_vacuum
    keep_s = vacuum.retention_period.total_seconds()
    prune_result_files(Path(settings.results.local_storage_path), now - keep_s)
    left = None
    if on_ephemeral_api() and "flow_runs" in vacuum.enabled_vacuum_types:
        left = asyncio.run(vacuum_flow_runs())
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.touch()
    os.utime(stamp, (now, now))
    return left


def prune_result_files(storage: Path, before: float) -> int:
    """needlescope's query result files (``needlescope-query-*``) in ``storage`` last written
    before the unix time ``before``, removed; how many. Other files are left alone."""
    removed = 0
    for path in storage.glob(f"{RESULT_FILE_PREFIX}*"):
        with contextlib.suppress(OSError):
            if path.is_file() and path.stat().st_mtime < before:
                path.unlink()
                removed += 1
    return removed


async def vacuum_flow_runs() -> int:
    """Prefect's own flow-run vacuum (old flow runs, their task runs, states, logs and
    artifacts), run in this process against the configured database; the flow runs left."""
    import sqlalchemy as sa
    from prefect.context import SettingsContext
    from prefect.server.database import provide_database_interface
    from prefect.server.services.db_vacuum import vacuum_old_flow_runs

    current = SettingsContext.get()
    assert current is not None  # Prefect makes one at import
    with SettingsContext(profile=current.profile, settings=_settings()):
        db = provide_database_interface()
        await vacuum_old_flow_runs(db=db)
        async with db.session_context() as session:
            found = await session.execute(sa.select(sa.func.count(db.FlowRun.id)))
            return int(found.scalar_one())
