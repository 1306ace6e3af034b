"""Token-exact fitting with few counting requests, for providers that count pieces of text
together (``needlescope.fitting._pieces.PieceCounter``: llama.cpp with a GPT-2-style tokenizer).

Each round of the fit (``needlescope.fitting._rounds``) renders many candidate filler sizes and
counts every piece none of them had counted before in one request; pieces are remembered per
model, so cells sharing a filler count its stretches once. A cell starts from what its last
sibling (same model, filler and length) fitted, moved by how much longer its own instructions
and needles are, which usually ends the fit in one round. The haystack of each candidate is cut
into pieces in the same round, so the cells table's haystack length costs no request either.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from needlescope.fitting import PieceCounter, PieceCounts, fit_in_rounds
from needlescope.probes.base import Rendered
from needlescope.providers.base import Message, Provider

Render = Callable[[int], Rendered]
FitLength = Callable[[Render, int], Awaitable[tuple[int, int]]]
WholeCount = Callable[[tuple[Message, ...]], Awaitable[int | None]]


@dataclass
class _Sibling:
    n: int  # its fitted filler size
    prompt_chars: int  # its prompt's characters at that size
    target: int


@dataclass
class PieceFitter:
    """Per sweep: each model's piece counts and each (model, filler, length)'s last fit."""

    counts: dict[str, PieceCounts] = field(default_factory=dict)
    siblings: dict[tuple[str, str, int], _Sibling] = field(default_factory=dict)
    # Filler characters one more character of instructions or needles displaces, per
    # (model, filler): needles' digits take more tokens a character than prose.
    shifts: dict[tuple[str, str], float] = field(default_factory=dict)
    rounds: int = 0  # fitting rounds, for the benchmark
    fits: int = 0

    def counter(self, provider: Provider) -> PieceCounter | None:
        counter_of = getattr(provider, "piece_counter", None)
        return counter_of() if callable(counter_of) else None

    def pieces_of(self, model: str, counter: PieceCounter) -> PieceCounts:
        if model not in self.counts:
            self.counts[model] = PieceCounts(counter.count_separated)
        return self.counts[model]

    async def count_text(self, model: str, provider: Provider, text: str) -> int | None:
        """``text``'s tokens by pieces (None where they cannot be: count it whole)."""
        counter = self.counter(provider)
        if counter is None or not counter.framable(text):
            return None
        return await self.pieces_of(model, counter).count(text)

    async def measure_at(
        self, model: str, provider: Provider, render: Render, n: int, whole: WholeCount
    ) -> int | None:
        """One size's whole prompt in tokens by pieces (None: the provider cannot count them)."""
        counter = self.counter(provider)
        if counter is None:
            return None
        counts = self.pieces_of(model, counter)
        return (await self._measure(counter, counts, render, [n], {}, whole))[0]

    def fitter(
        self, model: str, provider: Provider, filler: str, whole: WholeCount
    ) -> FitLength | None:
        """A cell's fit by pieces, or None when the provider cannot count pieces."""
        counter = self.counter(provider)
        if counter is None:
            return None
        counts = self.pieces_of(model, counter)

        async def fit(render: Render, target: int) -> tuple[int, int]:
            chars: dict[int, int] = {}

            async def measure_many(ns: list[int]) -> list[int]:
                return await self._measure(counter, counts, render, ns, chars, whole)

            key = (model, filler, target)
            sibling = self.siblings.get(key)
            if sibling is not None:
                here = len(render(sibling.n).prompt_text)
                shift = self.shifts.get((model, filler), 1.0)
                guess = sibling.n - round((here - sibling.prompt_chars) * shift)
                result = await fit_in_rounds(
                    measure_many, target, max(0, guess), slope=target / max(1, sibling.n)
                )
                moved = here - sibling.prompt_chars
                if abs(moved) >= 8:  # enough to learn from
                    learnt = (sibling.n - result.n_filler_chars) / moved
                    self.shifts[(model, filler)] = min(10.0, max(0.0, learnt))
            else:
                other = [s for (m, f, _), s in self.siblings.items() if (m, f) == (model, filler)]
                guess = round(other[-1].n * target / other[-1].target) if other else target * 3
                result = await fit_in_rounds(measure_many, target, guess, with_empty=not other)
            n = result.n_filler_chars
            prompt_chars = chars.get(n)
            if prompt_chars is None:
                prompt_chars = len(render(n).prompt_text)
            self.siblings[key] = _Sibling(n, prompt_chars, target)
            self.rounds += result.rounds
            self.fits += 1
            return n, result.measured

        return fit

    async def _measure(
        self,
        counter: PieceCounter,
        counts: PieceCounts,
        render: Render,
        ns: list[int],
        chars: dict[int, int],
        whole: WholeCount,
    ) -> list[int]:
        """Each size's whole prompt in tokens: one request for every piece not yet counted
        (the haystacks' too), one per prompt that cannot be
        counted by pieces."""
        plans: list[tuple[int, list[str]] | None] = []  # None: counted whole
        wholes: dict[int, tuple[Message, ...]] = {}
        wanted: list[str] = []
        for n in ns:
            rendered = render(n)
            chars[n] = len(rendered.prompt_text)
            messages = rendered.messages or (Message("user", rendered.prompt_text),)
            roles = tuple(m.role for m in messages)
            frame = None
            if all(counter.framable(m.content) for m in messages):
                frame = await counter.frame_tokens(roles)
            if frame is None:
                wholes[len(plans)] = messages
                plans.append(None)
                continue
            total, missing = frame, []
            for m in messages:
                known, lacking = counts.split(m.content)
                total += known
                missing += lacking
            wanted += missing
            # Every size's haystack (the answer's is then counted already): its pieces are the
            # prompt's but for the first and the last.
            if counter.framable(rendered.haystack_text):
                wanted += counts.split(rendered.haystack_text)[1]
            plans.append((total, missing))
        got = await counts.fetch(wanted)
        out = [0 if plan is None else plan[0] + sum(got[p] for p in plan[1]) for plan in plans]
        for i, messages in wholes.items():
            count = await whole(messages)
            if count is None:
                raise ValueError("the provider counted pieces but not a whole prompt")
            out[i] = count
        return out
