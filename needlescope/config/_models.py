"""The models of a sweep config: each model's provider, endpoint, generation settings, limits
and price (part of config.py's models; ``needlescope.config._sweep`` is the front door)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    field_serializer,
    field_validator,
    model_validator,
)

if TYPE_CHECKING:
    from needlescope.providers.base import ChatRequest, Message
from needlescope.providers import (
    DEFAULT_REASONING_BUDGET,
    DEFAULT_TEMPERATURE,
    check_generation,
    reasoning_allowance,
    thinks_by_default,
    uses_openai_reasoning_params,
)

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@-]*$"
PROVIDER_KINDS = ("local", "openai", "anthropic", "gemini")
# Providers whose token counts are requests to a hosted, rate-limited counting endpoint.
HOSTED_COUNTERS = ("anthropic", "gemini")
# Where a remote provider answers when the config gives no base_url.
DEFAULT_BASE_URLS = {
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
}


def check_url(value: str) -> None:
    """An http(s) URL with a host and a valid port, or a ValueError saying what is wrong."""
    try:
        url = urlsplit(value)
        port = url.port
    except ValueError as exc:  # "Port out of range 0-65535", "Port could not be cast…"
        raise ValueError(f"not a usable URL {without_credentials(value)!r}: {exc}") from None
    if url.scheme not in ("http", "https"):
        raise ValueError(
            f"{without_credentials(value)!r}: the URL must start with http:// or https://"
        )
    if not url.hostname:
        raise ValueError(f"{without_credentials(value)!r}: the URL names no host")
    if port == 0:
        raise ValueError(f"{without_credentials(value)!r}: port 0 is not a port to connect to")


def has_credentials(url: str) -> bool:
    parts = urlsplit(url)
    return parts.username is not None or parts.password is not None


def without_credentials(url: str) -> str:
    """``url`` with any ``user:password@`` taken out (for storing and showing it)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


LengthUnit = Literal["tokens", "bytes", "chars"]
# Grid axes of sizes take whole numbers only: `true` or `1.5` in YAML is a mistake, not 1.
Count = Annotated[int, Field(gt=0, le=100_000_000, strict=True)]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Generation(Frozen):
    """Settings sent with every request. Part of the cell id: changing one asks the model again."""

    # None or "omit": not sent (the recall seed sends neither temperature nor max_tokens).
    temperature: float | None = Field(default=DEFAULT_TEMPERATURE, ge=0, le=2)
    # None: sized to the probe's answer; "omit": not sent at all.
    max_tokens: PositiveInt | Literal["omit"] | None = None
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int | None = None
    extra: dict[str, Any] = Field(default_factory=dict)

    @field_validator("temperature", mode="before")
    @classmethod
    def _omitted_temperature(cls, value: Any) -> Any:
        return None if value == "omit" else value

    @property
    def answer_tokens(self) -> int | None:
        """The configured answer budget, or None to size it to the probe's answer."""
        return self.max_tokens if isinstance(self.max_tokens, int) else None

    @property
    def sends_max_tokens(self) -> bool:
        return self.max_tokens != "omit"

    def request(self, messages: tuple[Message, ...], answer_tokens: int) -> ChatRequest:
        """The request these settings send for ``messages`` with an answer budget."""
        from needlescope.providers.base import ChatRequest

        extra = {k: v for k, v in {"top_p": self.top_p, "seed": self.seed}.items() if v is not None}
        return ChatRequest(
            messages=messages,
            max_tokens=answer_tokens if self.sends_max_tokens else None,
            temperature=self.temperature,
            extra={**extra, **self.extra},
        )


class Price(Frozen):
    """US dollars per million tokens. Output tokens include reasoning (billed as output).

    Cache rates: reads (``cached_input_per_mtok``), and Anthropic's writes, 5-minute
    (``cache_write_per_mtok``) and 1-hour (``cache_write_1h_per_mtok``); a rate not given is
    the input rate, or for an ``anthropic`` model the provider's multiple of it (reads 0.1x,
    5-minute writes 1.25x, 1-hour writes 2x). Batch and flex requests pay ``batch_discount``
    of every rate (0.5: half), or the batch prices where given."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cached_input_per_mtok: float | None = Field(default=None, ge=0)
    cache_write_per_mtok: float | None = Field(default=None, ge=0)
    cache_write_1h_per_mtok: float | None = Field(default=None, ge=0)
    batch_discount: float = Field(default=0.5, gt=0, le=1)
    batch_input_per_mtok: float | None = Field(default=None, ge=0)
    batch_output_per_mtok: float | None = Field(default=None, ge=0)

    def with_cache_rules(self, provider: str) -> Price:
        """This table with the provider's published cache multiples where a rate is missing."""
        multiples = CACHE_MULTIPLES.get(provider, {})
        filled = {
            key: round(self.input_per_mtok * multiple, 10)
            for key, multiple in multiples.items()
            if getattr(self, key) is None
        }
        return self.model_copy(update=filled) if filled else self

    def cost(
        self,
        prompt_tokens: int | None,
        output_tokens: int | None,
        cached_tokens: int | None = None,
        *,
        cache_write_tokens: int | None = None,
        cache_write_1h_tokens: int | None = None,
        discounted: bool = False,
    ) -> float | None:
        """The price of one request. ``prompt_tokens`` is the whole prompt: uncached input,
        cache reads (``cached_tokens``) and cache writes (``cache_write_tokens``, of them
        ``cache_write_1h_tokens`` for an hour); ``discounted``: a batch or flex request."""
        if prompt_tokens is None and output_tokens is None:
            return None
        prompt = prompt_tokens or 0
        read = min(cached_tokens or 0, prompt)
        written = min(cache_write_tokens or 0, prompt - read)
        hour = min(cache_write_1h_tokens or 0, written)
        rate_5m = _or(self.cache_write_per_mtok, self.input_per_mtok)
        input_cost = (
            (prompt - read - written) * self.input_per_mtok
            + read * _or(self.cached_input_per_mtok, self.input_per_mtok)
            + (written - hour) * rate_5m
            + hour * _or(self.cache_write_1h_per_mtok, rate_5m)
        )
        output_cost = (output_tokens or 0) * self.output_per_mtok
        if discounted:
            input_cost *= self._factor(self.batch_input_per_mtok, self.input_per_mtok)
            output_cost *= self._factor(self.batch_output_per_mtok, self.output_per_mtok)
        return (input_cost + output_cost) / 1e6

    def _factor(self, batch_rate: float | None, rate: float) -> float:
        if batch_rate is None:
            return self.batch_discount
        return batch_rate / rate if rate else 0.0


# Anthropic's published multiples of the input rate (prompt-caching docs): cache reads 0.1x,
# 5-minute writes 1.25x, 1-hour writes 2x. OpenAI and Gemini publish a cached rate per model.
CACHE_MULTIPLES: dict[str, dict[str, float]] = {
    "anthropic": {
        "cached_input_per_mtok": 0.1,
        "cache_write_per_mtok": 1.25,
        "cache_write_1h_per_mtok": 2.0,
    }
}


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


class BatchSettings(Frozen):
    """A model's ``batch:``: its cells go to the provider's batch API (half price, answered
    within 24 hours) instead of one request each. ``batch: true`` takes every default."""

    # Requests in one batch; None: the provider's own limit (OpenAI 50,000, Anthropic 100,000).
    max_requests: PositiveInt | None = None
    poll_s: float = Field(default=60, gt=0)  # seconds between two looks at an open batch
    # How long a run waits for its batches before it ends and hands them over to the next run
    # (or `needlescope rerun`), which collects them without sending anything again.
    wait_s: float = Field(default=24 * 3600, ge=0)
    # How `rerun` resends a batch's failed cells: as a new batch, or one request each.
    rerun: Literal["batch", "sync"] = "batch"


# Providers with a batch API (needlescope.providers.batch) and with a flex tier.
BATCH_PROVIDERS = ("openai", "anthropic", "gemini")
FLEX_PROVIDERS = ("openai", "gemini")
CACHE_PROVIDERS = ("anthropic", "openai")  # whose prompt cache ``cache: auto`` marks


class ModelConfig(Frozen):
    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    provider: str
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    # The name of a Prefect Secret block holding the key: where scheduled deployments keep it.
    api_key_secret: Annotated[str, Field(min_length=1)] | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    context_window: PositiveInt | None = None
    concurrency: PositiveInt = 4
    delay_s: float = Field(default=0.0, ge=0)  # seconds between two requests' starts (pacing)
    timeout_s: float = Field(default=600, gt=0)
    max_retry_after_s: float = Field(default=60, ge=0)
    threads: PositiveInt | None = None
    under_test: bool = True  # false for a model that only judges or embeds
    generation: Generation = Field(default_factory=Generation)
    # Generation settings as a grid axis: each entry becomes a model "<name>@<label>" whose
    # generation is this one's with the entry's fields (and `extra` keys) laid over it.
    variants: dict[Annotated[str, Field(pattern=NAME_PATTERN)], dict[str, Any]] = Field(
        default_factory=dict
    )
    price: Price | None = None
    batch: BatchSettings | None = None
    # OpenAI's and Gemini's flex tier (service_tier "flex"): synchronous requests at batch
    # prices, answered more slowly and shed first under load. Not part of a cell's id.
    tier: Literal["flex"] | None = None
    # auto: the longest prompt prefix cells share is marked for the provider's prompt cache
    # (Anthropic's cache_control, OpenAI's prompt_cache_key) where it pays, and the cells go in
    # prompt order (needlescope.providers.caching). Not part of a cell's id.
    cache: Literal["auto", "off"] = "off"
    # A model that thinks gets answer budget + reasoning_budget as its output limit. None: by
    # its name (o1/o3/o4/gpt-5, deepseek-reasoner, Gemini 2.5 and later); a model whose
    # replies carry reasoning is treated as one from then on. Not part of a cell's id.
    reasoning: bool | None = None
    reasoning_budget: PositiveInt = DEFAULT_REASONING_BUDGET
    # OpenAI's reasoning-model parameters: max_completion_tokens, no temperature or top_p.
    # None: true for OpenAI-compatible model ids starting o1, o3, o4 or gpt-5.
    openai_reasoning_params: bool | None = None
    # The cells table's haystack_length of token cells. None: counted unless that is a request
    # of its own to a hosted counter (HOSTED_COUNTERS), where it would send nearly the whole
    # prompt again for every cell; true: always counted; false: never. Not part of a cell's id.
    count_haystack: bool | None = None

    @model_validator(mode="before")
    @classmethod
    def _provider_rules(cls, data: Any) -> Any:
        """``batch: true`` as the default settings; the provider's cache multiples filled in."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if data.get("batch") is True:
            data["batch"] = {}
        elif data.get("batch") is False:
            data["batch"] = None
        price, provider = data.get("price"), data.get("provider")
        if isinstance(price, dict | Price) and isinstance(provider, str):
            data["price"] = Price.model_validate(price).with_cache_rules(provider)
        return data

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, value: str) -> str:
        if value not in PROVIDER_KINDS:
            raise ValueError(f"unknown provider {value!r}; known: {', '.join(PROVIDER_KINDS)}")
        return value

    @field_validator("base_url")
    @classmethod
    def _usable_url(cls, value: str | None) -> str | None:
        if value is not None:
            check_url(value)
        return value

    @field_serializer("base_url")
    def _no_credentials(self, value: str | None) -> str | None:
        # Credentials in a URL are secrets like keys: a stored or printed config never has them.
        return None if value is None else without_credentials(value)

    @model_validator(mode="after")
    def _remote_needs_url(self) -> ModelConfig:
        if self.provider == "openai" and not self.base_url:
            raise ValueError("an openai model needs base_url (e.g. https://api.openai.com/v1)")
        if self.provider != "local" and not self.model:
            raise ValueError(f"an {self.provider} model needs model (the id the API expects)")
        if self.api_key_env and self.api_key_secret:
            raise ValueError("give api_key_env or api_key_secret, not both")
        if self.batch is not None and self.provider not in BATCH_PROVIDERS:
            raise ValueError(
                f"batch: provider {self.provider!r} has no batch API;"
                f" batch works with {', '.join(BATCH_PROVIDERS)}"
            )
        if self.cache == "auto" and self.provider not in CACHE_PROVIDERS:
            raise ValueError(
                f"cache: auto marks prompt prefixes for anthropic and openai, not"
                f" {self.provider!r} (Gemini and llama.cpp reuse prefixes by themselves)"
            )
        if self.tier is not None and self.provider not in FLEX_PROVIDERS:
            raise ValueError(
                f"tier: provider {self.provider!r} has no flex tier;"
                f" flex works with {', '.join(FLEX_PROVIDERS)}"
            )
        if self.base_url and has_credentials(self.base_url):
            key = next((k for k in ("api_key_env", "api_key_secret") if getattr(self, k)), None)
            if key is None and any(h.lower() == "authorization" for h in self.headers):
                key = "an Authorization header"
            if key is not None:
                raise ValueError(
                    f"base_url: credentials in the URL (sent as HTTP Basic auth) and {key}"
                    " together: give one of them"
                )
        return self

    @model_validator(mode="after")
    def _provider_accepts_generation(self) -> ModelConfig:
        check_generation(
            self.provider,
            self.model,
            self.generation,
            reasoning_params=self.sends_reasoning_params,
        )
        return self

    @property
    def discounted(self) -> bool:
        """Whether its synchronous requests pay batch prices (the flex tier)."""
        return self.tier == "flex"

    @property
    def thinks(self) -> bool:
        """Whether the model reasons before answering (configured, else by its name)."""
        if self.reasoning is not None:
            return self.reasoning
        return thinks_by_default(self.provider, self.model)

    @property
    def counts_haystack(self) -> bool:
        """Whether a token cell's haystack is counted for the cells table (``count_haystack``)."""
        if self.count_haystack is not None:
            return self.count_haystack
        return self.provider not in HOSTED_COUNTERS

    @property
    def sends_reasoning_params(self) -> bool:
        """OpenAI-compatible: send max_completion_tokens and no temperature / top_p."""
        if self.provider != "openai":
            return False
        if self.openai_reasoning_params is not None:
            return self.openai_reasoning_params
        return uses_openai_reasoning_params(self.model)

    def output_limit(self, answer_tokens: int) -> int:
        """The output limit sent for an answer budget: room for reasoning added."""
        return answer_tokens + reasoning_allowance(
            self.provider,
            self.generation.extra,
            reasoning=self.thinks,
            reasoning_budget=self.reasoning_budget,
        )

    def endpoint(self) -> str:
        """The URL the provider talks to (configured, or the provider's public API)."""
        return self.base_url or DEFAULT_BASE_URLS.get(self.provider, "")

    def identity(self) -> dict[str, Any]:
        """What identifies the model in a cell id: never keys, URLs or concurrency."""
        return {"name": self.name, "provider": self.provider, "model": self.model}
