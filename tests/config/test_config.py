from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from needlescope.config._file import load_config
from needlescope.config._sweep import parse_config, resolve_api_key
from needlescope.errors import ConfigError

GOOD = """
name: t
models:
  - name: m
    provider: local
probes:
  - probe: recall
    lengths: [100, 200]
    needle_counts: [1, 2]
"""


def test_good_config_has_defaults(write_config) -> None:
    config = load_config(write_config(GOOD))
    probe = config.probes[0]
    assert probe.length_unit == "tokens"
    assert probe.digits == 4
    assert probe.placements == ["even"]
    assert config.models[0].generation.temperature == 0.0


def test_config_is_frozen(write_config) -> None:
    config = load_config(write_config(GOOD))
    with pytest.raises(ValidationError):
        config.name = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: t\nmodels: [\n", "invalid YAML at line"),
        ("- just\n- a list\n", "top level must be a mapping"),
        (
            GOOD.replace("provider: local", "provider: nope"),
            "models.0.provider: unknown provider 'nope'",
        ),
        (GOOD.replace("lengths: [100, 200]", "lengths: [100, -5]"), "probes.0.recall.lengths.1"),
        (GOOD.replace("probe: recall", "probe: haystack9"), "probes.0"),
        (
            GOOD.replace("needle_counts: [1, 2]", "needle_counts: []"),
            "probes.0.recall.needle_counts",
        ),
        (GOOD + "    digits: 1\n", "probes.0.recall.digits"),
        (GOOD + "    regions: ['0.5-0.2']\n", "probes.0.recall.regions"),
        (GOOD + "    fillers: [nothere]\n", "unknown filler 'nothere'"),
        (GOOD + "    prompts: [recall-xx-v9]\n", "unknown prompt template 'recall-xx-v9'"),
        (GOOD + "colour: blue\n", "colour: unknown field"),
        (GOOD.replace("name: t", "name: 'bad name!'"), "name:"),
        (GOOD.replace("provider: local", "provider: openai"), "needs base_url"),
        (
            GOOD.replace(
                "  - name: m\n    provider: local",
                "  - name: m\n    provider: local\n  - name: m\n    provider: local",
            ),
            "model names must be unique",
        ),
    ],
)
def test_bad_config_gives_one_line_naming_the_field(write_config, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(text))
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message
    assert "config.yaml" in message


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(Path("/nonexistent/x.yaml"))


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NS_TEST_KEY", raising=False)
    config = parse_config(
        {
            "name": "t",
            "models": [
                {
                    "name": "g",
                    "provider": "openai",
                    "base_url": "http://127.0.0.1:9/v1",
                    "model": "x",
                    "api_key_env": "NS_TEST_KEY",
                }
            ],
            "probes": [{"probe": "recall", "lengths": [10], "needle_counts": [1]}],
        }
    )
    with pytest.raises(ConfigError, match="NS_TEST_KEY is not set"):
        resolve_api_key(config.models[0])
    monkeypatch.setenv("NS_TEST_KEY", "sk-secret")
    assert resolve_api_key(config.models[0]) == "sk-secret"


def test_bad_config_fails_before_prefect_is_imported(write_config) -> None:
    bad = write_config(GOOD.replace("lengths: [100, 200]", "lengths: [-1]"))
    code = (
        "import sys\n"
        "from needlescope.flows.cli._app import app\n"
        "try:\n"
        f'    app(["run", {str(bad)!r}])\n'
        "except SystemExit as exit:\n"
        "    assert 'prefect' not in sys.modules, 'prefect was imported'\n"
        "    sys.exit(exit.code)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "probes.0.recall.lengths.0" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("value", ["true", "1.5", "'100'"])
def test_sizes_must_be_whole_numbers(write_config, value: str) -> None:
    with pytest.raises(ConfigError, match=r"probes\.0\.recall\.lengths\.0"):
        load_config(write_config(GOOD.replace("lengths: [100, 200]", f"lengths: [{value}]")))


def test_a_directory_is_not_a_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory, not a config file"):
        load_config(tmp_path)


def test_a_stored_config_reads_back_as_the_same_config(tmp_path: Path) -> None:
    """`rerun` sweeps a run's config as stored in the warehouse: it must round-trip exactly."""
    from needlescope.config._sweep import SweepConfig
    from needlescope.probes.registry import expand_grid

    path = tmp_path / "c.yaml"
    path.write_text(
        "name: rt\nschedule: {cron: '15 2 * * *', timezone: Asia/Tokyo}\n"
        "models:\n  - name: m\n    provider: local\n"
        "    variants: {hot: {temperature: 0.9}, cold: {temperature: 0.0, min_p: 0.1}}\n"
        "probes:\n  - {probe: recall, lengths: [200, 400], needle_counts: [1, 2]}\n"
        "  - {probe: cases, cases_file: cases.yaml, lengths: [300], depths: [10, 90]}\n",
        encoding="utf-8",
    )
    (tmp_path / "cases.yaml").write_text(
        (Path(__file__).resolve().parents[2] / "configs/cases/en.yaml").read_text("utf-8"), "utf-8"
    )
    config = load_config(path)
    again = SweepConfig.model_validate_json(config.model_dump_json())
    assert again == config
    assert [m.name for m in again.models] == ["m@hot", "m@cold"]
    assert [c.cell_id for c in expand_grid(again)] == [c.cell_id for c in expand_grid(config)]


@pytest.mark.parametrize(
    ("provider", "setting", "counted"),
    [
        ("local", None, True),
        ("openai", None, True),
        ("anthropic", None, False),
        ("gemini", None, False),
        ("anthropic", True, True),
        ("local", False, False),
    ],
)
def test_haystacks_are_counted_unless_that_is_a_hosted_counters_request(
    provider: str, setting: bool | None, counted: bool
) -> None:
    model: dict[str, object] = {"name": "m", "provider": provider, "model": "x"}
    if provider == "openai":
        model["base_url"] = "http://127.0.0.1:1/v1"
    if setting is not None:
        model["count_haystack"] = setting
    probes = [{"probe": "recall", "lengths": [1000], "needle_counts": [1]}]
    config = parse_config({"name": "c", "models": [model], "probes": probes})
    assert config.model("m").counts_haystack is counted
    bad = {"name": "c", "models": [{**model, "count_haystack": "sometimes"}], "probes": probes}
    with pytest.raises(ConfigError, match=r"models\.0\.count_haystack"):
        parse_config(bad)
