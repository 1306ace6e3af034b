"""What `plan` promises, the run does: a cell the grid names but cannot build is refused when
the config is checked, by every command, before anything is written or sent.

The commands run in subprocesses, as a user runs them (none of these reach Prefect: the check
comes first). The property test holds the check to the sweep's own build task code: over random
recall grids sized in characters and bytes, the cells the check accepts are exactly the cells
the sweep's builder builds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from needlescope.config._sweep import parse_config
from needlescope.errors import ConfigError
from needlescope.flows.build_check import check_cells, check_config
from needlescope.flows.run_cells import plan_run
from needlescope.flows.sweep import check_before_sending
from needlescope.probes.registry import expand_with_probes
from needlescope.providers.open import open_provider
from needlescope.tasks.contexts import ContextBuilder
from needlescope.warehouse.store import Warehouse
from tests.support.anthropic_server import FakeAnthropicServer
from tests.support.openai_server import FakeOpenAIServer

CLI = Path(sys.executable).parent / "needlescope"
MODEL = "{name: m, provider: openai, base_url: 'http://127.0.0.1:9/v1', model: x}"


def config_text(lengths: str, unit: str = "bytes", model: str = MODEL) -> str:
    return f"""
name: promises
seed: 7
models:
  - {model}
probes:
  - probe: recall
    prompts: [recall-seed]
    fillers: [pattern]
    lengths: {lengths}
    length_unit: {unit}
    needle_counts: [6]
    regions: ["0-1", "1500-1900", "0-0.25,0.75-1"]
    repeats: 2
"""


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEEDLESCOPE_", "PREFECT_"))}
    env["PREFECT_API_URL"] = "http://127.0.0.1:9/api"  # never reached: the check comes first
    return subprocess.run(
        [str(CLI), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


# The user's config of the issue: 4,000 bytes with the whole prompt as the length (the
# default budget). 300 bytes cannot hold the seed's 326-byte prompt; at 1,800 bytes the
# haystack holds 1,800 − 326 − 24 = 1,450 characters, which 1500-1900 does not reach.
REFUSED = [
    "6 cells cannot be built (instructions alone are 350 units, more than the target length"
    " 300): recall length 300 bytes, 6 needles, region 0-1 (2 cells); recall length 300 bytes,"
    " 6 needles, region 1500-1900 (2 cells); recall length 300 bytes, 6 needles, region"
    " 0-0.25,0.75-1 (2 cells)",
    "2 cells cannot be built (needle range 1500-1900 covers no character of the"
    " 1,450-character haystack): recall length 1800 bytes, 6 needles, region 1500-1900"
    " (2 cells)",
]


@pytest.mark.parametrize(
    "command",
    [
        ["plan"],
        ["run", "--no-report"],
        ["run", "--only-context"],
        ["serve"],
        ["server", "--port", "9"],
        ["deploy", "--pool", "p"],
    ],
    ids=lambda c: " ".join(c),
)
def test_every_command_refuses_a_cell_it_cannot_build(command: list[str], tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    wh = tmp_path / "wh"
    with FakeOpenAIServer() as server:  # answering, so that `run` reaches its last check
        model = MODEL.replace("http://127.0.0.1:9/v1", server.base_url)
        config.write_text(config_text("[300, 1800, 4000]", model=model), encoding="utf-8")
        done = run(command[0], str(config), *command[1:], "--warehouse", str(wh), cwd=tmp_path)
        assert server.requests == 0
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == ["error: " + REFUSED[0], REFUSED[1]], done.stderr
    assert done.stdout == ""
    assert not wh.exists() and not (tmp_path / ".prefect").exists()


def test_plan_counts_what_the_run_will_build(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(config_text("[4000]"), encoding="utf-8")
    done = run("plan", str(config), "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    total = yaml.safe_load(done.stdout)["total"]
    assert (total["cells"], total["dropped"], total["to_send"], total["unchecked"]) == (6, 0, 6, 0)


# -- the check and the sweep's builder agree ----------------------------------------------------

REGIONS = ["0-1", "whole", "head", "0-0.1:1,0.9-1:5", "0-0.3,0.6-1", "500-900", "50-60,2000-2400"]


def random_config(
    unit: str, budget: str, lengths: list[int], counts: list[int], regions: list[str]
) -> Any:
    absolute = any(r[0].isdigit() and "." not in r and int(r.split("-")[0]) > 1 for r in regions)
    return parse_config(
        {
            "name": "random",
            "models": [yaml.safe_load(MODEL)],
            "probes": [
                {
                    "probe": "recall",
                    "prompts": ["recall-seed" if absolute else "recall-en-v1"],
                    "placements": ["seed"],
                    "fillers": ["pattern", "prose-en"],
                    "lengths": lengths,
                    "length_unit": unit,
                    "length_budget": budget,
                    "needle_counts": counts,
                    "regions": [r for r in regions if ":" not in r] or ["0-1"],
                }
            ],
        }
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    unit=st.sampled_from(["bytes", "chars"]),
    budget=st.sampled_from(["prompt", "haystack"]),
    lengths=st.lists(st.integers(200, 2600), min_size=1, max_size=3, unique=True),
    counts=st.lists(st.integers(1, 40), min_size=1, max_size=2, unique=True),
    regions=st.lists(st.sampled_from(REGIONS), min_size=1, max_size=3, unique=True),
)
def test_the_cells_the_check_accepts_are_the_cells_the_sweep_builds(
    unit: str, budget: str, lengths: list[int], counts: list[int], regions: list[str]
) -> None:
    config = random_config(unit, budget, lengths, counts, regions)
    probe_of = {c.cell_id: p for c, p in expand_with_probes(config).items()}
    cells = list(expand_with_probes(config))
    check = asyncio.run(check_cells(config, cells, probe_of))
    refused = {c.cell_id for c, _ in check.unbuildable}
    assert check.built + len(refused) == len(cells) and not check.window_dropped

    async def sweep_build() -> set[str]:
        async with contextlib.AsyncExitStack() as stack:  # the client the sweep opens
            provider = await open_provider(stack, config.model("m"), ctx_per_slot=0, offline=True)
            builder = ContextBuilder(config, {"m": provider})
            built = await builder.build_contexts("m", cells)  # what the build task calls
        assert not built.failed
        return {c.cell_id for c, _ in built.unbuildable}

    assert asyncio.run(sweep_build()) == refused


# -- lengths only a hosted API counts -----------------------------------------------------------


def hosted_config(base_url: str) -> Any:
    model = (
        f"{{name: m, provider: anthropic, base_url: '{base_url}', model: fake-model,"
        " api_key_env: NS_TEST_BUILD_CHECK_KEY}"
    )
    entry = config_text("[30, 800]", unit="tokens", model=model)  # the fake counts words
    entry = entry.replace("[recall-seed]", "[recall-en-v1]").replace('"1500-1900", ', "")
    entry = entry.replace("[pattern]", "[prose-en]")
    return parse_config(yaml.safe_load(entry))


async def test_a_hosted_count_is_unchecked_by_the_commands_and_checked_by_the_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("NS_TEST_BUILD_CHECK_KEY", "k")
    async with FakeAnthropicServer() as srv:
        config = hosted_config(srv.base_url)
        commands = await check_config(config)
        assert len(commands.unchecked) == 8 and commands.refusal() is None
        assert srv.count_requests == 0  # the commands send nothing
        plan = plan_run(config, set(), None, None, 1)
        with pytest.raises(ConfigError) as refused:
            store = Warehouse(tmp_path / "wh").ensure()
            await check_before_sending(config, plan, store, checked=True, hosted=True)
    assert str(refused.value).startswith("4 cells cannot be built (instructions alone are")
    assert "recall length 30 tokens, 6 needles" in str(refused.value)
    assert "length 800" not in str(refused.value)
    assert srv.count_requests > 0 and srv.message_requests == 0  # counted, never asked


async def test_a_goto_prompt_on_a_hosted_api_is_left_for_the_run_which_counts_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # goto sizes its prompt in lines and measures its tokens as built: on Anthropic only the
    # API counts them, so the commands leave it to the run (they once raised KeyError).
    monkeypatch.setenv("NS_TEST_BUILD_CHECK_KEY", "k")
    async with FakeAnthropicServer() as srv:
        config = parse_config(
            {
                "name": "goto-hosted",
                "models": [
                    {
                        "name": "m",
                        "provider": "anthropic",
                        "base_url": srv.base_url,
                        "model": "fake-model",
                        "api_key_env": "NS_TEST_BUILD_CHECK_KEY",
                    }
                ],
                "probes": [{"probe": "goto", "line_counts": [10, 25], "orders": ["ordered"]}],
            }
        )
        commands = await check_config(config)
        assert len(commands.unchecked) == 2 and commands.refusal() is None
        assert srv.count_requests == 0
        plan = plan_run(config, set(), None, None, 1)
        store = Warehouse(tmp_path / "wh").ensure()
        await check_before_sending(config, plan, store, checked=True, hosted=True)
    assert srv.count_requests > 0 and srv.message_requests == 0  # counted, never asked
