"""The Prefect automation behind a config's ``notify: {block: NAME}``: created once, on the
server, by ``needlescope server`` and ``deploy``. It sends every ``needlescope.gate.failed``
and ``needlescope.sweep.failed-cells`` event about the config to the named notification
block (Slack, e-mail, a generic webhook: any block that can notify)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any
from uuid import UUID

from needlescope.config import SweepConfig
from needlescope.errors import ConfigError
from needlescope.gates import FAILED_CELLS_EVENT, GATE_FAILED_EVENT

SUBJECT = "needlescope {{ event.resource['prefect.resource.name'] }}: {{ event.event }}"
# The payload's message names the gate, the model and the figures that failed it; the
# figures follow as JSON for whoever reads them by machine.
BODY = (
    "{{ event.payload.message }}\n"
    "figures: {{ event.payload.figures_json }}\n"
    "epoch: {{ event.payload.epoch }}"
)


def automation_name(config: SweepConfig) -> str:
    return f"needlescope-alerts-{config.name}"


async def notification_block_id(client: Any, name: str) -> UUID:
    """The notification block document named ``name`` (of any block type that can notify)."""
    documents = await client.read_block_documents(include_secrets=False)
    found = [
        d
        for d in documents
        if d.name == name and "notify" in (getattr(d.block_schema, "capabilities", None) or [])
    ]
    if not found:
        raise ConfigError(
            f"notify.block: no notification block named {name!r} on the Prefect server"
            " (create one in the UI's Blocks page, or with Python: SlackWebhook(url=…).save(…))"
        )
    if len(found) > 1:
        kinds = ", ".join(sorted(d.block_type.slug for d in found if d.block_type))
        raise ConfigError(f"notify.block: several notification blocks are named {name!r}: {kinds}")
    return UUID(str(found[0].id))


def automation_for(config: SweepConfig, block_id: UUID) -> Any:
    from prefect.automations import Automation
    from prefect.events.actions import SendNotification
    from prefect.events.schemas.automations import EventTrigger, Posture

    return Automation(
        name=automation_name(config),
        description=f"needlescope: failed gates and failed cells of {config.name} are sent"
        f" to the notification block {config.notify.block if config.notify else ''}",
        trigger=EventTrigger(
            expect={GATE_FAILED_EVENT, FAILED_CELLS_EVENT},
            match={"prefect.resource.id": f"needlescope.config._sweep.{config.name}"},
            posture=Posture.Reactive,
            threshold=1,
            within=timedelta(0),
        ),
        actions=[SendNotification(block_document_id=block_id, subject=SUBJECT, body=BODY)],
    )


async def ensure_alerts(
    configs: Iterable[SweepConfig], log: Callable[[str], object] = print
) -> list[str]:
    """Each config naming a notification block gets its automation, once: one that already
    sends to that block is kept; one sending elsewhere (the config changed) is replaced.
    The names of the automations now in place."""
    from prefect import get_client

    names = []
    async with get_client() as client:
        for config in configs:
            if config.notify is None:
                continue
            block_id = await notification_block_id(client, config.notify.block)
            wanted = automation_for(config, block_id)
            existing = await client.read_automations_by_name(automation_name(config))
            if any(_same(a, wanted) for a in existing):
                log(f"alerts of {config.name} already go to {config.notify.block}")
            else:
                for automation in existing:
                    await client.delete_automation(automation.id)
                await wanted.acreate()
                log(f"alerts of {config.name} go to the notification block {config.notify.block}")
            names.append(automation_name(config))
    return names


def _same(existing: Any, wanted: Any) -> bool:
    """The same events to the same block with the same text (ids and defaults aside)."""

    def key(automation: Any) -> Any:
        trigger = automation.trigger
        actions = [
            (
                a.type,
                str(getattr(a, "block_document_id", "")),
                getattr(a, "subject", None),
                getattr(a, "body", None),
            )
            for a in automation.actions
        ]
        match = (
            trigger.match.model_dump(mode="json")
            if hasattr(trigger.match, "model_dump")
            else trigger.match
        )
        return (sorted(trigger.expect), json.dumps(match, sort_keys=True), actions)

    return bool(existing.enabled) and key(existing) == key(wanted)
