"""The report's run metadata: what each run was (config, haystacks, seed, length basis) and
the software that drew the report."""

from __future__ import annotations

import json
import platform
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import duckdb

from needlescope.config._models import Price
from needlescope.warehouse.report.html import esc, number, table, text

MAX_RUNS = 50
PACKAGES = ("needlescope", "duckdb", "polars", "altair", "vl-convert-python", "prefect")


def versions() -> dict[str, str]:
    """Python's and the main packages' versions in this environment."""
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def _runs(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    try:
        frame = con.sql(
            f"""
            SELECT run_id, epoch, config_name, started_at, ended_at, needlescope_version,
                   cells_total, cells_skipped, cells_dropped, cells_graded, cells_failed,
                   cells_unsent, spent_tokens, spent_usd, note, config_json
            FROM runs ORDER BY started_at DESC NULLS LAST, run_id LIMIT {MAX_RUNS}
            """
        ).pl()
    except duckdb.Error:
        return []
    return list(frame.iter_rows(named=True))


def _haystacks(
    con: duckdb.DuckDBPyConnection, run_ids: list[str]
) -> dict[str, list[dict[str, Any]]]:
    """Per run: the fillers, seeds and length bases of the cells it answered."""
    return _by_run(
        con,
        """
        SELECT r.run_id, c.probe, c.filler, c.filler_spec, c.seed, c.length_unit,
               c.length_basis, count(*) AS answers
        FROM answers r JOIN cells c USING (cell_id)
        WHERE list_contains($runs, r.run_id)
        GROUP BY ALL ORDER BY ALL
        """,
        run_ids,
    )


def _spending(
    con: duckdb.DuckDBPyConnection, run_ids: list[str]
) -> dict[str, list[dict[str, Any]]]:
    """Per run and model: its answers' cost as charged, tokens, cache reads and batch answers."""
    return _by_run(
        con,
        """
        SELECT run_id, model, count(*) AS answers, sum(cost_usd) AS cost_usd,
               sum(prompt_tokens)::BIGINT AS prompt_tokens,
               sum(completion_tokens)::BIGINT AS completion_tokens,
               sum(cached_tokens)::BIGINT AS cached_tokens,
               count(batch_id) AS batched
        FROM answers
        WHERE list_contains($runs, run_id) AND error_kind IS NULL
        GROUP BY ALL ORDER BY ALL
        """,
        run_ids,
    )


def _by_run(
    con: duckdb.DuckDBPyConnection, sql: str, run_ids: list[str]
) -> dict[str, list[dict[str, Any]]]:
    """The rows of ``sql`` (over the runs ``$runs``) grouped by their run_id; none when the
    warehouse cannot answer it (an older one without the columns)."""
    try:
        frame = con.sql(sql, params={"runs": run_ids}).pl()
    except duckdb.Error:
        return {}
    out: dict[str, list[dict[str, Any]]] = {}
    for row in frame.iter_rows(named=True):
        out.setdefault(str(row["run_id"]), []).append(row)
    return out


def _prices(config_json: object) -> dict[str, Price]:
    """Each model's price table in the run's stored config."""
    try:
        config = json.loads(config_json) if isinstance(config_json, str) else None
    except ValueError:
        return {}
    models = config.get("models") if isinstance(config, dict) else None
    found = {}
    for model in models if isinstance(models, list) else []:
        if isinstance(model, dict) and isinstance(model.get("price"), dict):
            try:
                found[str(model.get("name"))] = Price.model_validate(model["price"])
            except ValueError:
                continue  # a price table this version cannot read: no list price shown
    return found


def _spending_table(spent: list[dict[str, Any]], prices: dict[str, Price]) -> str:
    """What each model's answers cost, what the same tokens cost one by one at list price
    with nothing read from a cache, and the share of prompt tokens read from a cache."""
    rows = []
    for row in spent:
        price = prices.get(row["model"])
        listed = None
        if price is not None:
            listed = price.cost(row["prompt_tokens"], row["completion_tokens"])
        prompt, cached = row["prompt_tokens"], row["cached_tokens"]
        hit = None if not prompt or cached is None else 100 * cached / prompt
        rows.append(
            [
                row["model"],
                number(row["answers"]),
                "" if row["cost_usd"] is None else f"{row['cost_usd']:.4f}",
                "" if listed is None else f"{listed:.4f}",
                "" if hit is None else f"{hit:.1f}",
                number(row["batched"]),
            ]
        )
    headers = [
        "model",
        "answers",
        "cost (USD)",
        "synchronous, no cache (USD)",
        "cache hit (% of prompt tokens)",
        "batch answers",
    ]
    return table(headers, rows, numeric=[False] + [True] * 5)


def _pretty(config_json: object) -> str:
    if not isinstance(config_json, str) or not config_json:
        return ""
    try:
        return json.dumps(json.loads(config_json), indent=2, ensure_ascii=False)
    except ValueError:
        return config_json


def _config_facts(config_json: object) -> list[str]:
    """The config's seed and its haystack (filler) definitions, one line each."""
    try:
        config = json.loads(config_json) if isinstance(config_json, str) else None
    except ValueError:
        return []
    if not isinstance(config, dict):
        return []
    facts = []
    if "seed" in config:
        facts.append(f"seed {config['seed']}")
    fillers = config.get("fillers")
    if isinstance(fillers, dict):
        facts += [f"filler {name}: {json.dumps(spec)}" for name, spec in fillers.items()]
    used = sorted({f for probe in config.get("probes") or [] for f in (probe.get("fillers") or [])})
    if used:
        facts.append("fillers used: " + ", ".join(used))
    return facts


def _run(run: dict[str, Any], haystacks: list[dict[str, Any]], spent: list[dict[str, Any]]) -> str:
    counts = [
        ("cells", run["cells_total"]),
        ("skipped", run["cells_skipped"]),
        ("dropped", run["cells_dropped"]),
        ("graded", run["cells_graded"]),
        ("failed", run["cells_failed"]),
        ("unsent", run["cells_unsent"]),
        ("tokens spent", run["spent_tokens"]),
    ]
    fields = [
        ("run", run["run_id"]),
        ("epoch", run["epoch"]),
        ("config", run["config_name"]),
        ("started", text(run["started_at"])),
        ("ended", text(run["ended_at"]) or "(not ended)"),
        ("needlescope", run["needlescope_version"]),
        ("counts", " · ".join(f"{name} {number(v)}" for name, v in counts if v is not None)),
    ]
    if run["spent_usd"] is not None:
        fields.append(("spent (USD)", f"{run['spent_usd']:.4f}"))
    if run["note"]:
        fields.append(("note", run["note"]))
    listing = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in fields)
    facts = _config_facts(run["config_json"])
    parts = [f"<dl class='run-facts'>{listing}</dl>"]
    if facts:
        parts.append("<ul>" + "".join(f"<li>{esc(f)}</li>" for f in facts) + "</ul>")
    if any(row["cost_usd"] is not None or row["cached_tokens"] for row in spent):
        parts.append(_spending_table(spent, _prices(run["config_json"])))
    if haystacks:
        rows = [
            [
                h["probe"],
                h["filler"],
                h["filler_spec"] or "",
                "" if h["seed"] is None else str(h["seed"]),
                h["length_unit"] or "",
                h["length_basis"] or "not recorded",
                number(h["answers"]),
            ]
            for h in haystacks
        ]
        headers = ["probe", "filler", "haystack definition", "seed", "unit", "length basis"]
        parts.append(table([*headers, "answers"], rows, numeric=[False] * 6 + [True]))
    pretty = _pretty(run["config_json"])
    if pretty:
        parts.append(f"<details><summary>config</summary><pre>{esc(pretty)}</pre></details>")
    summary = f"{run['run_id']} · {run['epoch']} · {run['config_name'] or ''}"
    return f"<details class='run'><summary>{esc(summary)}</summary>{''.join(parts)}</details>"


def section(con: duckdb.DuckDBPyConnection) -> str:
    """The "Run metadata" section."""
    runs = _runs(con)
    run_ids = [str(r["run_id"]) for r in runs]
    haystacks = _haystacks(con, run_ids) if runs else {}
    spending = _spending(con, run_ids) if runs else {}
    env = " · ".join(f"{name} {v}" for name, v in versions().items())
    body = [
        "<section id='run-metadata'><h2>Run metadata</h2>",
        "<p class='muted'>per run (latest first, at most "
        f"{MAX_RUNS}): its config as stored, the haystacks (fillers) and seed of the cells it "
        "answered, and the basis of their lengths (tokenizer: the model's own; estimated: "
        "about 4 characters a token; or characters / bytes); for priced or cached answers, "
        "each model's cost as charged beside the same tokens at list price, sent one by one "
        "with nothing read from a cache</p>",
    ]
    body += [
        _run(run, haystacks.get(str(run["run_id"]), []), spending.get(str(run["run_id"]), []))
        for run in runs
    ] or ["<p>No runs recorded.</p>"]
    body += [f"<p class='muted' id='environment'>report drawn with {esc(env)}</p>", "</section>"]
    return "\n".join(body)
