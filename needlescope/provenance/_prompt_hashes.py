"""The hash of a prompt template's text, by version: part of every answer's serving fingerprint,
so a template's text changing under the same version (which must never happen) shows up."""

from __future__ import annotations

import json
from dataclasses import asdict
from functools import cache

from needlescope.probes.counting_stars.templates import TEMPLATES as STARS_TEMPLATES
from needlescope.probes.templates import (
    CASES_TEMPLATES,
    GOTO_TEMPLATES,
    RAG_TEMPLATES,
    RECALL_TEMPLATES,
)
from needlescope.provenance.fingerprint import text_sha256


@cache
def template_sha256(version: str | None) -> str | None:
    """SHA-256 of the template's text; a Counting-Stars template is several texts (its star
    line, question and joiner): of their JSON. None for a prompt built in code (U-NIAH's)."""
    if version is None:
        return None
    for templates in (RECALL_TEMPLATES, GOTO_TEMPLATES, CASES_TEMPLATES, RAG_TEMPLATES):
        if version in templates:
            return text_sha256(templates[version].text)
    if version in STARS_TEMPLATES:
        return text_sha256(json.dumps(asdict(STARS_TEMPLATES[version]), sort_keys=True))
    return None
