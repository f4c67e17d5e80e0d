"""The Monte Carlo error of a percentile bootstrap interval, and the digits that error allows.

A percentile bound from ``B`` replicates is itself random: another seed gives another bound. Its Monte Carlo
standard error comes from the order statistics, without assuming a shape for the bootstrap distribution:

* the bound at quantile ``q`` is the ``ceil(qB)``-th order statistic of the replicates (no interpolation: numpy's
  ``method="inverted_cdf"``; ``np.percentile``'s default interpolates, which moves a bound by less than the gap to
  the next order statistic, far inside its Monte Carlo range);
* the number of replicates below the true ``q``-quantile is Binomial(B, q), so the order statistics at
  ``qB -+ 1.96 sqrt(B q (1 - q))`` (rounded outward, clipped to 1..B) bracket that quantile with about 95%
  probability: this is the bound's Monte Carlo 95% range, and its standard error is the range / 3.92.

:func:`mc_round` then prints a number with only the digits that error allows.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal
from typing import NamedTuple

import numpy as np

from .errors import ParameterError, is_number

__all__ = ["PercentileBounds", "mc_round", "percentile_bounds"]

_Z = 1.959963984540054  # the normal 97.5% quantile: a 95% range is +-_Z standard errors, 2 _Z = 3.92 wide


class PercentileBounds(NamedTuple):
    """A percentile interval from ``n_replicates`` finite replicates and each bound's Monte Carlo SE."""

    low: float
    high: float
    low_se: float
    high_se: float
    n_replicates: int


def _order_index(q: float, b: int) -> int:
    """ceil(qB) as a 0-based index; the tolerance keeps products such as 0.025 * 10000 = 250.00000000000003 at 250."""
    return min(max(math.ceil(q * b - 1e-9), 1), b) - 1


def _bound(sorted_values: np.ndarray, q: float) -> tuple[float, float]:
    b = len(sorted_values)
    half = _Z * math.sqrt(b * q * (1 - q))
    lo = min(max(math.floor(q * b - half + 1e-9), 1), b) - 1
    hi = min(max(math.ceil(q * b + half - 1e-9), 1), b) - 1
    return float(sorted_values[_order_index(q, b)]), float(sorted_values[hi] - sorted_values[lo]) / (2 * _Z)


def percentile_bounds(replicates, level: float = 0.95) -> PercentileBounds:
    """The equal-tailed percentile interval at ``level`` of bootstrap ``replicates`` (NaN replicates, undefined
    statistics, are left out, as :func:`bias_utils.stats.cluster_bootstrap_ci` does) and each bound's Monte Carlo SE
    by the order-statistic rule of this module. Near the ends of a small B the range is clipped at the extreme
    replicates, and the SE understates."""
    values = np.asarray(replicates, dtype=float)
    if values.ndim != 1:
        raise ParameterError(f"replicates must be 1-D (one statistic per replicate), got shape {values.shape}")
    if not (is_number(level) and 0 < level < 1):
        raise ParameterError(f"level must be a number between 0 and 1, got {level!r}")
    values = np.sort(values[~np.isnan(values)])
    if len(values) < 2:
        raise ParameterError(f"replicates: {len(values)} non-missing values, need at least 2 for an interval")
    tail = (1 - level) / 2
    low, low_se = _bound(values, tail)
    high, high_se = _bound(values, 1 - tail)
    return PercentileBounds(low, high, low_se, high_se, len(values))


def mc_round(value: float, se: float) -> str:
    """``value`` as text with the digits its Monte Carlo standard error ``se`` allows.

    Rule: the last digit kept is at the decade of the Monte Carlo 95% range, 10^floor(log10(3.92 se)), the
    width that :func:`percentile_bounds` measures; the value is rounded half away from zero to that place and
    written without an exponent. So 58.3 with se 0.9 (range 3.5: units) prints "58", with se 4 (range 15.7: tens)
    "60", with se 0.02 (range 0.078: hundredths) "58.30". ``se == 0`` (no Monte Carlo error) gives 6 significant
    digits; a value that is not finite prints as Python writes it ("inf", "-inf", "nan")."""
    if not is_number(value):
        raise ParameterError(f"value must be a real number, got {value!r}")
    if not (is_number(se) and math.isfinite(se) and se >= 0):
        raise ParameterError(f"se must be a finite number >= 0, got {se!r}")
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    if se == 0:
        return f"{value:.6g}"
    place = math.floor(math.log10(2 * _Z * se))
    if value != 0:  # never more digits than a float holds (17 significant)
        place = max(place, math.floor(math.log10(abs(value))) - 16)
    rounded = Decimal(repr(value)).quantize(Decimal(1).scaleb(place), rounding=ROUND_HALF_UP)
    if rounded == 0:
        rounded = abs(rounded)
    return f"{rounded:f}"
