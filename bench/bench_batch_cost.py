"""What batch mode and prompt caching save, and what a large batch sweep costs.

Every sweep runs against a real Prefect server started here and the fake Anthropic API of
tests/support (Messages and Message Batches, a prompt cache by Anthropic's published rules),
a fresh fake per sweep, priced at 3 / 15 USD per Mtok with needlescope's batch (50%) and
Anthropic cache (reads 0.1×, 1-hour writes 2×) rules:

1. grid: a gkamradt grid, 35 lengths × 35 needle depths (0–100%), one needle (recall), Paul
   Graham's essays, sent three ways: synchronous without caching (the baseline), batch, batch
   with `cache: auto`: each way's cost, its ratio to the baseline, the share of input read from
   the cache. Lengths 1K–200K tokens at 4 characters a token (`length_unit: chars`, 4,000 to
   800,000 characters): a fit in tokens asks the fake to count candidate prompts, and a first
   try in tokens had reached only the 83K-token cells after 5 minutes (`--unit tokens`).
   The fake bills words as tokens (~5.8 characters each in the essays). Its batches run
   `--group` requests a step (32), in a random order; a step reads only what earlier steps
   wrote to the cache.
2. demo: the same three ways for every probe of configs/demo.yaml (recall, counting_stars,
   goto, cases, rag), the fake counting cl100k_base tokens (a pattern filler's `a|a|…` is
   one word: a fit to a length in words never ends); the judge is a synchronous fake model
   of its own, not in the figures.
3. sweep: a 20,000-cell recall sweep (500–900 characters, instant answers) in batch mode
   against the same cells sent one request each (concurrency 16): wall time, CPU time and
   peak RSS of the `needlescope run` process (/usr/bin/time -v); `--cells N` for another size.

Every part runs `needlescope run` as a user does.

`--quick`: small grids, for a check that the script works (about a minute and a half);
`--parts grid,demo,sweep` runs some parts only; `--keep` keeps the sweeps' folder and logs.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
NEEDLESCOPE = Path(sys.executable).parent / "needlescope"
ESSAYS = REPO.parent / "shared" / "corpora" / "paul_graham_essays"
MODEL = "claude-sonnet-4-5"
PRICE = "{input_per_mtok: 3, output_per_mtok: 15}"
CHARS_PER_TOKEN = 4  # the grid's lengths in characters, 4 to a token
# (name, the model's extra keys): the three ways of sending the same cells
WAYS = (
    ("sync", "concurrency: 8"),
    ("batch", "batch: {poll_s: 0.05}"),
    ("cached", "batch: {poll_s: 0.05}, cache: auto"),
)
Totals = dict[str, float]


def prompt_text(body: dict[str, Any]) -> str:
    """The whole prompt's text (system and every message) of an Anthropic body."""
    parts: list[str] = []
    for content in [body.get("system") or ""] + [m["content"] for m in body["messages"]]:
        if isinstance(content, list):
            parts += [str(block.get("text", "")) for block in content]
        else:
            parts.append(str(content))
    return "".join(parts)


def answer(body: dict[str, Any]) -> str:
    """A short answer: a recall prompt's hidden numbers as JSON, a judge's verdict, else one
    sentence (the fake cuts it at max_tokens)."""
    text = prompt_text(body)
    if "<text>" in text and "digit numbers" in text:
        haystack = text.split("<text>", 1)[1].rsplit("</text>", 1)[0]
        found = re.findall(r"(?<!\d)\d{4}(?!\d)", haystack)
        return json.dumps({str(i + 1): int(n) for i, n in enumerate(found)})
    if "rubric" in text.lower():
        return '{"score": 4, "reason": "mostly right"}'
    return "The answer is in the text: it is the one fact the question asks for."


def model_yaml(base_url: str, name: str, more: str) -> str:
    return (
        f"  - {{name: {name}, provider: anthropic, base_url: '{base_url}', model: {MODEL},"
        f" price: {PRICE}, {more}}}"
    )


def depth_regions(depths: int) -> list[str]:
    """One region per depth, 0 to 100%: a single needle placed `even` goes to its region's
    middle, so depth d gets the region (2d - 1, 2d) clipped to 0-1 (a millionth wide at 0%
    and 100%)."""
    regions = []
    for i in range(depths):
        d = i / (depths - 1)
        low, high = max(0.0, 2 * d - 1), min(1.0, 2 * d)
        if high - low < 1e-6:
            low, high = (0.0, 1e-6) if d == 0 else (1 - 1e-6, 1.0)
        regions.append(f"{low:.6f}-{high:.6f}")
    return regions


def grid_config(models: str, lengths: list[int], depths: int, unit: str) -> str:
    return f"""
name: gkamradt
seed: 3
compact: false
retry: {{retries: 0, backoff_s: [0]}}
fillers:
  essays: {{kind: corpus, path: '{ESSAYS}'}}
models:
{models}
probes:
  - probe: recall
    lengths: {lengths}
    length_unit: {unit}
    needle_counts: [1]
    placements: [even]
    regions: {json.dumps(depth_regions(depths))}
    fillers: [essays]
"""


def demo_config(models: str, base_url: str) -> str:
    """configs/demo.yaml's probes, its judges (the model under test there) a synchronous fake
    model of their own."""
    demo = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    probes = list(demo["probes"])
    for probe in probes:
        for key in ("cases_file", "rubric_file"):
            if key in probe:
                probe[key] = str(REPO / "configs" / probe[key])
        if "judge" in probe:
            probe["judge"] = "judge"
    judge = model_yaml(base_url, "judge", "concurrency: 4, under_test: false")
    return f"""
name: demo-cost
seed: 7
compact: false
retry: {{retries: 0, backoff_s: [0]}}
models:
{models}
{judge}
probes: {json.dumps(probes)}
"""


def sweep_config(models: str, repeats: int) -> str:
    # 5 lengths × 2 needle counts × 2 fillers × repeats cells
    return f"""
name: large
seed: 5
compact: false
retry: {{retries: 0, backoff_s: [0]}}
models:
{models}
probes:
  - probe: recall
    lengths: [500, 600, 700, 800, 900]
    length_unit: chars
    needle_counts: [1, 2]
    fillers: [pattern, noise]
    repeats: {repeats}
"""


def cli_run(config: Path, warehouse: Path, env: dict[str, str]) -> dict[str, float]:
    """`needlescope run` of ``config`` under /usr/bin/time -v: its wall time, CPU time (user +
    system, s) and peak RSS (MiB). Its output goes to the config's .log beside it."""
    command = [str(NEEDLESCOPE), "run", str(config), "-w", str(warehouse)]
    command += ["--epoch", "e", "--no-report"]
    started = time.monotonic()
    done = subprocess.run(
        ["/usr/bin/time", "-v", *command],
        env=env,
        cwd=config.parent,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=3600,
    )
    wall = time.monotonic() - started
    config.with_suffix(".log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"{config.name}: exit {done.returncode}\n{done.stderr[-4000:]}")

    def field(label: str) -> float:
        found = re.search(rf"{re.escape(label)}: ([\d.]+)", done.stderr)
        return float(found.group(1)) if found else float("nan")

    cpu = field("User time (seconds)") + field("System time (seconds)")
    return {"wall": wall, "cpu": cpu, "mib": field("Maximum resident set size (kbytes)") / 1024}


def totals(warehouse: Path, model: str) -> Totals:
    """The model's answers: cells, errors, cost and tokens (read, written, output)."""
    from needlescope.warehouse.store import Warehouse

    con = Warehouse(warehouse).connect()
    try:
        row = con.execute(
            """
            SELECT count(*), count(error_kind), sum(cost_usd), sum(prompt_tokens),
                   sum(coalesce(cached_tokens, 0)), sum(coalesce(cache_write_tokens, 0)),
                   sum(coalesce(cache_write_1h_tokens, 0)), sum(completion_tokens),
                   count(batch_id), count(DISTINCT batch_id)
            FROM results WHERE model = ?
            """,
            [model],
        ).fetchone()
    finally:
        con.close()
    assert row is not None
    keys = ("cells", "errors", "usd", "prompt", "read", "written", "written_1h", "output")
    keys += ("batched", "batches")
    return dict(zip(keys, (float(v or 0) for v in row), strict=True))


def fake_class() -> type[Any]:
    """The fake Anthropic API taking request bodies up to the Message Batches API's 256 MB
    (the fakes' own limit is 64 MiB; needlescope splits batches at Anthropic's 256 MB)."""
    from aiohttp import web

    from tests.support.anthropic_batch_server import FakeAnthropicBatchServer

    class LargeBatches(FakeAnthropicBatchServer):
        async def start(self) -> LargeBatches:
            app = web.Application(client_max_size=260 * 1024**2, middlewares=[self._watched])
            self._add_routes(app.router)
            self._runner = web.AppRunner(
                app, access_log=None, handler_cancellation=True, shutdown_timeout=0.1
            )
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=1024)
            await site.start()
            self.port = self._runner.addresses[0][1]
            return self

    return LargeBatches


@contextmanager
def anthropic_fake(group: int, subword: bool = False) -> Iterator[Any]:
    """A fresh fake (an empty prompt cache) whose batches run ``group`` requests a step;
    ``subword``: it counts cl100k_base tokens, not words (a pattern filler's `a|a|…` is one
    word: a fit to a length in words never ends)."""
    with fake_class()(answer, group=group, context_window=1_000_000) as srv:
        srv.clock = int(time.time())  # batches are matched by creation time against real time
        if subword:
            from needlescope.fitting import tokens

            srv.words = lambda text: tokens.count(text) if isinstance(text, str) else 0
        yield srv


def three_ways(
    work: Path,
    label: str,
    config_text: Callable[[str, str], str],
    run: Callable[[Path, Path, dict[str, str]], dict[str, float]],
    env: dict[str, str],
    group: int,
    subword: bool = False,
) -> tuple[dict[str, Totals], Totals]:
    """Each way in a sweep of its own against a fresh fake: its totals, with its run's
    measures and the fake's cache counts; and the ratios to the synchronous baseline."""
    found: dict[str, Totals] = {}
    for name, more in WAYS:
        with anthropic_fake(group, subword) as srv:
            path = work / f"{label}-{name}.yaml"
            path.write_text(config_text(model_yaml(srv.base_url, name, more), srv.base_url))
            measured = run(path, work / f"wh-{label}-{name}", env)
            cache = srv.cache
            fake = {"hits": cache.hits, "misses": cache.misses, "entries": cache.writes}
        found[name] = totals(work / f"wh-{label}-{name}", name) | measured | fake
    base = found["sync"]
    for name, t in found.items():
        assert t["errors"] == 0 and t["cells"] == base["cells"] and t["prompt"] == base["prompt"]
        assert t["batched"] == (0 if name == "sync" else t["cells"]), (name, t)
    ratios = {
        "batch": found["batch"]["usd"] / base["usd"],
        "cached": found["cached"]["usd"] / base["usd"],
        "read": found["cached"]["read"] / found["cached"]["prompt"],
        "written": found["cached"]["written"] / found["cached"]["prompt"],
    }
    return found, ratios


def plural(n: float, noun: str) -> str:
    return f"{int(n):,} {noun}{'es' * (int(n) != 1)}"


def print_ways(found: dict[str, Totals], ratios: Totals) -> None:
    for name, t in found.items():
        cache = ""
        if t["hits"] + t["misses"]:
            cache = (
                f"; {int(t['entries']):,} cache entries written, {int(t['hits']):,} requests"
                f" read one, {int(t['misses']):,} marked ones none"
            )
        print(
            f"  {name:6s} ${t['usd']:10.4f}  {int(t['prompt']):,} prompt tokens:"
            f" {int(t['read']):,} read from cache, {int(t['written']):,} written"
            f" ({int(t['written_1h']):,} for 1 hour); {int(t['output']):,} output;"
            f" {int(t['batched']):,} answers from {plural(t['batches'], 'batch')};"
            f" run {t['wall']:.0f} s{cache}"
        )
    print(
        f"  batch {ratios['batch']:.1%} of synchronous; batch with cache: auto"
        f" {ratios['cached']:.1%}: {ratios['read']:.1%} of its input tokens read from the"
        f" cache, {ratios['written']:.1%} written to it"
    )


def large_sweep(work: Path, env: dict[str, str], cells: int) -> None:
    repeats = max(1, cells // 20)
    cells = 20 * repeats
    measured: dict[str, dict[str, float]] = {}
    ways = (("sync", "concurrency: 16"), ("batch", "batch: {poll_s: 0.5}"))
    for name, more in ways:
        # every request of a batch runs in its first step: answers come at the first poll
        with anthropic_fake(group=cells) as srv:
            path = work / f"large-{name}.yaml"
            path.write_text(sweep_config(model_yaml(srv.base_url, name, more), repeats))
            measured[name] = cli_run(path, work / f"wh-large-{name}", env)
        t = totals(work / f"wh-large-{name}", name)
        assert t["cells"] == cells and t["errors"] == 0, t
        assert t["batched"] == (0 if name == "sync" else cells), t
        m = measured[name]
        print(
            f"  {name:5s} {m['wall']:6.1f} s wall ({1000 * m['wall'] / cells:.1f} ms a cell),"
            f" {m['cpu']:.0f} s CPU, peak RSS {m['mib']:,.0f} MiB"
            + (f"; {plural(t['batches'], 'batch')}" if t["batches"] else "")
        )
    sync, batch = measured["sync"], measured["batch"]
    print(
        f"TARGET {cells:,}-cell batch sweep, needlescope run: {batch['wall']:.0f} s wall,"
        f" {batch['mib']:,.0f} MiB peak | — | the same cells synchronous (concurrency 16):"
        f" {sync['wall']:.0f} s, {sync['mib']:,.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small grids (about 1.5 min)")
    parser.add_argument("--parts", default="grid,demo,sweep", help="which parts to run")
    parser.add_argument(
        "--unit",
        default="chars",
        choices=["chars", "tokens"],
        help="the grid's length unit: chars (4 a token), or the fake's tokens (words: slow)",
    )
    parser.add_argument("--scale", type=float, default=1.0, help="the grid's lengths × this")
    parser.add_argument("--group", type=int, default=32, help="requests a batch step runs")
    parser.add_argument("--cells", type=int, default=20_000, help="the large sweep's cells")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args()
    parts = args.parts.split(",")
    if args.quick:
        tokens, depths, args.cells = [1000, 5000, 10000], 5, 400
    else:
        tokens, depths = [round(1000 + i * 199_000 / 34) for i in range(35)], 35
    tokens = [round(n * args.scale) for n in tokens]
    lengths = [CHARS_PER_TOKEN * n for n in tokens] if args.unit == "chars" else tokens
    work = Path(tempfile.mkdtemp(prefix="ns-bench-batch-"))
    from tests.support.prefect_server import base_env, free_port

    env = {**base_env(work / "prefect"), "PREFECT_LOGGING_LEVEL": "WARNING"}
    os.environ.update(env)  # for the flow run in this process
    (work / "prefect").mkdir()
    from needlescope.flows.local_server import running_prefect_server

    started = time.monotonic()
    try:
        with running_prefect_server(
            free_port(), ui=False, env=env, log_path=work / "server.log", log=lambda _: None
        ) as api:
            env["PREFECT_API_URL"] = os.environ["PREFECT_API_URL"] = api
            logging.getLogger("prefect").setLevel(logging.WARNING)
            if "grid" in parts:
                unit = "chars (4 a token)" if args.unit == "chars" else "tokens (the fake's)"
                print(
                    f"gkamradt grid: {len(lengths)} lengths {lengths[0]:,}–{lengths[-1]:,}"
                    f" {unit} × {depths} depths 0–100%, one needle (recall), Paul Graham's"
                    " essays; the Anthropic fake bills words as tokens; its batches run"
                    f" {args.group} requests a step, in a random order; 3 / 15 USD per Mtok:"
                )

                def grid(models: str, _: str) -> str:
                    return grid_config(models, lengths, depths, args.unit)

                found, ratios = three_ways(work, "grid", grid, cli_run, env, args.group)
                print_ways(found, ratios)
                print(
                    f"TARGET gkamradt grid ({len(lengths)}×{depths}), batch / synchronous:"
                    f" {ratios['batch']:.1%} | goal <= 50% | synchronous without caching"
                )
                print(
                    f"TARGET gkamradt grid ({len(lengths)}×{depths}), batch with cache: auto /"
                    f" synchronous: {ratios['cached']:.1%} ({ratios['read']:.1%} of input read"
                    " from cache) | goal <= 35% | synchronous without caching"
                )
            if "demo" in parts:
                print(
                    "configs/demo.yaml's probes (recall, counting_stars, goto, cases, rag) on"
                    " the Anthropic fake counting cl100k_base tokens, batches of"
                    f" {args.group} requests a step:"
                )
                found, ratios = three_ways(
                    work, "demo", demo_config, cli_run, env, args.group, subword=True
                )
                print_ways(found, ratios)
                print(
                    f"TARGET demo probes, batch / synchronous: {ratios['batch']:.1%}; with cache:"
                    f" auto {ratios['cached']:.1%} | goal <= 50%; <= 35% | synchronous without"
                    " caching"
                )
            if "sweep" in parts:
                print(
                    f"{20 * max(1, args.cells // 20):,}-cell recall sweep (500–900 characters,"
                    " patterns and noise, the Anthropic fake answering at once), `needlescope"
                    " run` under /usr/bin/time -v:"
                )
                large_sweep(work, env, args.cells)
    finally:
        if args.keep:
            print(f"work folder: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"whole benchmark: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
