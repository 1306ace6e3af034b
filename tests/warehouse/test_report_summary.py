"""The report's first screen: a "Summary" section first (per model × probe the headline figure
with its interval, the answers behind it, effective length and flags linking to their
sections), probe sections in the fixed order, and one line in place of a chart with no data."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest

from needlescope.probes.catalog import ordered, specs
from needlescope.warehouse.report.page import write_report
from needlescope.warehouse.stats import accuracy
from needlescope.warehouse.store import Warehouse
from needlescope.warehouse.store.tool_import import import_tool
from tests.conftest import REPO
from tests.support.synthetic_sweep import Built, build_warehouse

FIXTURES = REPO / "tests" / "fixtures" / "imports"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Built, str]:
    """recall (two models, two epochs: beta drifts), counting_stars and cases (imported), and
    an imported model whose cases answers are all score-only (no chart has data for it)."""
    root = tmp_path_factory.mktemp("summary")
    built = build_warehouse(root / "wh")
    import_tool("counting-stars", FIXTURES / "counting_stars" / "results", "alpha", built.store)
    import_tool("gkamradt", FIXTURES / "gkamradt" / "results", "alpha", built.store)
    page = write_report(root / "wh", root / "out").read_text(encoding="utf-8")
    return built, page


def _summary(page: str) -> str:
    start = page.index("<section id='summary'>")
    return page[start : page.index("</section>", start)]


def _rows(page: str) -> list[list[str]]:
    body = _summary(page).split("<tbody>")[1]
    return [
        [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body)
    ]


def test_the_summary_comes_first_and_the_probes_in_their_order(report: tuple[Built, str]) -> None:
    _, page = report
    titles = re.findall(r"<h2>([^<$]+)</h2>", page)
    assert titles[0] == "Summary"
    probes = [t.removeprefix("Probe: ") for t in titles if t.startswith("Probe: ")]
    assert probes == ["recall", "counting_stars", "cases"]
    nav = re.findall(r"<a href='#([^']+)'>", page.split("</nav>")[0])
    assert nav[:4] == ["summary", "probe-recall", "probe-counting_stars", "probe-cases"]


def test_each_row_holds_the_headline_figure_and_its_answers(report: tuple[Built, str]) -> None:
    built, page = report
    rows = _rows(page)
    assert [(r[0], r[1]) for r in rows] == [
        ("alpha", "recall"),
        ("beta", "recall"),
        ("alpha", "counting_stars"),
        ("alpha", "cases"),
    ]
    con = built.store.connect()
    try:
        pooled = accuracy.accuracy_table(con, probe="recall", axes=("model",))
    finally:
        con.close()
    for row, figures in zip(rows, pooled.iter_rows(named=True), strict=False):
        mean, lo, hi = figures["mean_accuracy"], figures["accuracy_lo"], figures["accuracy_hi"]
        assert row[2] == f"{mean:.1f}% ({lo:.1f}–{hi:.1f})"
        assert row[3] == f"{figures['answers']:,}" and row[4] == str(figures["parse_failures"])
    # the synthetic answers are below 85% at the shortest length already
    assert rows[0][5] == rows[1][5] == "none (of up to 1,500 chars)"


def test_flags_link_to_the_sections_that_show_them(report: tuple[Built, str]) -> None:
    _, page = report
    summary = _summary(page)
    beta = next(r for r in summary.split("<tr") if ">beta<" in r)
    assert re.search(r"<a href='#drift-recall'>drift \(-[0-9.]+\)</a>", beta)  # beta drops
    alpha = next(r for r in summary.split("<tr") if ">alpha<" in r and "probe-recall" in r)
    assert "drift" not in alpha
    for target in re.findall(r"href='#([^']+)'", summary):
        assert f"id='{target}'" in page, target
    assert "<a href='#probe-counting_stars'>counting_stars</a>" in summary


def test_a_chart_with_no_data_is_one_line(tmp_path: Path) -> None:
    """Only score-only answers (a list-style gkamradt file): nothing for the cases charts."""
    listed = tmp_path / "list.json"
    entries = [
        {"token_limit": n, "depth_percent": d, "score": 10} for n in (1000, 2000) for d in (0, 50)
    ]
    listed.write_text(json.dumps(entries), encoding="utf-8")
    import_tool("gkamradt", listed, "gpt-4", Warehouse(tmp_path / "wh"))
    page = write_report(tmp_path / "wh", tmp_path / "out").read_text(encoding="utf-8")
    lines = re.findall(r"<p class='muted chart-empty' id='([^']+)'>([^<]+)</p>", page)
    assert lines, "every cases chart is empty here"
    texts = dict(lines)
    why = " — no valid answer: 0 invalid, 0 failed requests"
    assert texts["cases_keyword_heatmap"].endswith(
        ": No needle-case answers yet: nothing to chart." + why
    )
    assert texts["cases_parse_failures_by_length"].endswith(
        ": No answers yet: nothing to chart." + why
    )
    # the tool's own judge scores are data: that heatmap is drawn (the original's figure)
    assert "<div class='vega' id='cases_judge_heatmap'>" in page
    for name, _ in lines:
        assert f"<div class='vega' id='{name}'>" not in page
        assert not (tmp_path / "out" / f"{name}.png").exists()
    found = re.search(r"const specs = (\{.*?\});\n", page, re.S)
    assert found
    specs = json.loads(found.group(1))
    assert not set(specs) & {name for name, _ in lines}


def test_the_order_is_the_probes_declared_ranks() -> None:
    assert list(specs())[:5] == ["recall", "counting_stars", "goto", "cases", "rag"]
    assert ordered(["zeta", "latent_list", "niah", "recall", "alpha"]) == [
        "recall",
        "niah",
        "latent_list",
        "alpha",
        "zeta",
    ]


def test_other_sections_add_flags_through_the_hook(tmp_path: Path) -> None:
    """#19's failed gates join the summary as FLAG_SOURCES: (text, anchor) per model × probe."""
    from needlescope.warehouse.report.sections import summary as summary_section

    store = Warehouse(tmp_path / "wh")
    import_tool("counting-stars", FIXTURES / "counting_stars" / "results", "m", store)

    def gates(con: object) -> dict[tuple[str, str], list[tuple[str, str]]]:
        return {("m", "counting_stars"): [("gate min_accuracy 90 failed", "gates-m")]}

    summary_section.FLAG_SOURCES.append(gates)
    try:
        rows, flags = summary_section.collect(store.root, threshold=85.0, spread=30.0)
    finally:
        summary_section.FLAG_SOURCES.remove(gates)
    html = summary_section.section(rows, flags)
    assert "<a href='#gates-m'>gate min_accuracy 90 failed</a>" in html
    assert "<tr class='flagged'>" in html


def test_each_probe_keeps_its_own_threshold_unless_one_is_given() -> None:
    from dataclasses import replace

    from needlescope.warehouse.stats.overview import Overview, thresholds_kept

    base = Overview(
        model="m", probe="recall", cells=1, answers=1, parse_failures=0, invalid=0, failed=0,
        mean_accuracy=90.0, accuracy_lo=80.0, accuracy_hi=95.0, effective_length=1000,
        threshold=85.0, longest_tested=1000, length_unit="tokens", unstable=0, drift=None,
        drift_diff=None,
    )  # fmt: skip
    niah = replace(base, probe="niah", threshold=85.6)
    assert thresholds_kept([base]) == "85%"
    assert thresholds_kept([base, niah]) == "85% for recall; 85.6% for niah"
    html = summary_section_html([base, niah])
    assert "at least 85% for recall; 85.6% for niah there" in html


def summary_section_html(rows: list) -> str:
    from needlescope.warehouse.report.sections import summary as summary_section

    return summary_section.section(rows, {})


def test_the_reports_queries_take_half_the_cores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report's connection, and those beside it (the summary's here), run each query on
    half the cores: its threads and renderer processes keep the others busy."""
    from needlescope.warehouse.report import page
    from needlescope.warehouse.report.sections import summary as summary_section

    seen: list[int] = []

    def threads(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], list[tuple[str, str]]]:
        seen.append(int(con.execute("SELECT current_setting('threads')").fetchone()[0]))
        return {}

    # (page's own os only: the renderers still count the machine's cores)
    monkeypatch.setattr(page, "os", SimpleNamespace(cpu_count=lambda: 8))
    built = build_warehouse(tmp_path / "wh")
    summary_section.FLAG_SOURCES.append(threads)
    try:
        write_report(built.store.root, tmp_path / "out")
    finally:
        summary_section.FLAG_SOURCES.remove(threads)
    assert seen == [4] and page.query_threads() == 4
    monkeypatch.setattr(page, "os", SimpleNamespace(cpu_count=lambda: None))
    assert page.query_threads() == 1
