"""The digits every number of the book is printed with: one function per quantity, used by sentences, tables
and the front page alike, and the Monte Carlo error of a percentile bootstrap interval with the digits it allows.

* :func:`number_text` an estimate (an effect size, a mean, a correlation, an odds ratio): two decimals, one from
  100, none from 1,000 (with thousands separators), two significant digits below 0.01 and, from a million, times
  a power of ten (6.8 × 10²⁰⁰);
* :func:`p_text` a p value: two significant digits, "< 0.001" below;
* :func:`count_text` a count: an integer with thousands separators;
* :func:`percent_text` a share as a whole percentage;
* :func:`relative_difference_text` a relative difference between two computations of one number: "0", "< 10⁻¹²"
  where float64 rounding alone could make it (about 10⁻¹⁶ per operation), else two significant digits, times a
  power of ten below 0.001 (1.6 × 10⁻⁵);
* :func:`interval_text` an interval's bounds at its estimate's decimals (never more than a bound's own size
  warrants), so "0.95 to 1.41" and never "0.949 to 1.41"; :func:`bound_text` one bound by the same rule, or to its
  Monte Carlo error when it has one (a bootstrap bound), for sentences and a table's bound columns alike, so one
  interval reads the same on every page (14.2 beside an odds ratio of 199.6; 3.0 to 56 from few replicates).

Negative numbers carry the typographic minus (−). The tables on disk keep every digit.

A percentile bound from ``B`` replicates is itself random: another seed gives another bound. Its Monte Carlo
standard error comes from the order statistics, without assuming a shape for the bootstrap distribution:

* the bound at quantile ``q`` is the ``ceil(qB)``-th order statistic of the replicates (no interpolation: numpy's
  ``method="inverted_cdf"``; ``np.percentile``'s default interpolates, which moves a bound by less than the gap to
  the next order statistic, far inside its Monte Carlo range);
* the number of replicates below the true ``q``-quantile is Binomial(B, q), so the order statistics at
  ``qB -+ 1.96 sqrt(B q (1 - q))`` (rounded outward, clipped to 1..B) bracket that quantile with about 95%
  probability: this is the bound's Monte Carlo 95% range, and its standard error is the range / 3.92.

:func:`_mc_round` then prints a number with only the digits that error allows.
"""

from __future__ import annotations

import math
import numbers
from decimal import ROUND_HALF_UP, Decimal
from typing import NamedTuple

import numpy as np

from .errors import ParameterError, is_number

__all__: list[str] = []

_Z = 1.959963984540054  # the normal 97.5% quantile: a 95% range is +-_Z standard errors, 2 _Z = 3.92 wide


_MINUS = "\u2212"


def _finite(x) -> bool:
    return is_number(x) and math.isfinite(float(x))


def _special(x) -> str:
    """A value that is not a finite number: "–" for a missing one, "∞" / "−∞"."""
    if is_number(x) and math.isinf(float(x)):
        return "∞" if float(x) > 0 else _MINUS + "∞"
    return "–"


def _decimals(x: float) -> int:
    """The decimals :func:`number_text` prints ``x`` with: 2 (0.01 <= |x| < 100), 1 (below 1,000), 0 (from 1,000),
    two significant digits below 0.01 (0.0040: 4)."""
    size = abs(float(x))
    if size >= 1000:
        return 0
    if size >= 100:
        return 1
    if size >= 0.01 or size == 0:
        return 2
    return 1 - math.floor(math.log10(size))


_SUPERSCRIPT = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")


def _fixed(x: float, places: int) -> str:
    if abs(float(x)) >= 1e6:  # a million and more: 2 significant digits times a power of ten (6.8 × 10²⁰⁰)
        return _scientific(x)
    text = f"{float(x):,.{places}f}"
    if float(text.replace(",", "")) == 0:
        text = text.lstrip("-")  # no "−0.00"
    return text.replace("-", _MINUS)


def number_text(x, signed: bool = False) -> str:
    """An estimate as the book prints it (the rule of :func:`decimals`): 0.86, −0.12, 15.40, 199.6, 1,793, 0.0040;
    0 as "0"; a missing value as "–". ``signed``: a positive number with its "+" (a change, a gap)."""
    if not _finite(x):
        return _special(x)
    if isinstance(x, numbers.Integral) and not isinstance(x, bool):
        return count_text(x)  # an integer is a count (a table's n), whatever column it sits in
    text = "0" if float(x) == 0 else _fixed(x, _decimals(x))
    return "+" + text if signed and float(x) > 0 and text != "0" else text


def p_text(p, relation: bool = False) -> str:
    """A p value: "< 0.001" below 0.001, else two significant digits (0.0087, 0.012, 0.21, 1); with ``relation``
    the sign a sentence needs, "= 0.0087" or "< 0.001"."""
    if not _finite(p):
        return _special(p)
    p = float(p)
    if p < 0.001:
        return "< 0.001"
    return f"= {p:.2g}" if relation else f"{p:.2g}"


def count_text(n) -> str:
    """A count: an integer with thousands separators (1,525); a missing count as "–"."""
    if not _finite(n):
        return _special(n)
    return f"{round(float(n)):,}".replace("-", _MINUS)


def percent_text(share) -> str:
    """A share between 0 and 1 as a whole percentage (0.714 -> "71%")."""
    if not _finite(share):
        return _special(share)
    return _fixed(100 * float(share), 0) + "%"


#: Below this a relative difference is float64 rounding (about 1e-16 per operation, accumulated over a computation).
_FLOAT_NOISE = 1e-12


def _scientific(x: float) -> str:
    """Two significant digits times a power of ten: 1.6 × 10⁻⁵."""
    mantissa, exponent = f"{float(x):.1e}".split("e")
    return f"{mantissa} × 10{str(int(exponent)).translate(_SUPERSCRIPT)}".replace("-", _MINUS)


def relative_difference_text(x) -> str:
    """A relative difference |a − b| / |b| between two computations of one number: "0" when they are equal,
    "< 10⁻¹²" below :data:`FLOAT_NOISE` (float64 rounding alone gives such differences), two significant digits
    times a power of ten below 0.001 ("1.6 × 10⁻⁵"), else :func:`number_text`; a missing one as "–"."""
    if not _finite(x):
        return _special(x)
    x = abs(float(x))
    if x == 0:
        return "0"
    if x < _FLOAT_NOISE:
        return "< 10" + str(round(math.log10(_FLOAT_NOISE))).translate(_SUPERSCRIPT)
    return _scientific(x) if x < 0.001 else number_text(x)


def interval_text(low, high, estimate=None, separator: str = " to ") -> str:
    """An interval's bounds at the decimals of its ``estimate`` (:func:`decimals`; without an estimate, of the
    bound nearer zero), each never with more decimals than its own size gives: "0.95 to 1.41" for 1.15, "3.2 to
    1,793" for 199.6. A table's bound columns print each bound by the same rule (:func:`bound_text`)."""
    values = [float(v) for v in (low, high) if _finite(v)]
    if estimate is None or not _finite(estimate):
        estimate = min(values, key=abs) if values else 1.0  # 2 decimals without any number
    return separator.join(bound_text(v, estimate) for v in (low, high))


def bound_text(bound, estimate=None, mc_se=None) -> str:
    """One bound of an interval as every page prints it: with its Monte Carlo SE (a bootstrap bound), the digits that
    error allows (:func:`_mc_round`: 3.0 and 56, not 3.02 and 55.51, from few replicates); else at its ``estimate``'s
    decimals and never more than its own size gives, as :func:`interval_text` prints it (14.2, not 14.18, beside an
    odds ratio of 199.6); without either, by its own size. A sentence and a table print one interval alike."""
    if not _finite(bound):
        return _special(bound)
    if _finite(mc_se) and float(mc_se) >= 0:
        return format(Decimal(_mc_round(float(bound), float(mc_se))), ",f").replace("-", _MINUS)
    if float(bound) == 0:
        return "0"
    places = _decimals(estimate) if _finite(estimate) else _decimals(bound)
    return _fixed(bound, min(places, _decimals(bound)))


class _PercentileBounds(NamedTuple):
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


def percentile_bounds(replicates, level: float = 0.95, *, quantiles: tuple[float, float] | None = None
                      ) -> _PercentileBounds:
    """The equal-tailed percentile interval at ``level`` of bootstrap ``replicates`` (NaN replicates, undefined
    statistics, are left out, as :func:`bias_utils.core.stats.cluster_bootstrap_ci` does) and each bound's Monte Carlo
    SE by the order-statistic rule of this module; ``quantiles`` (low, high) replaces the equal tails (a BCa
    interval's adjusted levels). Near the ends of a small B the range is clipped at the extreme replicates, and the
    SE understates."""
    values = np.asarray(replicates, dtype=float)
    if values.ndim != 1:
        raise ParameterError(f"replicates must be 1-D (one statistic per replicate), got shape {values.shape}")
    if not (is_number(level) and 0 < level < 1):
        raise ParameterError(f"level must be a number between 0 and 1, got {level!r}")
    if quantiles is not None and not (len(quantiles) == 2 and all(is_number(q) and 0 < q < 1 for q in quantiles)):
        raise ParameterError(f"quantiles must be two numbers between 0 and 1, got {quantiles!r}")
    values = np.sort(values[~np.isnan(values)])
    if len(values) < 2:
        raise ParameterError(f"replicates: {len(values)} non-missing values, need at least 2 for an interval")
    tail = (1 - level) / 2
    low_q, high_q = (tail, 1 - tail) if quantiles is None else quantiles
    low, low_se = _bound(values, low_q)
    high, high_se = _bound(values, high_q)
    return _PercentileBounds(low, high, low_se, high_se, len(values))


def _mc_round(value: float, se: float) -> str:
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
    return _rounded_at(value, _mc_place(value, se))


def _mc_place(value: float, se: float) -> int:
    """The decimal place (a power of ten) :func:`_mc_round` keeps for ``value`` with Monte Carlo SE ``se`` > 0."""
    place = math.floor(math.log10(2 * _Z * se))
    if value != 0:  # never more digits than a float holds (17 significant)
        place = max(place, math.floor(math.log10(abs(value))) - 16)
    return place


def _rounded_at(value: float, place: int) -> str:
    """``value`` rounded half away from zero at 10^``place``, written without an exponent ("-0" as "0")."""
    rounded = Decimal(repr(value)).quantize(Decimal(1).scaleb(place), rounding=ROUND_HALF_UP)
    if rounded == 0:
        rounded = abs(rounded)
    return f"{rounded:f}"


def mc_interval_text(low, high, low_se, high_se, separator: str = " to ") -> str:
    """An interval of two Monte Carlo bounds as every page prints it (:func:`mc_interval_bounds`), joined by
    ``separator``."""
    return separator.join(mc_interval_bounds(low, high, low_se, high_se))


def mc_interval_bounds(low, high, low_se, high_se) -> tuple[str, str]:
    """The two bounds of an interval as every page prints them: each bound at the place its own error allows
    (:func:`_mc_round`), then both at the coarser of the two places wherever a bound keeps two significant digits
    there, so one interval does not mix decimals ("31 to 78", not "31 to 78.5") while an odds ratio keeps "2.9 to
    130"; no bound shows a digit its own error does not allow. Without finite errors, each bound by
    :func:`bound_text`. A sentence and a table's two columns print one interval alike."""
    bounds, errors = [float(low), float(high)], [float(low_se), float(high_se)]
    if not all(_finite(b) for b in bounds) or not all(_finite(e) and e > 0 for e in errors):
        return bound_text(bounds[0], mc_se=errors[0]), bound_text(bounds[1], mc_se=errors[1])
    own = [_mc_place(b, e) for b, e in zip(bounds, errors)]
    places = [max(p, min(max(own), math.floor(math.log10(abs(b))) - 1)) if b else p for b, p in zip(bounds, own)]
    low_text, high_text = (format(Decimal(_rounded_at(b, p)), ",f").replace("-", _MINUS)
                           for b, p in zip(bounds, places))
    return low_text, high_text
