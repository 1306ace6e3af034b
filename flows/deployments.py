"""needlescope's Prefect deployments: a `nightly-<config>` sweep per config and `rerun-failed`.

`serve_deployments` runs them in this process (`needlescope serve` / `server`);
`deploy_to_pool` registers them on a process work pool whose workers run them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect.deployments.runner import EntrypointType, RunnerDeployment
from prefect.schedules import Cron

from needlescope.config import SweepConfig, load_config
from needlescope.flows.rerun import rerun_failed
from needlescope.flows.sweep import sweep

RERUN_DEPLOYMENT = "rerun-failed"


def nightly_name(config: SweepConfig) -> str:
    return f"nightly-{config.name}"


def nightly_deployment(
    config_path: str | Path,
    *,
    warehouse: str | None = None,
    cron: str | None = None,
    shards: int = 1,
    work_pool: str | None = None,
) -> RunnerDeployment:
    """The config's sweep on its schedule (``schedule:`` in the config, or ``cron`` in UTC)."""
    path = Path(config_path).resolve()
    config = load_config(path)
    schedule = Cron(
        cron or config.schedule.cron,
        timezone="UTC" if cron else config.schedule.timezone,
        active=config.schedule.active,
    )
    parameters: dict[str, Any] = {"config_path": str(path), "warehouse": warehouse}
    if shards > 1:
        parameters["shards"] = shards
    return sweep.to_deployment(
        name=nightly_name(config),
        parameters=parameters,
        schedule=schedule,
        tags=["needlescope", f"config:{config.name}"],
        description=describe(
            config,
            path,
            cron or config.schedule.cron,
            "UTC" if cron else config.schedule.timezone,
        ),
        work_pool_name=work_pool,
        entrypoint_type=EntrypointType.MODULE_PATH,
    )


def describe(config: SweepConfig, path: Path, cron: str, timezone: str) -> str:
    """The deployment's description in the UI: the config's own, then when it runs (with its
    time zone), its gates and where their alerts go."""
    state = "" if config.schedule.active else " (paused)"
    lines = [
        config.description or f"needlescope sweep of {path.name}",
        "",
        f"- schedule: `{cron}` in time zone {timezone}{state}",
        "- gates: " + ("; ".join(g.label for g in config.gates) if config.gates else "none"),
        "- notify: "
        + (f"notification block `{config.notify.block}`" if config.notify else "nobody"),
    ]
    return "\n".join(lines)


def rerun_deployment(
    *, warehouse: str | None = None, work_pool: str | None = None
) -> RunnerDeployment:
    """Rerun the cells of a `run_id` that have no graded answer (filters: models, probes,
    error_kinds)."""
    return rerun_failed.to_deployment(
        name=RERUN_DEPLOYMENT,
        parameters={"warehouse": warehouse},
        tags=["needlescope"],
        description="Rerun exactly the cells of run_id that have no graded answer.",
        work_pool_name=work_pool,
        entrypoint_type=EntrypointType.MODULE_PATH,
    )


def deployments_for(
    config_paths: list[Path],
    *,
    warehouse: str | None = None,
    cron: str | None = None,
    shards: int = 1,
    work_pool: str | None = None,
) -> list[RunnerDeployment]:
    nightly = [
        nightly_deployment(p, warehouse=warehouse, cron=cron, shards=shards, work_pool=work_pool)
        for p in config_paths
    ]
    return [*nightly, rerun_deployment(warehouse=warehouse, work_pool=work_pool)]


async def deploy_to_pool(deployments: list[RunnerDeployment], pool: str) -> list[str]:
    """Register deployments on a process work pool (created if missing); workers run them."""
    from prefect import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.deployments.runner import adeploy
    from prefect.exceptions import ObjectNotFound

    async with get_client() as client:
        try:
            await client.read_work_pool(pool)
        except ObjectNotFound:
            from prefect.workers.process import ProcessWorker

            template = ProcessWorker.get_default_base_job_template()
            await client.create_work_pool(
                WorkPoolCreate(name=pool, type="process", base_job_template=template)
            )
    ids = await adeploy(
        *deployments,
        work_pool_name=pool,
        build=False,
        push=False,
        print_next_steps_message=False,
        ignore_warnings=True,
    )
    return [str(i) for i in ids]
