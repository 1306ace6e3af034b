"""One sweep against the three fakes, each handing out every wire case of its format (the
recorded replies and the SDKs' reasons): each cell ends graded with the validity its case
means or failed with its error kind; `rerun` resends exactly the retryable failures, and
`rerun --validity empty,truncated` exactly the answers that were cut off or empty."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from needlescope.warehouse.store import Warehouse
from tests.support import (
    anthropic_server,
    gemini_server,
    openai_server,
    wire_anthropic,
    wire_gemini,
    wire_openai,
)
from tests.support.wire_cases import Case, CaseBook

RETRIES = 1
# model name in the config → the model id its requests carry (Gemini's is in the URL)
MODEL_IDS = {"o3": "o3-mini", "claude": "claude-sonnet-4-5", "gemini": ""}
LEGACY = ("o3-legacy", "o3-legacy-temperature")  # the requests an older needlescope sent


def config_text(openai: str, anthropic: str, gemini: str) -> str:
    return f"""
name: wire
seed: 3
compact: false
retry: {{retries: {RETRIES}, backoff_s: [0]}}
models:
  - name: o3
    provider: openai
    base_url: {openai}
    model: o3-mini
    concurrency: 4
  - name: o3-legacy
    provider: openai
    base_url: {openai}
    model: o3-mini
    openai_reasoning_params: false
    generation: {{temperature: omit}}
  - name: o3-legacy-temperature
    provider: openai
    base_url: {openai}
    model: o3-mini
    openai_reasoning_params: false
    generation: {{temperature: 0.0, max_tokens: omit}}
  - name: claude
    provider: anthropic
    base_url: {anthropic}
    model: claude-sonnet-4-5
    max_retry_after_s: 0
    concurrency: 4
    generation: {{extra: {{thinking: {{type: enabled, budget_tokens: 1024}}}}}}
  - name: gemini
    provider: gemini
    base_url: {gemini}
    model: gemini-2.5-flash
    max_retry_after_s: 0
    concurrency: 4
probes:
  - probe: recall
    lengths: [600, 700, 800, 900, 1000, 1100]
    length_unit: chars
    needle_counts: [2]
    fillers: [pattern, noise]
    repeats: 3
"""


def query(store: Warehouse, sql: str) -> list[tuple[Any, ...]]:
    con = store.connect()
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def rows(store: Warehouse, sql: str) -> list[dict[str, Any]]:
    con = store.connect()
    try:
        return con.sql(sql).pl().to_dicts()
    finally:
        con.close()


def outcome_of(case: Case | None) -> str:
    """How a cell given ``case`` ends after the sweep: failed, or graded as the case says."""
    if case is None:
        return "normal"
    if not case.fails:
        return "case"
    failing = len(case.replies)
    return "failed" if not case.retryable or failing > RETRIES else "normal"


def test_every_wire_case_in_one_sweep_then_reruns(cli, write_config, tmp_path: Path) -> None:
    books = {
        "o3": CaseBook(
            "openai",
            [c for c in wire_openai.CASES if c.name not in wire_openai.BY_RULE],
            openai_server.prompt_tokens,
        ),
        "claude": CaseBook("anthropic", wire_anthropic.CASES, anthropic_server.count_input_tokens),
        "gemini": CaseBook("gemini", wire_gemini.CASES, gemini_server.prompt_tokens),
    }
    wh = tmp_path / "wh"
    with (
        openai_server.FakeOpenAIServer(books["o3"]) as oa,
        anthropic_server.FakeAnthropicServer(books["claude"]) as an,
        gemini_server.FakeGeminiServer(books["gemini"]) as ge,
    ):
        config = write_config(config_text(oa.base_url, an.base_url, ge.base_url))
        first = cli("run", str(config), "-w", str(wh), "--epoch", "e", "--no-report")
        assert first.returncode == 1, first.stderr[-3000:]
        store = Warehouse(wh)
        for name, book in books.items():  # every case reached a cell of its own
            assert len(book.assigned) == 36 and None in book.assigned.values(), name
            assert {c.name for c in book.cases} == {c.name for c in book.assigned.values() if c}, (
                name
            )

        results = rows(store, "SELECT * FROM results")
        assert len(results) == 36 * 5
        expected_failed: dict[str, str] = {}
        retryable_failed: set[str] = set()
        for row in results:
            model = row["model"]
            if model in LEGACY:  # every request refused as sent: one request, never retried
                assert (row["error_kind"], row["attempts"]) == ("bad_request", 1), row
                expected_failed[row["cell_id"]] = "bad_request"
                continue
            book = books[model]
            key = (MODEL_IDS[model], row["prompt_sha256"])
            case = book.assigned[key]
            ends = outcome_of(case)
            label = case.name if case else "normal"
            if ends == "failed":
                assert case is not None
                assert row["error_kind"] == case.stored["error_kind"], (label, row)
                assert row["attempts"] == (1 if not case.retryable else RETRIES + 1), label
                assert book.sent[key] == row["attempts"], label
                expected_failed[row["cell_id"]] = row["error_kind"]
                if case.retryable:
                    retryable_failed.add(row["cell_id"])
            elif ends == "normal":
                assert (row["error_kind"], row["validity"]) == (None, "valid"), (label, row)
                assert row["accuracy"] == 100.0, (label, row)
            else:
                assert case is not None
                wanted = case.expected(book.request(book.bodies[key]))
                assert {k: row[k] for k in wanted} == wanted, (label, row)
        failed = dict(query(store, "SELECT cell_id, error_kind FROM failed_cells"))
        assert failed == expected_failed
        assert retryable_failed == {  # the overloaded cell: 529 on both attempts
            c for c, kind in failed.items() if kind == "server_error"
        }
        assert len(retryable_failed) == 1

        # Requests as the real APIs take them.
        o3_body = next(iter(books["o3"].bodies.values()))
        assert "max_completion_tokens" in o3_body and "temperature" not in o3_body
        assert "max_tokens" not in o3_body
        claude_body = next(iter(books["claude"].bodies.values()))
        gemini_body = next(iter(books["gemini"].bodies.values()))
        answer_budget = claude_body["max_tokens"] - 1024
        assert gemini_body["generationConfig"]["maxOutputTokens"] == answer_budget + 16_384
        assert o3_body["max_completion_tokens"] == answer_budget + 16_384

        by_validity = dict(query(store, "SELECT validity, count(*) FROM results GROUP BY 1"))
        invalid = {v: n for v, n in by_validity.items() if v not in (None, "valid", "unknown")}
        assert set(invalid) == {
            "truncated",
            "thinking_exhausted",
            "refused",
            "content_filtered",
            "context_exceeded",
            "empty",
        }
        assert by_validity[None] == len(failed)
        # The recall figures count valid answers only; the invalid ones beside them.
        figures = query(store, "SELECT sum(answers), sum(invalid) FROM recall_stats")
        assert figures == [(by_validity["valid"] + by_validity["unknown"], sum(invalid.values()))]

        # A rerun resends exactly the retryable failures.
        run_id = query(store, "SELECT run_id FROM runs")[0][0]
        before = {name: sum(book.sent.values()) for name, book in books.items()}
        legacy_before = oa.requests
        second = cli("rerun", run_id, "-w", str(wh), "--no-report")
        assert second.returncode == 0, second.stderr[-3000:]  # its one cell is graded now
        sent = {name: sum(book.sent.values()) - before[name] for name, book in books.items()}
        assert sum(sent.values()) == len(retryable_failed) == 1
        assert oa.requests == legacy_before  # no refused request was sent again
        left = dict(query(store, "SELECT cell_id, error_kind FROM failed_cells"))
        assert left == {c: k for c, k in expected_failed.items() if c not in retryable_failed}

        # rerun --validity resends exactly the empty and truncated answers; the new answers
        # supersede them in results, and both stay in answers.
        resend = {
            c
            for (c,) in query(
                store, "SELECT cell_id FROM results WHERE validity IN ('empty', 'truncated')"
            )
        }
        assert resend
        before = {name: sum(book.sent.values()) for name, book in books.items()}
        third = cli("rerun", run_id, "-w", str(wh), "--no-report", "--validity", "empty,truncated")
        assert third.returncode == 0, third.stderr[-3000:]
        sent = {name: sum(book.sent.values()) - before[name] for name, book in books.items()}
        assert sum(sent.values()) == len(resend)
    now = dict(query(store, "SELECT cell_id, validity FROM results"))
    assert {now[c] for c in resend} == {"valid"}
    kept = query(
        store,
        "SELECT count(*) FROM answers WHERE error_kind IS NULL AND cell_id IN "
        f"({', '.join(repr(c) for c in resend)})",
    )
    assert kept == [(2 * len(resend),)]
    assert query(
        store, "SELECT count(*) FROM results WHERE validity IN ('empty', 'truncated')"
    ) == [(0,)]

    # The report shows the invalid answers beside its figures, and says why.
    report = tmp_path / "report"
    drawn = cli("report", "-w", str(wh), "--out", str(report))
    assert drawn.returncode == 0, drawn.stderr[-3000:]
    page = (report / "report.html").read_text(encoding="utf-8")
    assert "invalid answers" in page and "thinking_exhausted" in page
