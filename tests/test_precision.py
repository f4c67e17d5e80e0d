"""bias_utils.core.precision: Monte Carlo error of percentile bootstrap bounds, and the digits it allows."""

import math

import numpy as np
import pytest

from bias_utils.audit import bold_prompts, replication
from bias_utils.core import precision
from bias_utils.core.errors import ParameterError


@pytest.fixture(scope="module")
def audit_words():
    """The published audit's male and female words per occupation, by group: {group: [occupations, 2]}."""
    c = replication.load_published_completions()
    occ = c.groupby(["group", "occupation"], sort=False)[["published_male_words", "published_female_words"]].sum()
    occ = occ.reset_index()
    return {g: occ.loc[occ["group"] == g, ["published_male_words", "published_female_words"]].to_numpy(float)
            for g in (bold_prompts.MALE_GROUP, bold_prompts.FEMALE_GROUP)}


def _bootstrap_odds_ratios(words, n_boot, rng):
    """The audit's pooled odds ratio (male over female words, male- over female-dominated, +0.5 per cell) of
    ``n_boot`` occupation cluster-bootstrap replicates, occupations resampled within each group."""
    totals = [w[rng.integers(0, len(w), (n_boot, len(w)))].sum(axis=1) for w in words.values()]
    (a, b), (c, d) = (t.T + 0.5 for t in totals)
    return a * d / (b * c)


@pytest.mark.slow
def test_order_statistic_se_matches_the_spread_over_seeds(audit_words):
    """One run's order-statistic SE against the SD of the bound over 200 runs with other seeds (1,000 replicates
    each, the book's old setting): within 20% for both bounds, although Midwife's copies make the bootstrap
    distribution lumpy."""
    n_runs, n_boot = 200, 1000
    rng = np.random.default_rng(2024)
    runs = [precision.percentile_bounds(_bootstrap_odds_ratios(audit_words, n_boot, rng)) for _ in range(n_runs)]
    for bound, se in (("low", "low_se"), ("high", "high_se")):
        spread = np.std([getattr(r, bound) for r in runs], ddof=1)
        estimated = np.mean([getattr(r, se) for r in runs])
        print(f"\n{bound} bound: SD over {n_runs} seeds {spread:.3f}, order-statistic SE (mean of runs) "
              f"{estimated:.3f}")
        assert estimated == pytest.approx(spread, rel=0.20)
    assert {r.n_replicates for r in runs} == {n_boot}


def test_bounds_are_the_order_statistics_of_the_rule():
    """The bound is numpy's inverted-CDF percentile (the ceil(qB)-th order statistic); the SE the range of the order
    statistics at qB -+ 1.96 sqrt(B q (1-q)), over 3.92; NaN replicates left out."""
    rng = np.random.default_rng(0)
    values = rng.gamma(2.0, size=1000)
    out = precision.percentile_bounds(np.r_[values, np.nan, np.nan], level=0.95)
    assert out.n_replicates == 1000
    assert (out.low, out.high) == tuple(np.percentile(values, [2.5, 97.5], method="inverted_cdf"))
    x = np.sort(values)
    for q, se in ((0.025, out.low_se), (0.975, out.high_se)):
        half = 1.96 * math.sqrt(1000 * q * (1 - q))
        lo, hi = math.floor(1000 * q - half), math.ceil(1000 * q + half)  # 1-based ranks
        assert se == pytest.approx((x[hi - 1] - x[lo - 1]) / 3.92, rel=1e-4)
    # 10,000 replicates: qB = 250 exactly, however 0.025 * 10000 rounds in floating point
    many = np.arange(1, 10_001, dtype=float)
    assert precision.percentile_bounds(many[::-1]).low == 250.0


def _by_rule(value: float, se: float) -> str:
    """The docstring's rule written out independently: the last kept digit sits at the decade of 3.92 se, the value
    rounded half away from zero there, written in fixed point."""
    place = math.floor(math.log10(3.92 * se))
    units = math.floor(abs(value) / 10 ** place + 0.5)
    text = f"{units * 10 ** place:.{max(0, -place)}f}"
    return text if units == 0 or value >= 0 else "-" + text


@pytest.mark.parametrize("value, se", [
    (58.3, 0.9), (58.3, 4.0), (58.3, 0.02), (61.58, 2.9), (3.2, 0.4), (0.0417, 0.0061), (-0.0834, 0.0301),
    (2.5, 0.2), (1234.5, 30.0), (7.0, 40.0), (-0.3, 1.0),
])
def test_mc_round_keeps_the_digits_its_error_allows(value, se):
    assert precision._mc_round(value, se) == _by_rule(value, se)


def test_mc_round_edges():
    assert precision._mc_round(58.3, 0.9) == "58" and precision._mc_round(58.3, 4.0) == "60"
    assert precision._mc_round(0.123456789, 0.0) == f"{0.123456789:.6g}"
    assert precision._mc_round(float("inf"), 1.0) == "inf"
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ParameterError, match="se"):
            precision._mc_round(1.0, bad)
    with pytest.raises(ParameterError, match="replicates"):
        precision.percentile_bounds(np.ones((3, 3)))
    with pytest.raises(ParameterError, match="level"):
        precision.percentile_bounds(np.arange(10.0), level=95)


def test_one_rule_per_quantity():
    """Each quantity by its own rule, the same wherever it is printed (golden strings by hand)."""
    assert [precision.number_text(x) for x in (0.8549, 0.8551, -0.12, 15.4, 199.64, 1793.2, 0.004, 0, -0.0001)] == \
        ["0.85", "0.86", "−0.12", "15.40", "199.6", "1,793", "0.0040", "0", "−0.00010"]
    assert precision.number_text(12) == "12" and precision.number_text(float("nan")) == "–"
    assert precision.number_text(6.789e200) == "6.8 × 10²⁰⁰" and precision.number_text(-2.5e-7) == "−0.00000025"
    assert precision.interval_text(0.3, 6.789e200, 2.1) == "0.30 to 6.8 × 10²⁰⁰"
    assert precision.number_text(0.5, signed=True) == "+0.50" and precision.number_text(-0.5, signed=True) == "−0.50"
    assert [precision.p_text(p) for p in (0.0087, 0.00087, 0.21, 1.0, 0.05, 0.001)] == \
        ["0.0087", "< 0.001", "0.21", "1", "0.05", "0.001"]
    assert precision.p_text(0.0087, relation=True) == "= 0.0087"
    assert precision.p_text(1e-9, relation=True) == "< 0.001"
    assert [precision.count_text(n) for n in (1525, 1525.0, 12, 1234567)] == ["1,525", "1,525", "12", "1,234,567"]
    assert precision.percent_text(0.714) == "71%"
    # an interval at its estimate's decimals, never more than a bound's own size gives
    assert precision.interval_text(0.949, 1.41, 1.15) == "0.95 to 1.41"
    assert precision.interval_text(3.24, 1793.0, 199.6) == "3.2 to 1,793"
    assert precision.interval_text(-0.84, -0.28, -0.56) == "−0.84 to −0.28"
    assert precision.interval_text(0.31, 0.69, 0.5, "–") == "0.31–0.69"
    # a relative difference: exact, float64 rounding, two significant digits times a power of ten, or a number
    assert [precision.relative_difference_text(x) for x in (0, 1.4e-16, -2.2e-13, 1.6e-5, 0.00096, 0.25, np.nan)] \
        == ["0", "< 10⁻¹²", "< 10⁻¹²", "1.6 × 10⁻⁵", "9.6 × 10⁻⁴", "0.25", "–"]
