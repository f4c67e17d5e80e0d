"""bias_utils.core.stats against scipy and hand calculations."""

import math
from itertools import combinations

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from scipy import stats as st

from bias_utils.core import stats

AUDIT_TABLE = [[64, 22], [7, 64]]  # published contingency table (audit summary JSON)
RNG = np.random.default_rng(7)
A = RNG.normal(0.0, 1.0, 40)
B = RNG.normal(0.6, 2.0, 25)


def test_chi2_matches_scipy_with_and_without_yates():
    for corr in (True, False):
        ref = st.chi2_contingency(np.array(AUDIT_TABLE), correction=corr)
        row = stats.chi2_table(AUDIT_TABLE, correction=corr)
        assert row["statistic"] == pytest.approx(ref.statistic)
        assert row["p"] == pytest.approx(ref.pvalue)
        assert row["test"] == ("chi2_yates" if corr else "chi2_pearson")
    # phi by hand: (ad - bc) / sqrt(row and column margins)
    a, b, c, d = 64, 22, 7, 64
    phi = (a * d - b * c) / np.sqrt((a + b) * (c + d) * (a + c) * (b + d))
    row = stats.chi2_table(AUDIT_TABLE)
    assert row["effect_size"] == pytest.approx(phi)
    assert row["ci_low"] < phi < row["ci_high"]


def test_chi2_rxk_and_bad_tables():
    t = [[10, 5], [3, 12], [8, 8]]
    row = stats.chi2_table(t)
    assert row["statistic"] == pytest.approx(st.chi2_contingency(np.array(t)).statistic)
    assert row["df"] == 2
    with pytest.raises(ValueError, match="empty row or column"):
        stats.chi2_table([[0, 0], [3, 4]])
    with pytest.raises(ValueError, match="negative"):
        stats.chi2_table([[-1, 2], [3, 4]])


def test_odds_ratio_haldane_wald_by_hand():
    a, b, c, d = (x + 0.5 for x in (64, 22, 7, 64))
    log_or = np.log(a * d / (b * c))
    se = np.sqrt(1 / a + 1 / b + 1 / c + 1 / d)
    row = stats.odds_ratio(AUDIT_TABLE)
    assert row["effect_size"] == pytest.approx(np.exp(log_or))
    assert row["ci_low"] == pytest.approx(np.exp(log_or - st.norm.ppf(0.975) * se))
    assert row["ci_high"] == pytest.approx(np.exp(log_or + st.norm.ppf(0.975) * se))
    assert row["p"] == pytest.approx(2 * st.norm.sf(log_or / se))
    # zero cells are fine with Haldane, not without
    assert np.isfinite(stats.odds_ratio([[0, 5], [5, 0]])["effect_size"])
    with pytest.raises(ValueError, match="zero cell"):
        stats.odds_ratio([[0, 5], [5, 0]], add=0)


def test_t_tests_match_scipy():
    for fn, eq in ((stats.welch_t, False), (stats.student_t, True)):
        ref = st.ttest_ind(A, B, equal_var=eq)
        row = fn(A, B)
        assert row["statistic"] == pytest.approx(ref.statistic)
        assert row["p"] == pytest.approx(ref.pvalue)
        assert row["effect_size"] == pytest.approx(A.mean() - B.mean())
        assert row["ci_low"] < row["effect_size"] < row["ci_high"]
    va, vb = A.var(ddof=1) / A.size, B.var(ddof=1) / B.size
    welch_df = (va + vb) ** 2 / (va**2 / (A.size - 1) + vb**2 / (B.size - 1))
    assert stats.welch_t(A, B)["df"] == pytest.approx(welch_df)


def test_cohens_d_forms_and_hedges_g():
    diff = A.mean() - B.mean()
    va, vb = A.var(ddof=1), B.var(ddof=1)
    pooled = np.sqrt(((A.size - 1) * va + (B.size - 1) * vb) / (A.size + B.size - 2))
    assert stats.cohens_d(A, B)["effect_size"] == pytest.approx(diff / pooled)
    assert stats.cohens_d(A, B, kind="average")["effect_size"] == pytest.approx(diff / np.sqrt((va + vb) / 2))
    j = 1 - 3 / (4 * (A.size + B.size) - 9)
    assert stats.hedges_g(A, B)["effect_size"] == pytest.approx(j * diff / pooled)
    with pytest.raises(ValueError, match="kind"):
        stats.cohens_d(A, B, kind="glass")
    with pytest.raises(ValueError, match="zero variance"):
        stats.cohens_d([1, 1, 1], [1, 1])


def test_the_rowwise_g_is_the_scalar_g_to_the_bit():
    """One computation of Hedges' g (``_hedges``): resampled rows give each row's scalar g exactly."""
    rng = np.random.default_rng(5)
    a, b = rng.normal(0.4, 1, (30, 23)), rng.normal(0, 1.5, (30, 31))
    rows = stats.rowwise_g(a, b)
    assert all(rows[i] == stats.hedges_g(a[i], b[i])["effect_size"] for i in range(len(a)))


def test_bad_groups_name_the_problem():
    with pytest.raises(ValueError, match="group 'b'.*1 values"):
        stats.welch_t(A, [1.0])
    with pytest.raises(ValueError, match="missing values"):
        stats.welch_t(A, [1.0, np.nan, 2.0])


def test_proportion_test_equals_uncorrected_chi2():
    row = stats._proportion_test(31, 1172, 35, 353)
    ref = st.chi2_contingency(np.array([[31, 1172 - 31], [35, 353 - 35]]), correction=False)
    assert row["statistic"] ** 2 == pytest.approx(ref.statistic)
    assert row["p"] == pytest.approx(ref.pvalue)
    assert row["effect_size"] == pytest.approx(31 / 1172 - 35 / 353)
    assert row["ci_low"] < row["effect_size"] < row["ci_high"]
    with pytest.raises(ValueError, match="x=5, n=3"):
        stats._proportion_test(5, 3, 1, 2)


def test_adjust_pvalues_by_hand():
    p = [0.01, 0.04, 0.03, np.nan, 0.5]
    # Holm, m=4: sorted 0.01*4=0.04, 0.03*3=0.09, 0.04*2=0.08 -> monotone 0.09, 0.5*1 -> 0.5
    np.testing.assert_allclose(stats.adjust_pvalues(p, "holm"), [0.04, 0.09, 0.09, np.nan, 0.5])
    np.testing.assert_allclose(stats.adjust_pvalues(p, "bonferroni"), [0.04, 0.16, 0.12, np.nan, 1.0])
    with pytest.raises(ValueError, match="method"):
        stats.adjust_pvalues(p, "fdr")


def test_results_table_columns_and_family_correction():
    rows = [stats.welch_t(A, B), stats.cohens_d(A, B), stats.chi2_table(AUDIT_TABLE)]
    t = stats.results_table(rows, method="bonferroni")
    assert list(t.columns[: len(stats.STAT_COLUMNS)]) == stats.STAT_COLUMNS
    assert t.loc[0, "p_adj"] == pytest.approx(min(1.0, 2 * t.loc[0, "p"]))  # 2 rows carry a p value
    assert np.isnan(t.loc[1, "p_adj"]) and t.loc[1, "adj_method"] == ""


def test_mann_whitney_and_hurdle():
    row = stats.mann_whitney(A, B)
    ref = st.mannwhitneyu(A, B, alternative="two-sided")
    assert row["p"] == pytest.approx(ref.pvalue)
    assert row["effect_size"] == pytest.approx(2 * ref.statistic / (A.size * B.size) - 1)
    a = np.r_[np.zeros(30), [1, 2, 3, 1, 2]]
    b = np.r_[np.zeros(10), [4, 5, 3, 6]]
    presence, welch, mwu = stats.hurdle_tests(a, b)
    assert presence["effect_size"] == pytest.approx(5 / 35 - 4 / 14)
    assert welch["n"] == 9 and welch["effect_size"] == pytest.approx(1.8 - 4.5)


def test_welch_anova_matches_hand_formula():
    groups = [A, B, RNG.normal(1.0, 0.5, 15)]
    n = np.array([g.size for g in groups])
    m = np.array([g.mean() for g in groups])
    w = n / np.array([g.var(ddof=1) for g in groups])
    k = len(groups)
    mw = (w * m).sum() / w.sum()
    lam = ((1 - w / w.sum()) ** 2 / (n - 1)).sum()
    f = ((w * (m - mw) ** 2).sum() / (k - 1)) / (1 + 2 * (k - 2) / (k**2 - 1) * lam)
    row = stats.welch_anova(np.concatenate(groups), np.repeat(["a", "b", "c"], n), n_boot=50)
    assert row["statistic"] == pytest.approx(f)
    assert row["ci_low"] <= row["effect_size"] <= row["ci_high"]


def test_cluster_bootstrap_keeps_clusters_whole():
    # Each cluster is constant, so every replicate's mean is a mean of cluster values;
    # the percentile interval must lie inside the range of cluster values.
    df = pd.DataFrame({"c": np.repeat(list("abcde"), [1, 2, 3, 4, 50]), "y": np.repeat([0, 1, 2, 3, 10], [1, 2, 3, 4,
                                                                                                          50])})
    est, lo, hi = stats.cluster_bootstrap_ci(df, lambda d: d["y"].mean(), cluster="c", n_boot=300)
    assert est == pytest.approx(df["y"].mean())
    assert 0 <= lo < est < hi <= 10
    # resampling rows instead of clusters gives a much narrower interval
    _, ilo, ihi = stats.bootstrap_ci(df["y"].to_numpy(), n_boot=300)
    assert (ihi - ilo) < (hi - lo)
    with pytest.raises(KeyError, match="'occupation'"):
        stats.cluster_bootstrap_ci(df, len, cluster="occupation")


# ---------------------------------------------------------------- vectorised tests (the specification curve's)

def test_holm_matches_adjust_pvalues():
    rng = np.random.default_rng(1)
    p = rng.uniform(0, 0.2, size=(5, 7))
    p[0, :2] = p[0, 2]  # ties
    got = stats.holm(p, axis=-1)
    for row, want in zip(got, p):
        np.testing.assert_allclose(row, stats.adjust_pvalues(want, "holm"))
    np.testing.assert_allclose(stats.holm(p.T, axis=0), got.T)


def test_group_tests_match_scipy_and_hedges_g():
    rng = np.random.default_rng(0)
    V = rng.normal(size=(3, 11, 4)) * 3 + 5
    y = np.zeros(11, bool)
    y[[0, 2, 3, 7, 9]] = True
    res = stats.group_tests(V, y[None])
    for c in range(3):
        for d in range(4):
            a, b = V[c, y, d], V[c, ~y, d]
            sd = V[c, :, d].std()
            s, w = st.ttest_ind(a, b), st.ttest_ind(a, b, equal_var=False)
            g = stats.hedges_g(a, b)
            np.testing.assert_allclose(res["p_student"][0, c, d], s.pvalue, rtol=1e-9)
            np.testing.assert_allclose(res["t_student"][0, c, d], s.statistic, rtol=1e-9)
            np.testing.assert_allclose(res["p_welch"][0, c, d], w.pvalue, rtol=1e-9)
            np.testing.assert_allclose(res["df_welch"][0, c, d], w.df, rtol=1e-9)
            np.testing.assert_allclose([res[k][0, c, d] for k in ("g", "g_low", "g_high")],
                                       [g["effect_size"], g["ci_low"], g["ci_high"]], rtol=1e-9)
            np.testing.assert_allclose(res["diff"][0, c, d], (a.mean() - b.mean()) / sd, rtol=1e-9)


def test_exact_permutation_test_matches_enumeration_and_scipy():
    rng = np.random.default_rng(2)
    V = rng.normal(size=(2, 8, 2)) + np.array([0, 0, 0, 0, 1, 1, 1, 1])[None, :, None] * 0.8
    y = np.array([False] * 4 + [True] * 4)
    ref = stats.permutation_reference(8, 4, 1000)
    assert ref[1] and len(ref[0]) == math.comb(8, 4)
    got = stats.group_tests(V, y[None], reference=ref)["p_permutation"][0]
    for c in range(2):
        for d in range(2):
            x = V[c, :, d]
            obs = abs(x[y].mean() - x[~y].mean())
            count = sum(abs(x[list(i)].mean() - np.delete(x, list(i)).mean()) >= obs - 1e-12
                        for i in combinations(range(8), 4))
            assert got[c, d] == pytest.approx(count / 70)
            sp = st.permutation_test((x[y], x[~y]), lambda a, b: a.mean() - b.mean(), permutation_type="independent",
                                      n_resamples=10_000, alternative="two-sided")
            assert got[c, d] == pytest.approx(sp.pvalue)  # equal groups: the exact null is symmetric


def test_random_permutation_reference_keeps_group_sizes():
    R, exact = stats.permutation_reference(30, 12, 500, seed=4)
    assert not exact and R.shape == (500, 30) and (R.sum(axis=1) == 12).all()


def test_ols_matches_linregress_and_pingouin():
    rng = np.random.default_rng(3)
    x = rng.normal(size=40)
    t = rng.integers(1, 4, size=40)
    y = 0.5 * x + 0.3 * t + rng.normal(size=40)
    fit = stats.ols(y, np.column_stack([np.ones(40), x]), ["intercept", "x"]).set_index("term")
    lr = st.linregress(x, y)
    assert fit.loc["x", "coef"] == pytest.approx(lr.slope) and fit.loc["x", "se"] == pytest.approx(lr.stderr)
    assert fit.loc["x", "p"] == pytest.approx(lr.pvalue)
    two = stats.ols(y, np.column_stack([np.ones(40), x, t]), ["intercept", "x", "t"]).set_index("term")
    pgr = pg.linear_regression(np.column_stack([x, t]), y).set_index("names")
    np.testing.assert_allclose(two.loc[["x", "t"], "se"], pgr.loc[["x1", "x2"], "se"], rtol=1e-8)
    np.testing.assert_allclose(two.loc[["x", "t"], "ci_low"], pgr.loc[["x1", "x2"], "CI2.5"], rtol=1e-8)
    with pytest.raises(ValueError, match="rank deficient"):
        stats.ols(y, np.column_stack([np.ones(40), np.ones(40)]), ["a", "b"])


def test_permutation_p_text_at_its_floor():
    assert stats.permutation_p_text(1 / 201, 200) == "≤ 1/201"
    assert stats.permutation_p_text(0.21, 200) == "= 0.21"
    assert stats.permutation_p_text(1 / 10000, 9999) == "≤ 1/10,000"
    assert stats.permutation_p_text(0.0123, 9999) == "= 0.012"
    assert stats.permutation_p_text(0.0005, 9999) == "< 0.001"


def test_permutation_p_counts_ties_and_never_goes_below_its_floor():
    null = np.array([0.1, 0.5, 0.5, 0.9])
    # Counted by hand: 0.5 is reached by 0.5, 0.5, 0.9 -> (1 + 3) / 5; nothing reaches 2 -> the floor 1/5.
    assert stats.permutation_p(0.5, null) == pytest.approx(4 / 5)
    assert stats.permutation_p(2.0, null) == pytest.approx(1 / 5)
    assert stats.permutation_p(-0.5, np.array([0.4, -0.6, 0.2]), "two-sided") == pytest.approx(2 / 4)
    # a rounding tie reaches the observed value
    assert stats.permutation_p(0.3, np.array([0.1 + 0.2])) == pytest.approx(1.0)
    # vectorised over leading axes, each row against its own null
    got = stats.permutation_p(np.array([0.5, 2.0]), np.stack([null, null]))
    np.testing.assert_allclose(got, [4 / 5, 1 / 5])
    with pytest.raises(ValueError, match="alternative"):
        stats.permutation_p(0.5, null, "less")


def test_permutation_p_is_valid_under_the_null():
    """Simulation: with the observed statistic exchangeable with its null, P(p <= alpha) <= alpha."""
    rng = np.random.default_rng(11)
    draws = rng.normal(size=(4000, 20))
    p = stats.permutation_p(draws[:, 0], draws[:, 1:])
    for alpha in (0.05, 0.1, 0.5):
        assert (p <= alpha).mean() <= alpha + 0.02
    assert p.min() == pytest.approx(1 / 20)


def test_group_tests_runs_a_dict_of_tests_and_column_test_gives_the_scalar_numbers():
    rng = np.random.default_rng(5)
    V = rng.normal(size=(2, 13, 3))
    y = np.arange(13) < 6
    res = stats.group_tests(V, y[None], {"welch": stats.column_test(stats.welch_t, "welch"),
                                         "g": stats._hedges_test}, names=("f", "m"))
    assert set(res) == {f"welch_{f}" for f in ("statistic", "df", "p", "effect_size", "ci_low", "ci_high")} | {
        "g", "g_low", "g_high"}
    for c in range(2):
        for d in range(3):
            row = stats.welch_t(V[c, y, d], V[c, ~y, d])
            assert res["welch_p"][0, c, d] == row["p"] and res["welch_statistic"][0, c, d] == row["statistic"]
            assert res["g"][0, c, d] == pytest.approx(stats.hedges_g(V[c, y, d], V[c, ~y, d])["effect_size"])
    with pytest.raises(ValueError, match="'f'"):  # the scalar test names the groups it was given
        stats.group_tests(np.zeros((1, 4, 1)), np.array([True, True, False, False]),
                          {"welch": stats.column_test(stats.welch_t, "welch")}, names=("f", "m"))


def test_partial_correlation_rows_equal_pingouin_and_keep_the_plain_resamples():
    rng = np.random.default_rng(23)
    n = 50
    z = rng.normal(size=(n, 2))
    x = z @ [1.0, 0.5] + rng.normal(size=n)
    y = z @ [0.3, 1.0] + 0.4 * x + rng.normal(size=n)
    frame = pd.DataFrame({"x": x, "y": y, "z1": z[:, 0], "z2": z[:, 1]})
    rows = {r["test"]: r for r in stats.partial_correlation_rows(x, y, z, n_boot=300, seed=4)}
    for method in ("pearson", "spearman"):
        ref = pg.partial_corr(frame, "x", "y", ["z1", "z2"], method=method)
        row = rows[f"partial_{method}"]
        assert row["effect_size"] == pytest.approx(ref["r"].iloc[0], rel=1e-10)
        assert row["p"] == pytest.approx(ref["p_val"].iloc[0], rel=1e-8)
        assert row["df"] == n - 4 and row["n"] == n
        assert row["ci_low"] < row["effect_size"] < row["ci_high"]
    # no controls: the plain correlations, with the resamples correlation_rows draws (the same interval)
    plain = {r["test"]: r for r in stats.correlation_rows(x, y, n_boot=300, seed=4)}
    alone = {r["test"]: r for r in stats.partial_correlation_rows(x, y, np.empty((n, 0)), n_boot=300, seed=4)}
    for method in ("pearson", "spearman"):
        assert alone[f"partial_{method}"]["effect_size"] == pytest.approx(plain[method]["effect_size"], rel=1e-12)
        assert alone[f"partial_{method}"]["p"] == pytest.approx(plain[method]["p"], rel=1e-6)
        assert (alone[f"partial_{method}"]["ci_low"], alone[f"partial_{method}"]["ci_high"]) == pytest.approx(
            (plain[method]["ci_low"], plain[method]["ci_high"]), rel=1e-10)
    # a side the controls explain wholly has no partial correlation
    spent = stats.partial_correlation_rows(z[:, 0] * 2 + 1, y, z, n_boot=50, seed=0)
    assert all(np.isnan(r["effect_size"]) for r in spent)
