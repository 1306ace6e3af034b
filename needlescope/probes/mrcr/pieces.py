"""The pieces of writing an MRCR conversation asks for, and our seeded generator of them.

A piece is a form (poem, short story, list…) about a topic (tapirs, lighthouses…): the form
decides its layout, the topic appears in its title and in lines of its own, and the rest is
needlescope's synthetic prose (needlescope/haystack/prose.py). Every piece has at least
``MIN_WORDS`` words, so at least that many tokens in any subword tokenizer (a word is one
token or more).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from random import Random

from needlescope.haystack import prose

MIN_WORDS = 100
MAX_WORDS = 140  # a piece's word target is drawn from MIN_WORDS..MAX_WORDS

# Plural nouns, so "{topic} are …" always agrees.
TOPICS = (
    "tapirs", "lighthouses", "rocks", "glaciers", "bicycles", "owls", "teapots", "volcanoes",
    "libraries", "thunderstorms", "otters", "lanterns", "orchards", "trains", "comets",
    "mushrooms", "harbours", "snails", "windmills", "kites", "deserts", "foxes", "bridges",
    "clocks", "tides", "mountains", "candles", "violins", "salt marshes", "beehives",
    "ferries", "meteors",
)  # fmt: skip

_TOPIC_LINES = (
    "Nobody forgets the first time they see {topic}.",
    "There is something patient about {topic}.",
    "I keep coming back to {topic}.",
    "Everyone in the village had an opinion about {topic}.",
    "The old books say very little about {topic}.",
    "Some days it seems the whole world is made of {topic}.",
    "My grandmother used to tell long stories about {topic}.",
    "Ask anyone by the harbour and they will talk about {topic}.",
    "Few things are as quietly strange as {topic}.",
    "The children drew pictures of {topic} all winter.",
    "It is hard to stay gloomy while thinking of {topic}.",
    "Late at night, the talk always came back to {topic}.",
    "{Topic} are older than any of us remember.",
    "{Topic} never seem to be in a hurry.",
    "Nobody could agree on what {topic} were for.",
    "Whatever else changed that year, {topic} did not.",
)
_TITLES = (
    "On {topic}",
    "A few words about {topic}",
    "In praise of {topic}",
    "What I learned from {topic}",
    "{Topic}, again",
    "The year of the {topic}",
    "Notes on {topic}",
)
_NAMES = (
    "Ada", "Bram", "Celia", "Dorian", "Edith", "Felix", "Greta", "Hugo", "Ines", "Jonah", "Kit",
    "Lena", "Milo", "Nora", "Otto", "Pia", "Quinn", "Rosa", "Silas", "Tess",
)  # fmt: skip
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+")


def request(form: str, topic: str) -> str:
    """The user's turn asking for a piece: the same text whenever form and topic repeat."""
    return f"Write a {form} about {topic}"


class _Writer:
    """Sentences for one piece: prose from the grammar, with a line about the topic now and then."""

    def __init__(self, topic: str, rng: Random) -> None:
        self.topic, self.rng = topic, rng
        self._queue: list[str] = []

    def fill(self, text: str) -> str:
        return text.format(topic=self.topic, Topic=self.topic[:1].upper() + self.topic[1:])

    def title(self) -> str:
        return self.fill(self.rng.choice(_TITLES))

    def topic_line(self) -> str:
        return self.fill(self.rng.choice(_TOPIC_LINES))

    def sentence(self) -> str:
        if not self._queue:
            block = prose.grammar("en").block(self.rng, 16)
            self._queue = _SENTENCE_END.split(block.strip())[::-1]
        return self._queue.pop()

    def sentences(self, count: int) -> list[str]:
        """``count`` sentences, the first about the topic."""
        return [self.topic_line(), *(self.sentence() for _ in range(count - 1))]


def _words(lines: list[str]) -> int:
    return sum(len(line.split()) for line in lines)


def _paragraphs(writer: _Writer, goal: int, size: int = 4) -> list[str]:
    """Paragraphs of ``size`` sentences, each opening on the topic, until ``goal`` words."""
    paragraphs: list[str] = []
    while _words(paragraphs) < goal:
        paragraphs.append(" ".join(writer.sentences(size)))
    return paragraphs


def _poem(writer: _Writer, goal: int) -> str:
    stanzas: list[str] = []
    while _words(stanzas) < goal:
        stanzas.append("\n".join(writer.sentences(4)))
    return "\n\n".join([writer.title(), *stanzas])


def _song(writer: _Writer, goal: int) -> str:
    chorus = "\n".join(writer.sentences(2))
    parts: list[str] = []
    while _words(parts) < goal:
        verse = "\n".join(writer.sentences(4))
        parts += [f"Verse {len(parts) // 2 + 1}:\n{verse}", f"Chorus:\n{chorus}"]
    return "\n\n".join([writer.title(), *parts])


def _list(writer: _Writer, goal: int) -> str:
    items: list[str] = []
    while _words(items) < goal:
        line = writer.topic_line() if len(items) % 3 == 0 else writer.sentence()
        items.append(f"{len(items) + 1}. {line}")
    return "\n".join([writer.fill("Some things worth knowing about {topic}:"), *items])


def _story(writer: _Writer, goal: int) -> str:
    return "\n\n".join([writer.title(), *_paragraphs(writer, goal)])


def _blog_post(writer: _Writer, goal: int) -> str:
    return "\n\n".join([f"# {writer.title()}", *_paragraphs(writer, goal, 3)])


def _letter(writer: _Writer, goal: int) -> str:
    to, sender = writer.rng.sample(_NAMES, 2)
    body = _paragraphs(writer, goal)
    return "\n\n".join([f"Dear {to},", *body, f"With warm regards,\n{sender}"])


def _diary_entry(writer: _Writer, goal: int) -> str:
    return "\n\n".join(["Dear diary,", *_paragraphs(writer, goal, 3)])


def _speech(writer: _Writer, goal: int) -> str:
    body = _paragraphs(writer, goal)
    return "\n\n".join(["Friends and neighbours,", *body, "Thank you all for listening."])


FORMS: dict[str, Callable[[_Writer, int], str]] = {
    "poem": _poem,
    "short story": _story,
    "list": _list,
    "letter": _letter,
    "blog post": _blog_post,
    "diary entry": _diary_entry,
    "song": _song,
    "speech": _speech,
}


def piece(form: str, topic: str, rng: Random) -> str:
    """A piece of ``form`` about ``topic`` of at least MIN_WORDS words: the layout adds whole
    stanzas or paragraphs until a target drawn from MIN_WORDS..MAX_WORDS is reached, so the
    last one may run past it (up to about 220 words in all)."""
    if form not in FORMS:
        raise ValueError(f"unknown form {form!r}; known: {', '.join(FORMS)}")
    goal = rng.randint(MIN_WORDS, MAX_WORDS)
    return FORMS[form](_Writer(topic, rng), goal)
