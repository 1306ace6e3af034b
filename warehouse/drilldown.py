"""Drill-down: the answers behind a cell of a recall heatmap, embedded in the page.

A heatmap cell of the needle charts (position accuracy, missing, misordered needles,
hallucinations) pools the answers of one cell config: a model, a length and the variant axes
the probe varies (needle count, filler, …), over every epoch. For each such config the page
carries up to :data:`PER_CELL` of its answers, picked in DuckDB with a window function
(parsed answers first, latest epoch first), never loading all answers:

* the expected needles, the reply (cut at :data:`RESPONSE_CHARS` characters), the grade
  (accuracy, parse_ok, error_kind) and the per-needle outcomes (``needle_outcomes``);
* the haystack around each needle (±:data:`CONTEXT_CHARS` characters). The haystack is not
  stored (unless ``save_prompts``) but rebuilt exactly from the cell row: its fields give
  the :class:`~needlescope.cells.Cell` (checked against its id), ``filler_chars`` and
  ``prompt_length`` the fitted size, and the rebuilt prompt is checked against the stored
  SHA-256. A cell that cannot be rebuilt (a corpus folder that is gone, a RAG cell, a legacy
  import) says "context unavailable" and why.

Everything is one JSON object (``<script type="application/json" id="drilldown">``): the
page's script finds a clicked cell's answers by chart id (``charts``: which probe and which
field the chart puts on y) and the datum's model, variant label and length (``groups``).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

import duckdb
import polars as pl

from needlescope.cells import Cell, canonical_json, filler_identity
from needlescope.config import FillerSpec, SweepConfig
from needlescope.fillers import Filler, filler_from_spec
from needlescope.probes import probe_module
from needlescope.probes.build import rebuild
from needlescope.warehouse import charts
from needlescope.warehouse.report_html import anchor, json_clean, json_script

# The heatmaps a click drills into, and the field each puts on its y axis.
HEATMAPS: dict[str, tuple[str, str]] = {
    "position_accuracy": ("needle_index", "Position accuracy"),
    "missing_by_position": ("needle_index", "Missing needles"),
    "misorder_by_position": ("needle_index", "Misordered needles"),
    "hallucinations_by_interval": ("interval", "Hallucinations"),
}
PER_CELL = 8  # answers shown per heatmap cell
MAX_ANSWERS = 1500  # answers in one page: fewer per cell when the heatmaps have many cells
RESPONSE_CHARS = 4000  # of each reply
RESPONSE_BUDGET = 2_000_000  # characters of replies in one page: shorter cuts past it
CONTEXT_CHARS = 120  # of haystack on each side of a needle
MAX_NEEDLE_CONTEXTS = 100  # needles with their context, per answer
CONTEXT_BUDGET = 3_000_000  # characters of context in one page, all cells together
REBUILD_SECONDS = 30.0  # time spent rebuilding contexts, all cells together
KEY_SEPARATOR = "\x1f"
# A cell config: every grid axis but the repeat (stats.AXES without the probe).
GROUP_AXES = (
    "model",
    "length_unit",
    "length",
    "needle_count",
    "filler",
    "prompt_version",
    "placement",
    "region",
)
_DEPTH = re.compile(r"depth (.+)%")
_CELL_FIELDS = (
    "model",
    "model_identity",
    "generation",
    "probe",
    "probe_params",
    "filler",
    "filler_spec",
    "placement",
    "region",
    "prompt_version",
    "length",
    "length_unit",
    "needle_count",
    "repeat",
    "seed",
)


class ContextUnavailable(Exception):
    """A cell's haystack cannot be rebuilt; the message says why, for the reader."""


def group_key(probe: str, model: object, variant: object, length: object) -> str:
    """The key of a heatmap cell in ``groups``: what the page builds from a clicked datum."""
    return KEY_SEPARATOR.join(str(v) for v in (probe, model, variant, length))


def chart_ids(probe: str) -> dict[str, str]:
    """The page's id of each drillable heatmap of ``probe`` (recall keeps the plain names)."""
    prefix = "" if probe == "recall" else f"{anchor(probe)}_"
    return {prefix + name: name for name in HEATMAPS}


# ----------------------------------------------------------------------------- rebuilding


def cell_of(row: Mapping[str, Any]) -> tuple[Cell, ModuleType]:
    """The :class:`Cell` a ``cells`` row was built from, checked against its ``cell_id``."""
    try:
        module = probe_module(str(row.get("probe")))
    except KeyError as exc:
        raise ContextUnavailable(f"unknown probe {row.get('probe')!r}") from exc
    missing = [name for name in _CELL_FIELDS if row.get(name) is None]
    if missing:
        raise ContextUnavailable(f"the cell row has no {', '.join(missing)}")
    region, depth = str(row["region"]), None
    match = _DEPTH.fullmatch(region)
    if match:  # cells with a depth store it as their region (rows.bare_cell_row)
        depth = float(match.group(1))
        region = str(getattr(module, "REGION", region))
    cell = Cell(
        model=str(row["model"]),
        model_identity=str(row["model_identity"]),
        generation=str(row["generation"]),
        probe=str(row["probe"]),
        probe_params=str(row["probe_params"]),
        filler=str(row["filler"]),
        filler_spec=str(row["filler_spec"]),
        placement=str(row["placement"]),
        region=region,
        prompt_version=str(row["prompt_version"]),
        length=int(row["length"]),
        length_unit=str(row["length_unit"]),
        needle_count=int(row["needle_count"]),
        repeat=int(row["repeat"]),
        seed=int(row["seed"]),
        depth=depth,
    )
    if cell.cell_id != row.get("cell_id"):
        raise ContextUnavailable("the cell's fields do not hash to its id")
    return cell, module


def _spec_from_identity(identity: str) -> FillerSpec:
    """The filler definition behind a built-in filler's description (not corpora)."""
    try:
        described = json.loads(identity)
    except ValueError as exc:
        raise ContextUnavailable("the filler description is not JSON") from exc
    kind = described.get("kind") if isinstance(described, dict) else None
    if kind == "pattern":
        spec = FillerSpec(kind="pattern", pattern=described.get("pattern", "a|"))
    elif kind in ("noise", "prose"):
        spec = FillerSpec(
            kind=kind, seed=int(described.get("seed", 0)), language=described.get("language", "en")
        )
    elif kind == "corpus":
        raise ContextUnavailable(
            f"the corpus folder {described.get('directory')!r} is not in the run's config"
        )
    else:
        raise ContextUnavailable(f"filler {kind!r} cannot be rebuilt")
    if canonical_json(filler_from_spec(spec).describe()) != identity:
        raise ContextUnavailable("the filler's generator changed since this cell was built")
    return spec


class Rebuilder:
    """Rebuilds haystacks, reusing fillers (their text grows once) and parsed configs."""

    def __init__(self, configs: Mapping[str, str | None]) -> None:
        self._config_json = dict(configs)
        self._configs: dict[str, SweepConfig | None] = {}
        self._fillers: dict[tuple[str, str | None], tuple[Filler, str]] = {}

    def _config(self, run_id: object) -> SweepConfig | None:
        key = str(run_id)
        if key not in self._configs:
            text = self._config_json.get(key)
            try:
                self._configs[key] = SweepConfig.model_validate_json(text) if text else None
            except ValueError:  # a legacy import's config, or one from an older needlescope
                self._configs[key] = None
        return self._configs[key]

    def filler(self, row: Mapping[str, Any]) -> tuple[Filler, str]:
        identity = str(row["filler_spec"])
        config = self._config(row.get("run_id"))
        cache_key = (identity, str(row.get("run_id")) if config is not None else None)
        if cache_key in self._fillers:
            return self._fillers[cache_key]
        spec: FillerSpec | None = None
        if config is not None:
            try:
                candidate = config.filler_spec(str(row["filler"]))
                if filler_identity(candidate) == identity:
                    spec = candidate
            except (KeyError, ValueError, OSError):
                spec = None  # e.g. the corpus folder is gone
        if spec is None:
            spec = _spec_from_identity(identity)
        try:
            found = (filler_from_spec(spec), spec.kind)
        except (ValueError, OSError) as exc:
            raise ContextUnavailable(str(exc)) from exc
        self._fillers[cache_key] = found
        return found

    def haystack(self, row: Mapping[str, Any]) -> tuple[str, list[int], list[Any]]:
        """The haystack of a ``cells`` row, its needles' offsets and the needle values."""
        if row.get("filler_chars") is None or row.get("prompt_length") is None:
            raise ContextUnavailable("the cell's prompt was never built")
        cell, module = cell_of(row)
        filler, kind = self.filler(row)
        try:
            context = rebuild(
                module, cell, filler, kind, int(row["filler_chars"]), int(row["prompt_length"])
            )
        except ContextUnavailable:
            raise
        except Exception as exc:  # a probe that needs more than the cell (rag: retrieval)
            raise ContextUnavailable(f"{cell.probe} cells cannot be rebuilt here") from exc
        if row.get("prompt_sha256") and context.prompt_sha256 != row["prompt_sha256"]:
            raise ContextUnavailable("the rebuilt prompt differs from the one sent")
        expected = context.expected
        values = list(expected) if isinstance(expected, list | tuple) else []
        return context.haystack_text, list(context.rendered.offsets), values


def _needle_text(value: Any) -> str:
    return str(value) if isinstance(value, int | str) and not isinstance(value, bool) else ""


def snippets(
    haystack: str, offsets: Sequence[int], values: Sequence[Any], width: int = CONTEXT_CHARS
) -> list[list[str]]:
    """[before, needle, after] around each needle (``width`` characters on each side, with
    "…" where the haystack goes on)."""
    out = []
    for index, offset in enumerate(offsets[:MAX_NEEDLE_CONTEXTS]):
        needle = _needle_text(values[index]) if index < len(values) else ""
        end = offset + len(needle)
        if haystack[offset:end] != needle:
            end = offset  # not where expected: show the place only
        start, stop = max(0, offset - width), end + width
        before = ("…" if start > 0 else "") + haystack[start:offset]
        after = haystack[end:stop] + ("…" if stop < len(haystack) else "")
        out.append([before, haystack[offset:end], after])
    return out


def _found_in_prompt(prompt: str, values: Sequence[Any]) -> tuple[list[int], list[Any]]:
    """Needle offsets in a stored prompt, by searching each value after the previous one."""
    offsets, position = [], 0
    for value in values:
        needle = _needle_text(value)
        found = prompt.find(needle, position) if needle else -1
        if found < 0:
            raise ContextUnavailable("the needles are not in the stored prompt")
        offsets.append(found)
        position = found + len(needle)
    return offsets, list(values)


# ----------------------------------------------------------------------------- selection


def _quoted(columns: Sequence[str], prefix: str = "") -> str:
    return ", ".join(f'{prefix}"{c}"' for c in columns)


def _group_count(con: duckdb.DuckDBPyConnection, probes: Sequence[str], source: str) -> int:
    """How many cell configs (heatmap cells, over all needle indices) the probes have."""
    rows = con.execute(
        f"""
        SELECT count(*) FROM (
            SELECT DISTINCT {_quoted(["probe", *GROUP_AXES])} FROM {source}
            WHERE list_contains($probes, probe)
        )
        """,
        {"probes": list(probes)},
    ).fetchall()
    return int(rows[0][0]) if rows else 0


def _pick(
    con: duckdb.DuckDBPyConnection, probes: Sequence[str], source: str, per_cell: int
) -> pl.DataFrame:
    """Up to ``per_cell`` results per cell config: parsed answers, then parse failures, then
    failed requests; latest epoch first. With each config's counts."""
    partition = _quoted(["probe", *GROUP_AXES])
    return con.sql(
        f"""
        SELECT * EXCLUDE (rank) FROM (
            SELECT run_id, epoch, cell_id, {partition}, "repeat", error_kind, parse_ok,
                   accuracy,
                   count(*) FILTER (WHERE error_kind IS NULL) OVER w AS answers_total,
                   count(*) FILTER (WHERE error_kind IS NULL AND parse_ok) OVER w
                       AS parsed_total,
                   count(*) FILTER (WHERE error_kind IS NOT NULL) OVER w AS errors_total,
                   row_number() OVER (
                       w ORDER BY (error_kind IS NULL) DESC, coalesce(parse_ok, false) DESC,
                                  epoch DESC, "repeat", cell_id
                   ) AS rank
            FROM {source}
            WHERE list_contains($probes, probe)
            WINDOW w AS (PARTITION BY {partition})
        )
        WHERE rank <= $per_cell
        ORDER BY {partition}, epoch DESC, "repeat", cell_id
        """,
        params={"probes": list(probes), "per_cell": per_cell},
    ).pl()


def _frame(con: duckdb.DuckDBPyConnection, query: str, **params: Any) -> pl.DataFrame:
    """A query's rows, or none when the warehouse lacks its table (an older warehouse)."""
    try:
        return con.sql(query, params=params or None).pl()
    except duckdb.Error:
        return pl.DataFrame()


def _details(
    con: duckdb.DuckDBPyConnection, picked: str, chars: int
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame, dict[str, str | None]]:
    key = "a.run_id = p.run_id AND a.epoch = p.epoch AND a.cell_id = p.cell_id"
    replies = _frame(
        con,
        f"""
        SELECT a.run_id, a.epoch, a.cell_id, left(a.response, $chars) AS response,
               length(a.response) AS response_chars, a.response_kept, a.parse_error,
               a.error, a.finish_reason, a.truncated, a.correct, a.missing, a.extra, a.wrong
        FROM answers a SEMI JOIN {picked} p ON {key}
        QUALIFY row_number() OVER (
            PARTITION BY a.run_id, a.epoch, a.cell_id
            ORDER BY (a.error_kind IS NULL) DESC, a.answered_at DESC
        ) = 1
        """,
        chars=chars,
    )
    needles = _frame(
        con,
        f"""
        SELECT a.run_id, a.epoch, a.cell_id, a.needle_index, a.outcome
        FROM raw_needle_outcomes a SEMI JOIN {picked} p ON {key}
        ORDER BY a.run_id, a.epoch, a.cell_id, a.needle_index
        """,
    )
    invented = _frame(
        con,
        f"""
        SELECT a.run_id, a.epoch, a.cell_id, a.answer_index, a.value, a.key_from, a.key_to
        FROM raw_hallucinations a SEMI JOIN {picked} p ON {key}
        ORDER BY a.run_id, a.epoch, a.cell_id, a.answer_index
        """,
    )
    columns = ", ".join(f'c."{c}"' for c in ("cell_id", "run_id", *_CELL_FIELDS))
    cells = _frame(
        con,
        f"""
        SELECT {columns}, c.filler_chars, c.prompt_length, c.prompt_sha256, c.expected,
               c.prompt_text IS NOT NULL AS has_prompt
        FROM cells c WHERE c.cell_id IN (SELECT cell_id FROM {picked})
        """,
    )
    configs = _frame(
        con,
        f"""
        SELECT run_id, any_value(config_json) AS config_json FROM runs
        WHERE run_id IN (SELECT run_id FROM cells WHERE cell_id IN
                         (SELECT cell_id FROM {picked}))
        GROUP BY run_id
        """,
    )
    config_json = {str(r["run_id"]): r["config_json"] for r in configs.iter_rows(named=True)}
    return replies, needles, invented, cells, config_json


def _by_answer(frame: pl.DataFrame, columns: Sequence[str]) -> dict[tuple[Any, ...], list[Any]]:
    out: dict[tuple[Any, ...], list[Any]] = {}
    if frame.is_empty():
        return out
    for row in frame.iter_rows(named=True):
        key = (row["run_id"], row["epoch"], row["cell_id"])
        out.setdefault(key, []).append([row[c] for c in columns])
    return out


def _outcome_codes(rows: Sequence[Sequence[Any]], names: list[str]) -> str:
    """The outcome of needle i as the i-th character: a base-36 index into ``names`` (which
    grows as outcomes are met), "-" for a needle without a row. Compact: 1 byte a needle."""
    by_index = {int(i): str(outcome) for i, outcome in rows if i is not None}
    if not by_index:
        return ""
    codes = []
    for index in range(1, max(by_index) + 1):
        outcome = by_index.get(index)
        if outcome is None:
            codes.append("-")
            continue
        if outcome not in names:
            names.append(outcome)
        codes.append(_BASE36[names.index(outcome) % 36])
    return "".join(codes)


_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def _contexts(
    con: duckdb.DuckDBPyConnection,
    cells: pl.DataFrame,
    configs: Mapping[str, str | None],
    width: int,
) -> dict[str, dict[str, Any]]:
    """Per cell id: its expected needles and their contexts, or why those are unavailable."""
    builder = Rebuilder(configs)
    contexts: dict[str, dict[str, Any]] = {}
    spent = 0
    deadline = time.monotonic() + REBUILD_SECONDS
    need_prompt: list[str] = []
    rows = {str(r["cell_id"]): r for r in cells.iter_rows(named=True)} if cells.height else {}
    for cell_id, row in rows.items():
        expected = _json_list(row.get("expected"))
        if spent >= CONTEXT_BUDGET or time.monotonic() > deadline:
            contexts[cell_id] = {
                "expected": expected,
                "unavailable": "left out to keep the page small",
            }
            continue
        try:
            haystack, offsets, values = builder.haystack(row)
        except ContextUnavailable as exc:
            contexts[cell_id] = {"expected": expected, "unavailable": str(exc)}
            if row.get("has_prompt"):
                need_prompt.append(cell_id)
            continue
        parts = snippets(haystack, offsets, values, width)
        spent += sum(len(p) for part in parts for p in part)
        contexts[cell_id] = {"expected": expected, "source": "rebuilt", "needles": parts}
    if need_prompt:  # saved prompts: find the needles in them instead
        stored = _frame(
            con,
            "SELECT cell_id, prompt_text FROM cells WHERE list_contains($ids, cell_id)",
            ids=need_prompt,
        )
        for cell_id, prompt in stored.iter_rows():
            expected = contexts[str(cell_id)]["expected"]
            try:
                offsets, values = _found_in_prompt(str(prompt), expected)
            except ContextUnavailable:
                continue
            contexts[str(cell_id)] = {
                "expected": expected,
                "source": "found in the stored prompt",
                "needles": snippets(str(prompt), offsets, values, width),
            }
    return contexts


def collect(
    con: duckdb.DuckDBPyConnection,
    probes: Mapping[str, Sequence[str]],
    *,
    source: str = "results",
    per_cell: int = PER_CELL,
    width: int = CONTEXT_CHARS,
) -> dict[str, Any]:
    """The drill-down data of the heatmaps of ``probes`` (probe: the variant axes its
    heatmaps label their blocks with), from ``source`` (``results`` or the report's snapshot
    of it). JSON-able; see the module docstring.

    Bounded: at most ``per_cell`` answers per heatmap cell, fewer (down to 1) when the
    heatmaps have so many cells that more would pass :data:`MAX_ANSWERS`; replies cut at
    :data:`RESPONSE_CHARS` characters, less (down to 500) past :data:`RESPONSE_BUDGET`.
    """
    data: dict[str, Any] = {
        "per_cell": per_cell,
        "context_chars": width,
        "response_chars": RESPONSE_CHARS,
        "outcome_names": [],
        "charts": {},
        "groups": {},
        "answers": {},
        "contexts": {},
    }
    if not probes:
        return data
    for probe in probes:
        for chart_id, name in chart_ids(probe).items():
            focus, title = HEATMAPS[name]
            data["charts"][chart_id] = {"probe": probe, "focus": focus, "title": title}
    groups = _group_count(con, list(probes), source)
    per_cell = max(1, min(per_cell, MAX_ANSWERS // max(groups, 1)))
    data["per_cell"] = per_cell
    picked = _pick(con, list(probes), source, per_cell)
    if picked.is_empty():
        return data
    chars = max(500, min(RESPONSE_CHARS, RESPONSE_BUDGET // picked.height))
    data["response_chars"] = chars
    view = "drilldown_picked"
    con.register(view, picked.select("run_id", "epoch", "cell_id"))
    try:
        replies, needles, invented, cells, configs = _details(con, view, chars)
    finally:
        con.unregister(view)
    outcomes = _by_answer(needles, ("needle_index", "outcome"))
    extra = _by_answer(invented, ("answer_index", "value", "key_from", "key_to"))
    reply = (
        {(r["run_id"], r["epoch"], r["cell_id"]): r for r in replies.iter_rows(named=True)}
        if replies.height
        else {}
    )
    for probe, variants in probes.items():
        rows = picked.filter(pl.col("probe") == probe)
        if rows.is_empty():
            continue
        labelled = charts.with_label(rows, list(variants), "variant")
        for row in labelled.iter_rows(named=True):
            key = group_key(probe, row["model"], row["variant"], row["length"])
            group = data["groups"].setdefault(
                key,
                {
                    "answers": row["answers_total"],
                    "parsed": row["parsed_total"],
                    "errors": row["errors_total"],
                    "shown": [],
                },
            )
            ident = (row["run_id"], row["epoch"], row["cell_id"])
            answer_id = f"{row['epoch']}/{row['cell_id']}"
            group["shown"].append(answer_id)
            got = reply.get(ident, {})
            data["answers"][answer_id] = {
                "epoch": row["epoch"],
                "cell_id": row["cell_id"],
                "repeat": row["repeat"],
                "filler": row["filler"],
                "accuracy": row["accuracy"],
                "parse_ok": row["parse_ok"],
                "error_kind": row["error_kind"],
                "error": got.get("error"),
                "parse_error": got.get("parse_error"),
                "response": got.get("response"),
                "response_chars": got.get("response_chars"),
                "finish_reason": got.get("finish_reason"),
                "outcomes": _outcome_codes(outcomes.get(ident, []), data["outcome_names"]),
                "hallucinations": extra.get(ident, []),
            }
    data["contexts"] = _contexts(con, cells, configs, width)
    return dict(json_clean(data))


def _json_list(text: object) -> list[Any]:
    if not isinstance(text, str):
        return []
    try:
        value = json.loads(text)
    except ValueError:
        return []
    return value if isinstance(value, list) else [value]


# ----------------------------------------------------------------------------- page


PANEL = """
<section id="answers-panel" class="answers-panel" hidden aria-live="polite">
  <div class="answers-head">
    <strong id="answers-title">Answers</strong>
    <button type="button" id="answers-close" aria-label="Close">×</button>
  </div>
  <p id="answers-summary" class="muted"></p>
  <div id="answers-list"></div>
</section>
"""

STYLE = """
.answers-panel { position: fixed; top: 0; right: 0; width: min(46rem, 48vw); height: 100vh;
  overflow-y: auto; background: #fff; border-left: 2px solid #ccc; padding: 0.6rem 1rem 2rem;
  box-shadow: -4px 0 16px rgba(0,0,0,0.12); z-index: 10; font-size: 0.85rem; }
.answers-head { display: flex; justify-content: space-between; align-items: baseline; }
.answers-head button { font-size: 1.2rem; border: none; background: none; cursor: pointer; }
.answer { border-top: 1px solid #ddd; padding: 0.5rem 0; }
.answer pre { white-space: pre-wrap; word-break: break-word; background: #f6f6f6;
  padding: 0.4rem; max-height: 14rem; overflow-y: auto; }
.answer table td.ctx { white-space: normal; font-family: monospace; text-align: left;
  word-break: break-all; max-width: 30rem; }
.answer .needle { background: #ffe066; font-weight: bold; }
.answer tr.focus td { outline: 2px solid #e6550d; }
.outcome-correct { color: #1a7f37; } .outcome-missing { color: #b42318; }
.outcome-misorder { color: #6a3d9a; }
.vega svg g.role-mark path, .vega svg g.role-mark rect { cursor: pointer; }
"""

SCRIPT = r"""
(() => {
  const data = JSON.parse(document.getElementById('drilldown').textContent);
  const panel = document.getElementById('answers-panel');
  const list = document.getElementById('answers-list');
  const sep = '\u001f';
  const el = (tag, text, cls) => {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  };
  const fmt = (v) => (typeof v === 'number'
    ? (Number.isInteger(v) ? String(v) : v.toFixed(1)) : (v ?? ''));
  document.getElementById('answers-close')
    .addEventListener('click', () => { panel.hidden = true; });
  document.addEventListener('keydown', (e) => { if (e.key === 'Escape') panel.hidden = true; });

  function contextCell(parts) {
    const td = el('td', null, 'ctx');
    if (!parts) return td;
    td.append(parts[0]);
    td.append(el('span', parts[1], 'needle'));
    td.append(parts[2]);
    return td;
  }

  function renderAnswer(answer, focus, focusValue) {
    const box = el('div', null, 'answer');
    box.dataset.cellId = answer.cell_id;
    const grade = [
      'epoch ' + answer.epoch, 'repeat ' + answer.repeat, answer.filler,
      answer.error_kind ? 'error: ' + answer.error_kind
        : (answer.parse_ok ? 'accuracy ' + fmt(answer.accuracy) : 'no parseable JSON'),
      'parse_ok ' + (answer.parse_ok === null ? '–' : answer.parse_ok),
      'cell ' + answer.cell_id,
    ];
    box.append(el('div', grade.join(' · '), 'grade'));
    if (answer.error) box.append(el('div', answer.error, 'muted'));
    if (answer.parse_error) box.append(el('div', 'parse error: ' + answer.parse_error, 'muted'));
    const ctx = data.contexts[answer.cell_id] || {unavailable: 'no cell row', expected: []};
    const expected = ctx.expected || [];
    box.append(el('div', 'expected: ' + expected.map((v, i) => (i + 1) + ': ' + v).join(', '),
      'expected'));
    const reply = answer.response === null ? '(no reply stored)' : answer.response;
    box.append(el('pre', reply, 'reply'));
    const kept = answer.response ? answer.response.length : 0;
    if (answer.response_chars && answer.response_chars > kept) {
      box.append(el('div', 'reply cut at ' + kept + ' of ' + answer.response_chars
        + ' characters', 'muted'));
    }
    const count = Math.max(expected.length, answer.outcomes.length);
    if (count) {
      const table = el('table', null, 'needles');
      const head = el('tr');
      ['needle', 'expected', 'outcome', 'context' + (ctx.source ? ' (' + ctx.source + ')' : '')]
        .forEach((h) => head.append(el('th', h)));
      table.append(head);
      for (let i = 1; i <= count; i++) {
        const row = el('tr');
        const code = answer.outcomes[i - 1];
        const outcome = code && code !== '-' ? data.outcome_names[parseInt(code, 36)] : null;
        if (focus === 'needle_index' && focusValue === i) row.className = 'focus';
        row.append(el('td', i));
        row.append(el('td', expected[i - 1] ?? ''));
        row.append(el('td', outcome ?? '–', outcome ? 'outcome-' + outcome : ''));
        if (ctx.needles) row.append(contextCell(ctx.needles[i - 1]));
        else if (i === 1) {
          const td = el('td', 'context unavailable: ' + ctx.unavailable, 'ctx unavailable');
          td.rowSpan = count;
          row.append(td);
        }
        table.append(row);
      }
      box.append(table);
    }
    if (answer.hallucinations.length) {
      const lines = answer.hallucinations.map((h) => {
        const hit = focus === 'interval' && focusValue === h[2] + '–' + h[3];
        return (hit ? '▶ ' : '') + h[1] + ' (between needles ' + h[2] + ' and ' + h[3] + ')';
      });
      box.append(el('div', 'invented values: ' + lines.join('; '), 'hallucinated'));
    }
    return box;
  }

  function show(chartId, datum) {
    const chart = data.charts[chartId];
    if (!chart || !datum || datum.model === undefined || datum.length === undefined) return;
    const variant = datum.variant === undefined ? 'all' : datum.variant;
    const key = [chart.probe, datum.model, variant, datum.length].join(sep);
    const group = data.groups[key];
    const focusValue = datum[chart.focus];
    const focusText = chart.focus === 'needle_index'
      ? 'needle ' + focusValue : 'between needles ' + focusValue;
    const where = [datum.model, variant === 'all' ? null : variant, 'length ' + datum.length,
                   focusText].filter((v) => v !== null).join(' · ');
    document.getElementById('answers-title').textContent = chart.title + ': ' + where;
    list.replaceChildren();
    panel.dataset.chart = chartId;
    panel.dataset.key = key;
    if (!group) {
      document.getElementById('answers-summary').textContent = 'No answers behind this cell.';
    } else {
      const shown = group.shown.length;
      let text = group.parsed + ' parsed of ' + group.answers + ' answers behind this cell';
      if (group.errors) text += ', ' + group.errors + ' failed request(s)';
      text += shown < group.answers + group.errors
        ? '; showing ' + shown + ' (at most ' + data.per_cell
          + ' per cell), parsed answers and the latest epoch first.'
        : '; all shown.';
      document.getElementById('answers-summary').textContent = text;
      group.shown.forEach(
        (id) => list.append(renderAnswer(data.answers[id], chart.focus, focusValue)));
    }
    panel.hidden = false;
    panel.scrollTop = 0;
  }

  document.addEventListener('needlescope:chart-drawn', (event) => {
    const {id, view} = event.detail;
    if (!data.charts[id] || !view) return;
    view.addEventListener('click', (_event, item) => {
      if (item && item.datum) show(id, item.datum);
    });
  });
  window.needlescopeDrilldown = show;
})();
"""


def section_parts(data: Mapping[str, Any]) -> tuple[str, str]:
    """(the panel and the JSON block, the script) for the page; empty without heatmaps."""
    if not data.get("charts"):
        return "", ""
    return PANEL + json_script("drilldown", data), f"<script>{SCRIPT}</script>"
