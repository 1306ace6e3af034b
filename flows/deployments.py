"""The sweep flow as Prefect deployments: the same flow `needlescope run` calls, served."""

from __future__ import annotations

from pathlib import Path

from prefect.deployments.runner import RunnerDeployment

from needlescope.config import load_config
from needlescope.flows.sweep import sweep


def sweep_deployment(
    config_path: str | Path,
    *,
    warehouse: str | None = None,
    cron: str | None = None,
    name: str | None = None,
) -> RunnerDeployment:
    """A deployment running one sweep config; with ``cron`` (UTC) it runs on that schedule."""
    path = Path(config_path).resolve()
    config = load_config(path)
    return sweep.to_deployment(
        name=name or config.name,
        parameters={"config_path": str(path), "warehouse": warehouse},
        cron=cron,
        tags=["needlescope", f"config:{config.name}"],
        description=config.description or f"needlescope sweep of {path.name}",
    )
