"""Wire cases of Gemini's generateContent.

Layouts follow the recorded replies of ``wire-examples`` (``example=``) and google-genai's
types: every ``FinishReason`` and ``BlockedReason`` value, ``Part.thought``, and
``GenerateContentResponseUsageMetadata`` (``promptTokenCount``, ``candidatesTokenCount``,
``thoughtsTokenCount``, ``cachedContentTokenCount``, ``totalTokenCount``; proto3 JSON leaves
zero counts out).
"""

from __future__ import annotations

from typing import Any

from tests.support.fake_server import WireReply
from tests.support.wire_cases import Case, Derived, Request

SDK = "google-genai types.py (FinishReason, BlockedReason, UsageMetadata)"
MODEL = {"model": "gemini-2.5-flash"}
THOUGHTS = 64  # what a case's model thinks when the request does not bound it
THOUGHT_SUMMARY = "**Scanning the text**\nI found the four-digit numbers."
# FinishReason → (needlescope's finish_reason, the candidate's visible text, validity)
FILTERS = (
    "SAFETY",
    "RECITATION",
    "LANGUAGE",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
)
TOOLS = ("MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS")
BLOCKED = (
    "BLOCKED_REASON_UNSPECIFIED",
    "SAFETY",
    "OTHER",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "IMAGE_SAFETY",
    "MODEL_ARMOR",
    "JAILBREAK",
)


def words(text: str | None) -> int:
    return len(text.split()) if text else 0


def half(text: str) -> str:
    return text[: max(1, len(text) // 2)]


def limit(r: Request) -> int:
    return int((r.body.get("generationConfig") or {}).get("maxOutputTokens") or 0)


def usage(r: Request, answer: int = 0, thoughts: int = 0, cached: int = 0) -> dict[str, Any]:
    counts: dict[str, Any] = {"promptTokenCount": r.prompt_tokens}
    if answer:
        counts["candidatesTokenCount"] = answer
    counts["totalTokenCount"] = r.prompt_tokens + answer + thoughts
    if cached:
        counts["cachedContentTokenCount"] = cached
    counts["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": r.prompt_tokens}]
    if thoughts:
        counts["thoughtsTokenCount"] = thoughts
    return counts


def generated(
    r: Request,
    finish: str,
    text: str | None,
    *,
    thoughts: int = 0,
    summary: bool = False,
    cached: int = 0,
) -> WireReply:
    """A GenerateContentResponse in the layout of the thought-usage example."""
    parts: list[dict[str, Any]] = []
    if summary:
        parts.append({"text": THOUGHT_SUMMARY, "thought": True})
    if text:
        parts.append({"text": text})
    content: dict[str, Any] = {"parts": parts, "role": "model"} if parts else {"role": "model"}
    body = {
        "candidates": [{"content": content, "finishReason": finish, "index": 0}],
        "usageMetadata": usage(r, words(text), thoughts, cached),
        "modelVersion": "gemini-2.5-flash",
        "responseId": "FakeResponseId0001",
    }
    return WireReply(200, body)


def _no_parts(r: Request) -> WireReply:
    """Vertex AI's reply whose whole limit went to thoughts: no parts, no candidates count."""
    thoughts = limit(r)
    body = {
        "candidates": [{"content": {"role": "model"}, "finishReason": "MAX_TOKENS"}],
        "createTime": "2026-01-01T00:00:00.000000Z",
        "modelVersion": "gemini-2.5-pro",
        "responseId": "FakeResponseId0002",
        "usageMetadata": {
            "billablePromptUsage": {"textCount": r.prompt_tokens * 3},
            "promptTokenCount": r.prompt_tokens,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": r.prompt_tokens}],
            "thoughtsTokenCount": thoughts,
            "totalTokenCount": r.prompt_tokens + thoughts,
            "trafficType": "ON_DEMAND",
        },
    }
    return WireReply(200, body)


def _filtered(reason: str) -> Any:
    """A candidate stopped by a filter: no content, its safety ratings (the safety example)."""

    def build(r: Request) -> WireReply:
        ratings = [
            {"category": c, "probability": "NEGLIGIBLE"}
            for c in ("HARM_CATEGORY_SEXUALLY_EXPLICIT", "HARM_CATEGORY_HATE_SPEECH")
        ]
        ratings.append(
            {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}
        )
        body = {
            "candidates": [{"finishReason": reason, "index": 0, "safetyRatings": ratings}],
            "usageMetadata": {
                "promptTokenCount": r.prompt_tokens,
                "totalTokenCount": r.prompt_tokens,
            },
            "modelVersion": "gemini-2.5-flash",
        }
        return WireReply(200, body)

    return build


def _blocked(reason: str) -> Any:
    def build(r: Request) -> WireReply:
        body = {
            "promptFeedback": {
                "blockReason": reason,
                "safetyRatings": [
                    {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH"}
                ],
            },
            "usageMetadata": {
                "promptTokenCount": r.prompt_tokens,
                "totalTokenCount": r.prompt_tokens,
            },
            "modelVersion": "gemini-2.5-flash",
        }
        return WireReply(200, body)

    return build


def _quota(r: Request) -> WireReply:
    """429 RESOURCE_EXHAUSTED of a per-minute input-token quota, with RetryInfo (26 s)."""
    metric = "generativelanguage.googleapis.com/generate_content_free_tier_input_token_count"
    error = {
        "code": 429,
        "message": "You exceeded your current quota, please check your plan and billing details."
        " For more information on this error, head to:"
        " https://ai.google.dev/gemini-api/docs/rate-limits.",
        "status": "RESOURCE_EXHAUSTED",
        "details": [
            {
                "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                "violations": [
                    {
                        "quotaMetric": metric,
                        "quotaId": "GenerateContentInputTokensPerModelPerMinute-FreeTier",
                        "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"},
                        "quotaValue": "250000",
                    }
                ],
            },
            {
                "@type": "type.googleapis.com/google.rpc.Help",
                "links": [
                    {
                        "description": "Learn more about Gemini API quotas",
                        "url": "https://ai.google.dev/gemini-api/docs/rate-limits",
                    }
                ],
            },
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "26s"},
        ],
    }
    return WireReply(429, {"error": error})


def _error(code: int, status: str, message: str, http: int | None = None) -> Any:
    """Google's error envelope, sent with HTTP status ``http`` (default: its own code)."""

    def build(r: Request) -> WireReply:
        body = {"error": {"code": code, "message": message, "status": status}}
        return WireReply(http or code, body)

    return build


def _finish(reason: str, text: str, finish: str | None, validity: str) -> Case:
    return Case(
        f"gemini-finish-{reason.lower().replace('_', '-')}",
        "gemini",
        (lambda r: generated(r, reason, text and half(r.answer)),),
        {"finish_reason": finish, "validity": validity, "error_kind": None},
        source=SDK,
        model=MODEL,
    )


NORMAL = {
    "validity": "valid",
    "error_kind": None,
    "response": Derived(lambda r: r.answer),
    "finish_reason": "stop",
    "accuracy": 100.0,
}

CASES: tuple[Case, ...] = (
    Case(
        "gemini-thoughts-usage",
        "gemini",
        (lambda r: generated(r, "STOP", r.answer, thoughts=THOUGHTS, summary=True),),
        {
            **NORMAL,
            "prompt_tokens": Derived(lambda r: r.prompt_tokens),
            # thoughts are billed as output: completion tokens include them
            "completion_tokens": Derived(lambda r: words(r.answer) + THOUGHTS),
            "reasoning_tokens": THOUGHTS,
            "cached_tokens": 0,
        },
        example="gemini-thoughts-usage.json",
        model=MODEL,
    ),
    Case(
        "gemini-max-tokens-no-parts",
        "gemini",
        (_no_parts,),
        {
            "validity": "thinking_exhausted",
            "response": "",
            "finish_reason": "length",
            "completion_tokens": Derived(limit),
            "reasoning_tokens": Derived(limit),
            "truncated": True,
            "error_kind": None,
        },
        example="gemini-max-tokens-no-parts.json",
        model={"model": "gemini-2.5-pro"},
    ),
    Case(
        "gemini-safety",
        "gemini",
        (_filtered("SAFETY"),),
        {"validity": "content_filtered", "finish_reason": "content_filter", "response": ""},
        example="gemini-safety.json",
        model=MODEL,
    ),
    Case(
        "gemini-429-retry-info",
        "gemini",
        (_quota,),
        NORMAL,
        example="gemini-429-retry-info.json",
        model=MODEL,
        requests=2,
        waited=(26.0,),
    ),
    Case(
        "gemini-cached-content",
        "gemini",
        (lambda r: generated(r, "STOP", r.answer, cached=r.prompt_tokens // 2),),
        {**NORMAL, "cached_tokens": Derived(lambda r: r.prompt_tokens // 2)},
        source=SDK + " (cachedContentTokenCount)",
        model=MODEL,
    ),
    _finish("MAX_TOKENS", "half", "length", "truncated"),
    *(
        Case(
            f"gemini-finish-{reason.lower().replace('_', '-')}",
            "gemini",
            (_filtered(reason),),
            {"finish_reason": "content_filter", "validity": "content_filtered"},
            source=SDK,
            model=MODEL,
        )
        for reason in FILTERS
        if reason != "SAFETY"
    ),
    *(_finish(reason, "", "tool_calls", "empty") for reason in TOOLS),
    _finish("OTHER", "half", "other", "unknown"),
    _finish("IMAGE_OTHER", "", "other", "empty"),
    _finish("NO_IMAGE", "", "other", "empty"),
    _finish("FINISH_REASON_UNSPECIFIED", "half", None, "unknown"),
    # a reason newer than the SDK's list: kept verbatim, never guessed
    _finish("MISSING_THOUGHT_SIGNATURE", "half", "MISSING_THOUGHT_SIGNATURE", "unknown"),
    *(
        Case(
            f"gemini-prompt-blocked-{reason.lower().replace('_', '-')}",
            "gemini",
            (_blocked(reason),),
            {
                "finish_reason": "content_filter",
                "validity": "content_filtered",
                "response": "",
                "prompt_tokens": Derived(lambda r: r.prompt_tokens),
            },
            source=SDK + " (promptFeedback.blockReason)",
            model=MODEL,
        )
        for reason in BLOCKED
    ),
    Case(
        "gemini-200-error-body",
        "gemini",
        (_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later.", 200),),
        {"error_kind": "server_error", "validity": None},
        source="Google's error envelope in an HTTP 200 (its code says 503)",
        model=MODEL,
        retryable=True,
    ),
    Case(
        "gemini-400-payload-too-large",
        "gemini",
        (
            _error(
                400, "INVALID_ARGUMENT", "Request payload size exceeds the limit: 20971520 bytes."
            ),
        ),
        {"error_kind": "request_too_large", "validity": None},
        source="Gemini API errors (400 payload size)",
        model=MODEL,
        retryable=False,
    ),
)
