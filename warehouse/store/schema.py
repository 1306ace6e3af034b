"""The warehouse's tables. Changing a table means a new SCHEMA_VERSION and a note in
docs/warehouse.md ("Schema history")."""

from __future__ import annotations

import pyarrow as pa

# The schema's steps, oldest first: (version, name, what it adds). Every step only adds columns
# (older files read them as NULL: views read by name); a warehouse's empty schema files are
# rewritten to the newest version when it is opened (store.Warehouse.upgrade).
MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (1, "initial", "runs, cells, answers, needle_outcomes, hallucinations, duplicates"),
    (
        2,
        "recall-seed-terms",
        "answers.uncounted; cells.prompt_bytes and cells.length_budget (the recall seed's terms)",
    ),
    (
        3,
        "validity",
        "answers.validity and answers.cached_tokens (whether an answer measures recall)",
    ),
    (
        4,
        "response-repaired",
        "answers.response_repaired: the reply held text UTF-8 cannot store (lone surrogates),"
        " replaced by U+FFFD",
    ),
    (
        5,
        "cases-depth",
        "cells.depth: a needle case's depth percent, a column of its own (its region is the"
        " cell's own again; the cells view reads older rows' depth from their facts)",
    ),
    (
        6,
        "ruler-outcomes",
        "ruler_outcomes: per answer of RULER's probes, each expected string found or not, and"
        " each planted distractor the answer holds",
    ),
    (
        7,
        "serving-fingerprint",
        "answers.system_fingerprint, service_tier, sampling, template_sha256, gguf_sha256,"
        " chat_template_sha256 and llama_cpp: what served each answer (needlescope.fingerprint)",
    ),
    (
        8,
        "original-score",
        "answers.original_score: an imported answer's score by its own tool, unscaled"
        " (gkamradt's and U-NIAH's judge, 1-10), beside needlescope's grade",
    ),
    (
        9,
        "batch-and-cache",
        "answers.cache_write_tokens and cache_write_1h_tokens (prompt tokens written to the"
        " provider's cache, Anthropic) and answers.batch_id (the provider's batch that answered)",
    ),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]

_TS = pa.timestamp("us", tz="UTC")

RUNS = pa.schema(
    [
        ("schema_version", pa.int32()),
        ("run_id", pa.string()),
        ("epoch", pa.string()),
        ("event", pa.string()),  # "start" | "end"
        ("at", _TS),
        ("config_name", pa.string()),
        ("config_json", pa.string()),
        ("needlescope_version", pa.string()),
        ("flow_run_id", pa.string()),
        ("cells_total", pa.int64()),
        ("cells_skipped", pa.int64()),
        ("cells_dropped", pa.int64()),
        ("cells_graded", pa.int64()),
        ("cells_failed", pa.int64()),
        ("cells_unsent", pa.int64()),  # left for a later run when the budget was spent
        ("spent_tokens", pa.int64()),
        ("spent_usd", pa.float64()),
        ("note", pa.string()),
    ]
)

CELLS = pa.schema(
    [
        ("schema_version", pa.int32()),
        ("cell_id", pa.string()),
        ("context_id", pa.string()),
        ("run_id", pa.string()),
        ("created_at", _TS),
        ("model", pa.string()),
        ("model_identity", pa.string()),
        ("generation", pa.string()),
        ("probe", pa.string()),
        ("probe_params", pa.string()),
        ("filler", pa.string()),
        ("filler_spec", pa.string()),
        ("placement", pa.string()),
        ("region", pa.string()),
        ("prompt_version", pa.string()),
        ("seed", pa.int64()),
        ("length", pa.int64()),
        ("length_unit", pa.string()),
        # prompt: the length is the whole prompt's; haystack: the haystack's before its needles
        ("length_budget", pa.string()),
        ("needle_count", pa.int64()),
        ("repeat", pa.int64()),
        ("filler_chars", pa.int64()),
        ("prompt_length", pa.int64()),
        ("prompt_bytes", pa.int64()),  # the whole prompt's UTF-8 bytes, as sent
        ("haystack_length", pa.int64()),
        ("planned_tokens", pa.int64()),
        ("max_tokens", pa.int64()),
        ("prompt_sha256", pa.string()),
        ("expected", pa.string()),  # JSON list of needle values in order
        ("needle_fractions", pa.string()),  # JSON list
        ("needle_offsets", pa.string()),  # JSON list of char offsets in the haystack
        ("prompt_text", pa.string()),  # only with save_prompts / --only-context
        ("facts", pa.string()),  # JSON object: probe-specific facts about the context
        ("length_basis", pa.string()),  # tokenizer | chars | bytes | cl100k_base | estimated: …
        ("depth", pa.float64()),  # a needle case's depth percent (cases, rag); NULL for others
    ]
)

ANSWERS = pa.schema(
    [
        ("schema_version", pa.int32()),
        ("run_id", pa.string()),
        ("epoch", pa.string()),
        ("cell_id", pa.string()),
        ("model", pa.string()),
        ("probe", pa.string()),
        ("answered_at", _TS),
        ("response", pa.string()),
        ("response_kept", pa.bool_()),
        ("parse_ok", pa.bool_()),
        ("parse_error", pa.string()),
        ("accuracy", pa.float64()),
        ("edit_distance", pa.int64()),
        ("correct", pa.int64()),
        ("missing", pa.int64()),
        ("extra", pa.int64()),
        ("wrong", pa.int64()),
        ("answered", pa.string()),  # JSON list: the answered value sequence, by numeric key
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("reasoning_tokens", pa.int64()),
        ("finish_reason", pa.string()),
        ("latency_s", pa.float64()),
        ("model_version", pa.string()),
        ("attempts", pa.int64()),
        ("error_kind", pa.string()),
        ("error", pa.string()),
        ("detail", pa.string()),  # JSON object: probe-specific grading detail
        ("truncated", pa.bool_()),  # the reply stopped at its token limit: not a wrong answer
        ("cost_usd", pa.float64()),  # from the model's price table, when it has one
        # Why a reply that is no parse failure is left out of the counts (recall: an empty
        # reply, or keys the seed's analysis could not order); NULL when it counts.
        ("uncounted", pa.string()),
        # Whether the answer measures recall (needlescope.grading.validity): valid, truncated,
        # thinking_exhausted, refused, content_filtered, context_exceeded, empty, or unknown
        # (no finish reason to judge by; counted as valid). NULL for a failed request.
        ("validity", pa.string()),
        ("cached_tokens", pa.int64()),  # prompt tokens the provider read from its cache
        # The reply (or a value read from it) held what UTF-8 cannot encode, such as a lone
        # surrogate from a JSON "\ud800": stored with U+FFFD in its place.
        ("response_repaired", pa.bool_()),
        # What served the answer (needlescope.provenance.fingerprint; schema step 7): the
        # provider's backend and tier, the sampling settings sent (canonical JSON), the prompt
        # template's hash, and for the local model its GGUF file, chat template and llama.cpp
        # version.
        ("system_fingerprint", pa.string()),
        ("service_tier", pa.string()),
        ("sampling", pa.string()),
        ("template_sha256", pa.string()),
        ("gguf_sha256", pa.string()),
        ("chat_template_sha256", pa.string()),
        ("llama_cpp", pa.string()),
        # An imported answer's score by the tool that produced it, on that tool's own scale
        # (gkamradt's GPT judge: 1-10); NULL for needlescope's own answers.
        ("original_score", pa.float64()),
        # Prompt tokens written to the provider's cache (Anthropic's cache_creation_input_tokens)
        # and of them those kept an hour (priced 2x input, the 5-minute ones 1.25x).
        ("cache_write_tokens", pa.int64()),
        ("cache_write_1h_tokens", pa.int64()),
        # The provider's batch that answered (OpenAI batch_…, Anthropic msgbatch_…, Gemini
        # batches/…); NULL for a synchronous request.
        ("batch_id", pa.string()),
    ]
)

_ANSWER_KEY = [
    ("schema_version", pa.int32()),
    ("run_id", pa.string()),
    ("epoch", pa.string()),
    ("cell_id", pa.string()),
    ("model", pa.string()),
    ("probe", pa.string()),
]

# One row per expected needle of every parsed recall answer.
NEEDLE_OUTCOMES = pa.schema(
    [
        *_ANSWER_KEY,
        ("needle_index", pa.int64()),  # 1-based
        ("expected", pa.int64()),
        ("in_lcs", pa.bool_()),
        ("outcome", pa.string()),  # correct | misorder | missing
    ]
)

# Every answered value that is not an expected value, with the anchor interval it sits in.
HALLUCINATIONS = pa.schema(
    [
        *_ANSWER_KEY,
        ("answer_index", pa.int64()),  # 0-based position in the answered sequence
        ("value", pa.string()),  # JSON of the answered value
        ("key_from", pa.int64()),  # needle index of the anchor before it (0: none)
        ("key_to", pa.int64()),  # needle index of the anchor after it (needle_count + 1: none)
    ]
)

# Extra copies of an expected value beyond the times it was expected.
DUPLICATES = pa.schema(
    [
        *_ANSWER_KEY,
        ("answer_index", pa.int64()),
        ("value", pa.string()),
        ("needle_indices", pa.string()),  # JSON list of the needle indices holding that value
    ]
)

# RULER's probes: one row per expected string of every answer (role expected, found or not)
# and one per planted distractor the answer holds (role distractor: other keys' values, other
# chains' names), string_index 1-based within its role.
RULER_OUTCOMES = pa.schema(
    [
        *_ANSWER_KEY,
        ("role", pa.string()),  # expected | distractor
        ("string_index", pa.int64()),
        ("text", pa.string()),
        ("found", pa.bool_()),
    ]
)

TABLES: dict[str, pa.Schema] = {
    "runs": RUNS,
    "cells": CELLS,
    "answers": ANSWERS,
    "needle_outcomes": NEEDLE_OUTCOMES,
    "hallucinations": HALLUCINATIONS,
    "duplicates": DUPLICATES,
    "ruler_outcomes": RULER_OUTCOMES,
}
