"""Broken configs fail fast through the real CLI: exit 2, one line naming the problem, no
traceback, nothing in the warehouse, and Prefect never imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from needlescope.flows.cli._app import app

CASES_YAML = Path(__file__).resolve().parents[2] / "configs" / "cases" / "en.yaml"
MISSING_KEY = "NS_BAD_CONFIG_KEY_NEVER_SET"
UNREACHABLE = "http://127.0.0.1:9/v1"  # should a broken config slip through, nothing answers

MODEL = f'{{name: m, provider: openai, base_url: "{UNREACHABLE}", model: x}}'
RECALL = "{probe: recall, lengths: [400], length_unit: chars, needle_counts: [2]}"


def sweep(
    *,
    models: str = f"  - {MODEL}\n",
    probes: str = f"  - {RECALL}\n",
    top: str = "name: bad\n",
) -> str:
    """A valid config (one openai model, one recall probe) with one part swapped out."""
    return f"{top}models:\n{models}probes:\n{probes}"


GOOD = sweep()
# The warehouse is checked after the endpoints: a local model has none to reach.
GOOD_LOCAL = sweep(models="  - {name: m, provider: local}\n")


def with_model(fields: str) -> str:
    return sweep(models=f"  - {MODEL[:-1]}, {fields}}}\n")


def with_recall(fields: str) -> str:
    return sweep(probes=f"  - {RECALL[:-1]}, {fields}}}\n")


def with_probe(probe: str) -> str:
    return sweep(probes=f"  - {RECALL}\n  - {probe}\n")


@dataclass(frozen=True)
class Bad:
    """One broken input: the config file (None: none written) and what the error must name."""

    id: str
    text: str | bytes | None
    names: tuple[str, ...]  # every one appears in the error line; {tmp} is the test's folder
    config_name: str = "config.yaml"
    files: dict[str, str] = field(default_factory=dict)  # other files beside the config
    dirs: tuple[str, ...] = ()  # folders to create beside the config
    warehouse: str = "wh"
    links: dict[str, str] = field(default_factory=dict)  # symlinks beside the config: name → target
    hidden: tuple[str, ...] = ()  # never in the error line (secrets)


BROKEN_CASE = "recipe:\n  needles: []\n  question: What is in it?\n  true_answer: plums\n"
# Nine levels of nine aliases: 9**9 values once expanded, from a few hundred bytes.
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
)

BAD = [
    # -- the file itself
    Bad("missing-file", None, ("config file not found", "{tmp}/config.yaml")),
    Bad(
        "config-is-a-directory",
        None,
        ("{tmp}/confdir",),
        config_name="confdir",
        dirs=("confdir",),
    ),
    Bad("not-utf8", b"name: caf\xe9\nmodels: []\n", ("config.yaml", "not UTF-8")),
    Bad("bad-yaml", "name: [bad\nmodels: x\n", ("config.yaml", "invalid YAML", "line 2")),
    Bad("yaml-python-tag", "name: !!python/object:os.system x\n", ("config.yaml", "invalid YAML")),
    Bad("not-a-mapping", "- one\n- two\n", ("config.yaml", "top level must be a mapping")),
    Bad("empty-file", "", ("config.yaml", "top level must be a mapping")),
    # -- top level
    Bad("missing-name", GOOD.replace("name: bad\n", ""), ("config.yaml", "name", "required")),
    Bad("bad-name", sweep(top="name: 'bad name!'\n"), ("config.yaml", "name", "pattern")),
    Bad("unknown-top-field", GOOD + "concurency: 3\n", ("config.yaml", "concurency", "unknown")),
    Bad("no-models", f"name: bad\nmodels: []\nprobes: [{RECALL}]\n", ("config.yaml", "models")),
    Bad("models-not-a-list", sweep(models=f"  {MODEL}\n"), ("config.yaml", "models", "list")),
    Bad("batch-size-zero", GOOD + "batch_size: 0\n", ("config.yaml", "batch_size")),
    Bad("too-many-retries", GOOD + "retry: {retries: 99}\n", ("config.yaml", "retry.retries")),
    Bad("negative-budget", GOOD + "budget: {usd: -1}\n", ("config.yaml", "budget.usd")),
    Bad("negative-token-budget", GOOD + "budget: {tokens: -10}\n", ("budget.tokens",)),
    # -- models
    Bad("unknown-model-field", with_model("temprature: 1"), ("config.yaml", "models.0.temprature")),
    Bad(
        "unknown-provider",
        GOOD.replace("provider: openai", "provider: openia"),
        ("config.yaml", "models.0.provider", "openia"),
    ),
    Bad(
        "openai-without-base-url",
        GOOD.replace(f'base_url: "{UNREACHABLE}", ', ""),
        ("config.yaml", "models.0", "base_url"),
    ),
    Bad(
        "anthropic-without-model",
        sweep(models="  - {name: claude, provider: anthropic}\n"),
        ("config.yaml", "models.0", "anthropic model needs model"),
    ),
    Bad(
        "duplicate-model-names",
        sweep(models=f"  - {MODEL}\n  - {{name: m, provider: local}}\n"),
        ("config.yaml", "unique", "m"),
    ),
    Bad("temperature-out-of-range", with_model("generation: {temperature: 5}"), ("temperature",)),
    Bad("zero-timeout", with_model("timeout_s: 0"), ("models.0.timeout_s",)),
    Bad("missing-api-key", with_model(f"api_key_env: {MISSING_KEY}"), ("models.m", MISSING_KEY)),
    Bad(
        "key-from-env-and-secret-block",
        with_model("api_key_env: K, api_key_secret: k"),
        ("models.0", "api_key_env or api_key_secret, not both"),
    ),
    # -- each provider's documented ranges: refused here, not by the API on every request
    Bad(
        "anthropic-thinking-budget-below-1024",
        sweep(
            models="  - {name: c, provider: anthropic, model: claude-x, generation: "
            "{extra: {thinking: {type: enabled, budget_tokens: 512}}}}\n"
        ),
        ("models.0.generation.extra.thinking.budget_tokens", "at least 1024", "512"),
    ),
    Bad(
        "anthropic-temperature-above-1",
        sweep(
            models="  - {name: c, provider: anthropic, model: claude-x, "
            "generation: {temperature: 1.5}}\n"
        ),
        ("models.0.generation.temperature", "0 to 1", "1.5"),
    ),
    Bad(
        "anthropic-temperature-with-thinking",
        sweep(
            models="  - {name: c, provider: anthropic, model: claude-x, generation: "
            "{temperature: 0.7, extra: {thinking: {type: enabled, budget_tokens: 2048}}}}\n"
        ),
        ("models.0.generation.temperature", "no temperature with thinking"),
    ),
    Bad(
        "gemini-thinking-budget-out-of-range",
        sweep(
            models="  - {name: g, provider: gemini, model: gemini-2.5-pro, generation: "
            "{extra: {thinkingConfig: {thinkingBudget: 0}}}}\n"
        ),
        ("models.0.generation.extra.thinkingConfig.thinkingBudget", "128 to 32768"),
    ),
    Bad(
        "openai-reasoning-model-temperature",
        sweep(
            models=f'  - {{name: o, provider: openai, base_url: "{UNREACHABLE}", model: o3-mini,'
            " generation: {temperature: 0.5}}\n"
        ),
        ("models.0.generation.temperature", "o3-mini", "reasoning model"),
    ),
    Bad(
        "bad-cron",
        sweep(top="name: bad\nschedule: {cron: '0 3 * *'}\n"),
        ("schedule.cron", "invalid cron '0 3 * *'"),
    ),
    Bad(
        "cron-out-of-range",
        sweep(top="name: bad\nschedule: {cron: '0 25 * * *'}\n"),
        ("schedule.cron", "invalid cron"),
    ),
    Bad(
        "unknown-time-zone",
        sweep(top="name: bad\nschedule: {timezone: Mars/Olympus}\n"),
        ("schedule.timezone", "unknown time zone 'Mars/Olympus'"),
    ),
    # A variant is a mapping of generation settings; anything else is a field error.
    Bad("variant-not-a-mapping", with_model("variants: {fast: 5}"), ("config.yaml", "variants")),
    Bad("variant-a-word", with_model("variants: {fast: quick}"), ("config.yaml", "variants")),
    # -- fillers
    Bad(
        "unknown-filler",
        with_recall("fillers: [nosuch]"),
        ("config.yaml", "probes.0.fillers", "nosuch"),
    ),
    Bad(
        "corpus-without-path",
        GOOD + "fillers:\n  novel: {kind: corpus}\n",
        ("config.yaml", "fillers.novel", "path"),
    ),
    Bad(
        "corpus-path-missing",
        with_recall("fillers: [novel]") + "fillers:\n  novel: {kind: corpus, path: nowhere}\n",
        ("nowhere",),
    ),
    Bad("unknown-filler-kind", GOOD + "fillers:\n  x: {kind: marble}\n", ("fillers.x.kind",)),
    # -- recall
    Bad(
        "unknown-probe",
        sweep(probes="  - {probe: nosuch, lengths: [400]}\n"),
        ("config.yaml", "probes.0", "nosuch"),
    ),
    Bad(
        "negative-length",
        GOOD.replace("lengths: [400]", "lengths: [400, -5]"),
        ("config.yaml", "probes.0.recall.lengths.1", "greater than 0"),
    ),
    Bad(
        "zero-needles",
        GOOD.replace("needle_counts: [2]", "needle_counts: [0]"),
        ("config.yaml", "probes.0.recall.needle_counts.0"),
    ),
    Bad("no-lengths", GOOD.replace("lengths: [400]", "lengths: []"), ("probes.0.recall.lengths",)),
    Bad("nan-length", GOOD.replace("lengths: [400]", "lengths: [.nan]"), ("lengths.0",)),
    Bad("unknown-length-unit", GOOD.replace("chars", "words"), ("length_unit",)),
    Bad("digits-too-many", with_recall("digits: 16"), ("config.yaml", "probes.0.recall.digits")),
    Bad("digits-too-few", with_recall("digits: 1"), ("config.yaml", "probes.0.recall.digits")),
    Bad(
        "unknown-prompt-template",
        with_recall("prompts: [recall-xx-v9]"),
        ("config.yaml", "probes.0.recall.prompts", "recall-xx-v9"),
    ),
    Bad(
        "bad-region-interval",
        with_recall("regions: ['0.5-0.2']"),
        ("config.yaml", "probes.0.recall.regions", "0.5-0.2"),
    ),
    Bad(
        "bad-region-name",
        with_recall("regions: [everywhere]"),
        ("probes.0.recall.regions", "everywhere"),
    ),
    Bad("unknown-snap", with_recall("snap: line"), ("probes.0.recall.snap",)),
    # -- other probes
    Bad(
        "stars-without-lengths",
        with_probe("{probe: counting_stars}"),
        ("config.yaml", "probes.1.counting_stars", "max_length"),
    ),
    Bad(
        "goto-lines-above-value-max",
        with_probe("{probe: goto, line_counts: [50], value_max: 20}"),
        ("config.yaml", "probes.1.goto", "value_max"),
    ),
    Bad(
        "judge-unknown-model",
        with_probe(f"{{probe: cases, cases_file: {CASES_YAML}, lengths: [500], judge: nojudge}}"),
        ("config.yaml", "probes.1.judge", "nojudge"),
    ),
    Bad(
        "embedder-unknown-model",
        with_probe(f"{{probe: rag, cases_file: {CASES_YAML}, lengths: [500], embedder: noemb}}"),
        ("config.yaml", "probes.1.embedder", "noemb"),
    ),
    Bad(
        "cases-file-missing",
        with_probe("{probe: cases, cases_file: nope.yaml, lengths: [500]}"),
        ("cases file", "{tmp}/nope.yaml"),
    ),
    Bad(
        "cases-file-is-a-directory",
        with_probe("{probe: cases, cases_file: casedir, lengths: [500]}"),
        ("{tmp}/casedir",),
        dirs=("casedir",),
    ),
    Bad(
        "broken-case",
        with_probe("{probe: cases, cases_file: broken.yaml, lengths: [500]}"),
        ("{tmp}/broken.yaml", "recipe", "needles"),
        files={"broken.yaml": BROKEN_CASE},
    ),
    Bad(
        "cases-file-bad-yaml",
        with_probe("{probe: cases, cases_file: broken.yaml, lengths: [500]}"),
        ("{tmp}/broken.yaml", "invalid YAML"),
        files={"broken.yaml": "recipe: [\n"},
    ),
    Bad(
        "unknown-case",
        with_probe(f"{{probe: cases, cases_file: {CASES_YAML}, cases: [nosuch], lengths: [500]}}"),
        ("en.yaml", "nosuch"),
    ),
    Bad(
        "depth-out-of-range",
        with_probe(
            f"{{probe: cases, cases_file: {CASES_YAML}, lengths: [500], depths: [50, 150]}}"
        ),
        ("config.yaml", "probes.1.cases.depths"),
    ),
    Bad(
        "rubric-file-missing",
        sweep(
            models=f"  - {MODEL}\n  - {{name: j, provider: local, under_test: false}}\n",
            probes=f"  - {{probe: cases, cases_file: {CASES_YAML}, lengths: [500], judge: j, "
            "rubric_file: nope.md}\n",
        ),
        ("rubric file", "{tmp}/nope.md"),
    ),
    Bad(
        "chunk-overlap-not-below-size",
        with_probe(
            f"{{probe: rag, cases_file: {CASES_YAML}, lengths: [500], chunk_size: 100, "
            "chunk_overlap: 100}"
        ),
        ("config.yaml", "probes.1.rag", "chunk_overlap"),
    ),
    # -- the warehouse
    Bad(
        "warehouse-is-a-file",
        GOOD_LOCAL,
        ("cannot write warehouse", "{tmp}/taken"),
        files={"taken": "not a folder"},
        warehouse="taken",
    ),
    Bad(
        "warehouse-under-a-file",
        GOOD_LOCAL,
        ("cannot write warehouse", "{tmp}/taken/wh"),
        files={"taken": "not a folder"},
        warehouse="taken/wh",
    ),
    # -- hostile input: refused in one line, quickly, in little memory (issue 16)
    Bad(
        "needles-beyond-the-digits",
        GOOD.replace("lengths: [400]", "lengths: [100000]").replace("[2]", "[20000]"),
        ("probes.0.recall.needle_counts", "20,000", "9,000"),
    ),
    Bad(
        "needles-beyond-the-length",
        GOOD.replace("needle_counts: [2]", "needle_counts: [20000]"),
        ("probes.0.recall.needle_counts", "cannot fit"),
    ),
    Bad(
        "port-out-of-range",
        GOOD.replace(UNREACHABLE, "http://127.0.0.1:99999/v1"),
        ("config.yaml", "models.0.base_url", "99999", "out of range"),
    ),
    Bad(
        "url-not-http",
        GOOD.replace(UNREACHABLE, "file:///etc/passwd"),
        ("models.0.base_url", "http:// or https://"),
    ),
    Bad("yaml-alias-bomb", ALIAS_BOMB, ("config.yaml", "alias bomb")),
    Bad("yaml-recursive-alias", "a: &a [*a]\n", ("config.yaml", "refers to itself")),
    Bad("yaml-nested-too-deep", "x: " + "[" * 5000 + "]" * 5000 + "\n", ("config.yaml",)),
    Bad("yaml-huge-integer", "name: bad\nseed: " + "9" * 5000 + "\n", ("config.yaml",)),
    Bad(
        "a-billion-repeats",
        with_recall("repeats: 1000000000"),
        ("config.yaml", "max_cells", "1,000,000,000 cells", "1,000,000"),
    ),
    Bad(
        "corpus-entry-a-directory",
        with_recall("fillers: [novel]") + "fillers:\n  novel: {kind: corpus, path: corpus}\n",
        ("fillers.novel.path", "{tmp}/corpus/b.txt", "a directory"),
        files={"corpus/a.txt": "Some prose. More prose.\n"},
        dirs=("corpus", "corpus/b.txt"),
    ),
    Bad(
        "corpus-entry-a-symlink-loop",
        with_recall("fillers: [novel]") + "fillers:\n  novel: {kind: corpus, path: corpus}\n",
        ("fillers.novel.path", "{tmp}/corpus/loop.txt", "symlink loop"),
        files={"corpus/a.txt": "Some prose. More prose.\n"},
        dirs=("corpus",),
        links={"corpus/loop.txt": "loop.txt"},
    ),
    Bad(
        "corpus-not-utf8",
        with_recall("fillers: [novel]") + "fillers:\n  novel: {kind: corpus, path: corpus}\n",
        ("fillers.novel.path", "not UTF-8"),
        files={"corpus/a.txt": "caf\udce9 au lait\n"},
        dirs=("corpus",),
    ),
    Bad(
        "warehouse-of-another-tool",
        GOOD_LOCAL,
        ("{tmp}/wh", "not a needlescope warehouse", "warehouse.json"),
        files={"wh/warehouse.json": '{"tool": "someone else"}', "wh/notes.txt": "mine"},
    ),
    Bad(
        "warehouse-folder-in-use",
        GOOD_LOCAL,
        ("{tmp}/wh", "not a needlescope warehouse", "results.csv"),
        files={"wh/results.csv": "a,b\n1,2\n"},
    ),
    Bad(
        "corrupt-parquet-in-the-warehouse",
        GOOD_LOCAL,
        ("corrupt Parquet file", "{tmp}/wh/parquet/answers/recall/m/x.parquet"),
        files={
            "wh/warehouse.json": '{"id": "0123456789abcdef"}',
            "wh/parquet/answers/recall/m/x.parquet": "PAR1 but then not Parquet at all",
        },
    ),
    Bad("negative-backoff", GOOD + "retry: {backoff_s: [2, -1]}\n", ("retry.backoff_s.1",)),
    Bad("a-key-given-twice", GOOD + "name: again\n", ("config.yaml", "'name' is given twice")),
    Bad(
        "config-a-symlink-loop",
        None,
        ("{tmp}/loop.yaml", "symlink loop"),
        config_name="loop.yaml",
        links={"loop.yaml": "loop.yaml"},
    ),
    Bad("config-of-50-mb", GOOD + "#" * (50 << 20) + "\n", ("config.yaml", "larger than")),
    Bad(
        "url-credentials-and-a-key",
        GOOD.replace(UNREACHABLE, "http://user:s3cret-pw@127.0.0.1:9/v1").replace(
            "model: x}", "model: x, api_key_env: SOME_KEY}"
        ),
        ("models.0.base_url", "credentials", "api_key_env"),
        hidden=("s3cret-pw",),
    ),
    # -- what the user typed is shown as typed, never read as console markup
    Bad("brackets-in-a-value", with_recall("fillers: ['[/x]']"), ("config.yaml", "[/x]")),
    Bad("brackets-in-the-file-name", "- one\n", ("[red]odd.yaml",), config_name="[red]odd.yaml"),
]


def prepare(tmp_path: Path, bad: Bad) -> tuple[list[str], Path, list[str]]:
    """Write the case's files; return the CLI arguments, the warehouse and the names to find."""
    for name in bad.dirs:
        (tmp_path / name).mkdir(parents=True)
    for name, text in bad.files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(text.encode("utf-8", "surrogateescape"))
    for name, target in bad.links.items():
        (tmp_path / name).symlink_to(target)
    config = tmp_path / bad.config_name
    if isinstance(bad.text, bytes):
        config.write_bytes(bad.text)
    elif bad.text is not None:
        config.write_text(bad.text, encoding="utf-8")
    wh = tmp_path / bad.warehouse
    names = [n.replace("{tmp}", str(tmp_path)) for n in bad.names]
    return ["run", str(config), "-w", str(wh)], wh, names


def tree(folder: Path) -> dict[str, bytes] | None:
    """Every file under ``folder`` with its content; None when there is no folder."""
    if not folder.is_dir():
        return None
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No key in the environment and no .env in the working folder."""
    monkeypatch.delenv(MISSING_KEY, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("bad", BAD, ids=[b.id for b in BAD])
def test_bad_config_is_one_line_with_exit_code_2(bad: Bad, tmp_path: Path, clean_env: None) -> None:
    args, wh, names = prepare(tmp_path, bad)
    before = tree(wh)
    result = CliRunner().invoke(app, args)
    output = result.output
    assert "Traceback" not in output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, output
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert lines[0].startswith("error: "), lines[0]
    for name in names:
        assert name in lines[0], f"{name!r} not in {lines[0]!r}"
    for secret in bad.hidden:
        assert secret not in output
    # The warehouse folder is left as it was: not created, not written into.
    assert tree(wh) == before, "a broken config touched the warehouse folder"


def test_a_bad_local_thread_count_is_one_line_before_anything_starts(
    tmp_path: Path, clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEEDLESCOPE_LOCAL_THREADS", "²")
    config, wh = tmp_path / "config.yaml", tmp_path / "wh"
    config.write_text(GOOD_LOCAL, encoding="utf-8")
    result = CliRunner().invoke(app, ["run", str(config), "-w", str(wh)])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    expected = "NEEDLESCOPE_LOCAL_THREADS='²': expected a whole number of threads, at least 1"
    assert lines == [f"error: {expected}"]
    assert tree(wh) is None  # checked before anything is written


def test_the_configs_the_cases_break_are_valid(tmp_path: Path) -> None:
    from needlescope.config._file import load_config

    for text in (GOOD, GOOD_LOCAL):
        path = tmp_path / "good.yaml"
        path.write_text(text, encoding="utf-8")
        assert load_config(path).models[0].name == "m"


PROBE = """
import json, sys
from needlescope.flows.cli._app import app

outcomes = []
for args in json.loads(sys.argv[1]):
    try:
        app(args)
        code = 0
    except SystemExit as done:
        code = done.code
    except BaseException as exc:
        code = type(exc).__name__
    outcomes.append([code, "prefect" in sys.modules])
print(json.dumps(outcomes))
"""


def test_bad_configs_never_import_prefect(tmp_path: Path) -> None:
    """Every case above, in one fresh interpreter: none of them imports Prefect."""
    runs = []
    for index, bad in enumerate(BAD):
        folder = tmp_path / f"{index:02d}"
        folder.mkdir()
        args, _, _ = prepare(folder, bad)
        runs.append(args)
    env = {k: v for k, v in os.environ.items() if k != MISSING_KEY}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(runs)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = json.loads(done.stdout.strip().splitlines()[-1])
    imported = [bad.id for bad, (_, prefect) in zip(BAD, outcomes, strict=True) if prefect]
    assert not imported, f"Prefect was imported by: {imported}"
    # Each case stopped with an error of its own (its exit code is checked above, in-process).
    assert all(code != 0 for code, _ in outcomes), outcomes


# The hostile inputs of issue 16: each refused within 10 s, the whole set in under 1 GB.
HOSTILE = [
    b
    for b in BAD
    if b.id
    in {
        "needles-beyond-the-digits",
        "port-out-of-range",
        "yaml-alias-bomb",
        "a-billion-repeats",
        "corpus-entry-a-directory",
        "corpus-entry-a-symlink-loop",
        "warehouse-of-another-tool",
        "corrupt-parquet-in-the-warehouse",
        "negative-backoff",
        "a-key-given-twice",
        "config-a-symlink-loop",
        "config-of-50-mb",
        "url-credentials-and-a-key",
    }
]
BOUNDED = """
import io, json, resource, sys, time
from contextlib import redirect_stderr, redirect_stdout
limit = 4 << 30  # a regression fails here rather than taking the machine's memory
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from needlescope.flows.cli._app import app

outcomes = []
for args in json.loads(sys.argv[1]):
    began, out = time.monotonic(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(out):
            app(args)
        code = 0
    except SystemExit as done:
        code = done.code
    except BaseException as exc:
        code = type(exc).__name__
    outcomes.append([code, round(time.monotonic() - began, 2), out.getvalue()])
peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
prefect = "prefect" in sys.modules
print(json.dumps({"outcomes": outcomes, "peak_mb": peak_kb / 1024, "prefect": prefect}))
"""


def test_hostile_configs_are_refused_in_little_memory(tmp_path: Path) -> None:
    runs, before = [], []
    for index, bad in enumerate(HOSTILE):
        folder = tmp_path / f"{index:02d}"
        folder.mkdir()
        args, wh, _ = prepare(folder, bad)
        runs.append(args)
        before.append((wh, tree(wh)))
    env = {k: v for k, v in os.environ.items() if k != MISSING_KEY}
    done = subprocess.run(
        [sys.executable, "-c", BOUNDED, json.dumps(runs)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    for bad, (code, _seconds, output), (wh, tree_before) in zip(
        HOSTILE, report["outcomes"], before, strict=True
    ):
        lines = [line for line in output.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1, (bad.id, code, output[-2000:])
        assert tree(wh) == tree_before, bad.id
    assert report["peak_mb"] < 1024, report["peak_mb"]
    assert not report["prefect"]
    print(
        "hostile configs:",
        len(HOSTILE),
        "peak MB",
        round(report["peak_mb"]),
        "slowest s",
        max(seconds for _, seconds, _ in report["outcomes"]),
    )
