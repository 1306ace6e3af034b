"""An MRCR conversation: alternating user / assistant turns, one request repeated, a final ask.

Every draw comes from the seed: the repeated request (form and topic), the nonce, which
occurrence is asked for; each filler turn and each repeat's reply from a Random of its own, so
adding filler turns never changes the turns already drawn (only where the repeats sit).
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from random import Random
from typing import Any

from needlescope.probes.mrcr.pieces import FORMS, TOPICS, piece, request
from needlescope.providers.base import Message

# Bumped whenever a seed's conversation changes (here, in pieces.py or in the prose grammar it
# draws from: fillers.PROSE_VERSION), so cell ids that name it change too.
GENERATOR_VERSION = 1
NONCE_CHARS = string.ascii_letters + string.digits
NONCE_LENGTH = 10
NEEDLES = (2, 4, 8)  # OpenAI MRCR's repeat counts; any count from 1 works
# The share of filler requests drawn as near misses: the repeated request's topic in another
# form, or its form about another topic (MRCR's "social media post about tapirs").
SAME_TOPIC_SHARE = 1 / 3
SAME_FORM_SHARE = 1 / 3

_FINAL = (
    "Prepend {nonce} to the {ordinal} (1 indexed) {form} about {topic}. "
    "Do not include any other text in your response."
)


def ordinal(n: int) -> str:
    """English ordinals: 1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st, 112th, …"""
    if n < 1:
        raise ValueError(f"an ordinal starts at 1, got {n}")
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def final_question(nonce: str, ask: int, form: str, topic: str) -> str:
    """The last user turn, exactly as OpenAI's MRCR words it."""
    return _FINAL.format(nonce=nonce, ordinal=ordinal(ask), form=form, topic=topic)


def draw_nonce(rng: Random) -> str:
    """A random 10-character alphanumeric string (``random_string_to_prepend``)."""
    return "".join(rng.choice(NONCE_CHARS) for _ in range(NONCE_LENGTH))


@dataclass(frozen=True)
class Conversation:
    """The messages sent, and what the grader needs."""

    messages: tuple[Message, ...]  # request/reply pairs, then the final question
    form: str
    topic: str
    nonce: str
    ask: int  # which occurrence the final question asks for, 1-based
    replies: tuple[str, ...]  # the repeated request's replies, in conversation order
    needle_pairs: tuple[int, ...]  # the 0-based pair index of each repeat

    @property
    def pairs(self) -> int:
        return (len(self.messages) - 1) // 2

    @property
    def reply(self) -> str:
        return self.replies[self.ask - 1]

    @property
    def fractions(self) -> tuple[float, ...]:
        """Where each repeat sits: its pair index over the pairs before the final question."""
        return tuple(round(p / self.pairs, 6) for p in self.needle_pairs)

    def expected(self) -> dict[str, Any]:
        """JSON-able: what ``score.grade`` reads (``nonce`` and ``reply`` are enough)."""
        return {
            "nonce": self.nonce,
            "reply": self.reply,
            "ask": self.ask,
            "replies": list(self.replies),
            "form": self.form,
            "topic": self.topic,
        }


@dataclass(frozen=True)
class _Draws:
    form: str
    topic: str
    nonce: str
    ask: int


def _draws(seed: int | str, needles: int, ask: int | None) -> _Draws:
    rng = Random(f"mrcr:{seed}")
    form = rng.choice(sorted(FORMS))
    topic = rng.choice(TOPICS)
    nonce = draw_nonce(rng)
    drawn = rng.randint(1, needles)
    return _Draws(form, topic, nonce, drawn if ask is None else ask)


def _filler_turn(seed: int | str, index: int, form: str, topic: str) -> tuple[str, str]:
    """Filler pair ``index``: a request other than the repeated one, and its reply."""
    rng = Random(f"mrcr:{seed}:filler:{index}")
    kind = rng.random()
    other_forms = [f for f in sorted(FORMS) if f != form]
    other_topics = [t for t in TOPICS if t != topic]
    if kind < SAME_TOPIC_SHARE:
        chosen = (rng.choice(other_forms), topic)
    elif kind < SAME_TOPIC_SHARE + SAME_FORM_SHARE:
        chosen = (form, rng.choice(other_topics))
    else:
        pairs = [(f, t) for f in sorted(FORMS) for t in TOPICS if (f, t) != (form, topic)]
        chosen = rng.choice(pairs)
    return request(*chosen), piece(*chosen, rng)


def _needle_replies(seed: int | str, needles: int, form: str, topic: str) -> tuple[str, ...]:
    replies: list[str] = []
    for index in range(needles):
        rng = Random(f"mrcr:{seed}:needle:{index}")
        reply = piece(form, topic, rng)
        while reply in replies:  # practically never: the repeats must differ to be told apart
            reply = piece(form, topic, rng)
        replies.append(reply)
    return tuple(replies)


def conversation(
    seed: int | str, needles: int, filler_pairs: int, *, ask: int | None = None
) -> Conversation:
    """A conversation of ``filler_pairs`` other requests and ``needles`` repeats of one request,
    at random places, then the final question (for occurrence ``ask``, drawn when None)."""
    if needles < 1:
        raise ValueError(f"needles must be at least 1, got {needles}")
    if filler_pairs < 0:
        raise ValueError(f"filler_pairs cannot be negative, got {filler_pairs}")
    if ask is not None and not 1 <= ask <= needles:
        raise ValueError(f"ask must lie in 1..{needles}, got {ask}")
    draws = _draws(seed, needles, ask)
    total = needles + filler_pairs
    layout = Random(f"mrcr:{seed}:layout:{needles}:{filler_pairs}")
    needle_pairs = tuple(sorted(layout.sample(range(total), needles)))
    replies = _needle_replies(seed, needles, draws.form, draws.topic)
    repeated = request(draws.form, draws.topic)
    messages: list[Message] = []
    filler = repeat = 0
    for pair in range(total):
        if repeat < needles and needle_pairs[repeat] == pair:
            asked, answered = repeated, replies[repeat]
            repeat += 1
        else:
            asked, answered = _filler_turn(seed, filler, draws.form, draws.topic)
            filler += 1
        messages += [Message("user", asked), Message("assistant", answered)]
    question = final_question(draws.nonce, draws.ask, draws.form, draws.topic)
    messages.append(Message("user", question))
    return Conversation(
        messages=tuple(messages),
        form=draws.form,
        topic=draws.topic,
        nonce=draws.nonce,
        ask=draws.ask,
        replies=replies,
        needle_pairs=needle_pairs,
    )
