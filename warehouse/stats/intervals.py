"""Intervals and tests of the statistics: Wilson score intervals of rates (0-1), seeded
percentile-bootstrap intervals of mean accuracies (0-100; the normal approximation past
:data:`BOOTSTRAP_MAX_N` values), and McNemar's exact test.

The bootstrap is seeded and deterministic: the values are sorted before resampling, so the
interval depends on the multiset of values and the seed only, never on the order a query
returned them in. The resampling is vectorised with Polars' seeded sampler (one
``resamples × n`` draw; numpy is not a dependency, and a Polars upgrade may change the draws).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from statistics import NormalDist

import polars as pl

Z95 = 1.959964
DEFAULT_RESAMPLES = 2000
# Above this many values a bootstrap draw (resamples × n) gets large: use the normal
# approximation, which the bootstrap of a mean converges to anyway. At 1,000 a report's
# per-config table of a 1M-answer warehouse (800 configs of ~1,250) costs nothing; at 5,000
# it cost 8 s of bootstrap draws.
BOOTSTRAP_MAX_N = 1000
BOOTSTRAP = "bootstrap"
NORMAL = "normal"

NAN = float("nan")


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of the rate ``successes / n`` (both bounds in 0-1).

    ``z`` is the normal quantile (1.959964: 95%). ``n = 0`` gives ``(nan, nan)``.
    """
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return NAN, NAN
    p = successes / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _clean(values: Iterable[float] | pl.Series) -> pl.Series:
    """The finite values as a sorted Float64 series (nulls and NaNs dropped)."""
    if isinstance(values, pl.Series):
        series = values.cast(pl.Float64)
    elif isinstance(values, Sequence):
        series = pl.Series("v", values, dtype=pl.Float64)
    else:  # a numpy array or any other iterable of numbers
        series = pl.Series("v", list(values), dtype=pl.Float64)
    return series.drop_nulls().drop_nans().sort()


def _check(resamples: int, level: float) -> None:
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")


def _bootstrap(
    sorted_values: pl.Series, resamples: int, seed: int, level: float
) -> tuple[float, float]:
    n = sorted_values.len()
    if n * resamples > _CACHED_DRAWS:
        drawn = sorted_values.sample(n * resamples, with_replacement=True, seed=seed)
    else:
        drawn = sorted_values.gather(_resample_indices(n, resamples, seed))
    means = drawn.reshape((resamples, n)).arr.mean()
    alpha = 1 - level
    lo = means.quantile(alpha / 2, interpolation="linear")
    hi = means.quantile(1 - alpha / 2, interpolation="linear")
    return float(lo if lo is not None else NAN), float(hi if hi is not None else NAN)


_CACHED_DRAWS = 400_000  # positions per remembered draw (1.6 MB): 32 are kept


@functools.lru_cache(maxsize=32)  # a report's comparisons meet a few dozen cell sizes
def _resample_indices(n: int, resamples: int, seed: int) -> pl.Series:
    """The positions ``Series.sample(n * resamples, with_replacement=True, seed=seed)`` draws
    from any series of length ``n`` (they depend on nothing else): drawn once for the many
    groups of the same size a report bootstraps."""
    positions = pl.Series("i", range(n), dtype=pl.UInt32)
    return positions.sample(n * resamples, with_replacement=True, seed=seed)


def bootstrap_mean_interval(
    values: Iterable[float] | pl.Series,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile-bootstrap interval of the mean of ``values`` at confidence ``level``.

    ``resamples`` resamples of size n, drawn with replacement in one vectorised draw (memory:
    ``resamples × n`` floats); the same values and seed always give the same interval. Nulls
    and NaNs are dropped; no values give ``(nan, nan)``.
    """
    _check(resamples, level)
    clean = _clean(values)
    if clean.len() == 0:
        return NAN, NAN
    return _bootstrap(clean, resamples, seed, level)


def mean_interval(
    values: Iterable[float] | pl.Series,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
    max_bootstrap_n: int = BOOTSTRAP_MAX_N,
) -> tuple[float, float, float, str | None]:
    """(mean, lo, hi, method) of ``values``: the bootstrap interval for up to
    ``max_bootstrap_n`` values, else the normal one (mean ± z·sd/√n); method is
    ``"bootstrap"``, ``"normal"``, or None when there are no values (all nan then)."""
    _check(resamples, level)
    clean = _clean(values)
    n = clean.len()
    if n == 0:
        return NAN, NAN, NAN, None
    mean = float(clean.mean())  # type: ignore[arg-type]
    if n <= max_bootstrap_n:
        lo, hi = _bootstrap(clean, resamples, seed, level)
        return mean, lo, hi, BOOTSTRAP
    lo, hi = normal_interval(mean, float(clean.std(ddof=1)), n, level)  # type: ignore[arg-type]
    return mean, lo, hi, NORMAL


def normal_interval(mean: float, sd: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """mean ± z·sd/√n: the interval :func:`mean_interval` gives past ``max_bootstrap_n``."""
    half = NormalDist().inv_cdf(0.5 + level / 2) * sd / math.sqrt(n)
    return mean - half, mean + half


def mcnemar_p(b01: int, b10: int) -> float:
    """Exact two-sided McNemar p-value: the binomial(b01 + b10, 1/2) tail of the smaller
    discordant count, doubled and capped at 1 (1.0 when there are no discordant pairs)."""
    if b01 < 0 or b10 < 0:
        raise ValueError(f"discordant counts must be non-negative, got {b01}, {b10}")
    n = b01 + b10
    k = min(b01, b10)
    if n == 0:
        return 1.0
    # P(X <= k) summed downwards from the largest term, in log space (n may be millions).
    log_top = math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) - n * math.log(2)
    total, term = 1.0, 1.0
    for i in range(k, 0, -1):
        term *= i / (n - i + 1)  # C(n, i-1) / C(n, i)
        total += term
        if term < 1e-17 * total:
            break
    return min(1.0, 2 * math.exp(log_top + math.log(total)))
