"""bias_utils.core.nested: random intercepts per occupation and per completion (golden values, fit, interval)."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, optimize, special
from scipy import stats as st

from bias_utils.audit import bold, bold_prompts, occupation_headline, occupation_units, occupations, replication
from bias_utils.core import mixed, nested
from bias_utils.core.errors import ParameterError

A, B = bold_prompts.MALE_GROUP, bold_prompts.FEMALE_GROUP


def design_matrix(rng, n_clusters=24, beta=(0.3, 1.2), s_cluster=1.0, s_item=1.5, most_items=5):
    """Clusters in two groups, 1 to ``most_items`` items each with 0-4 words; intercepts per cluster and per item."""
    group = (np.arange(n_clusters) % 2).astype(float)
    items = rng.integers(1, most_items + 1, n_clusters)
    cluster = np.repeat(np.arange(n_clusters), items)
    u = rng.normal(0, s_cluster, n_clusters)[cluster]
    v = rng.normal(0, s_item, len(cluster))
    n = rng.integers(0, 5, len(cluster))
    k = rng.binomial(n, special.expit(beta[0] + beta[1] * group[cluster] + u + v)).astype(float)
    return k, n - k, cluster, pd.DataFrame({"intercept": 1.0, "group": group})


def _normal_pdf(x: float, sd: float) -> float:
    # plain floats: quad calls the integrand about a million times here, and st.norm.pdf's argument checks took 90%
    # of the test's time
    return math.exp(-0.5 * (x / sd) ** 2) / (sd * math.sqrt(2 * math.pi))


def _quad_loglik(k, m, cluster, X, beta, s_cluster, s_item) -> float:
    """The nested marginal log-likelihood by scipy.integrate.quad inside quad (no quadrature rule of nested's)."""
    eta = np.asarray(X, float) @ np.asarray(beta, float)
    total = 0.0
    for i in np.unique(cluster[(k + m) > 0]):
        mine = (cluster == i) & ((k + m) > 0)

        def items(u, mine=mine, i=i):
            value = 1.0
            for kj, mj in zip(k[mine].tolist(), m[mine].tolist()):
                def f(w, kj=kj, mj=mj, base=float(eta[i]) + u):
                    t = base + w
                    softplus = max(t, 0.0) + math.log1p(math.exp(-abs(t)))  # log(1 + e^t)
                    return math.exp(kj * t - (kj + mj) * softplus) * _normal_pdf(w, s_item)
                value *= integrate.quad(f, -12 * s_item, 12 * s_item, epsabs=0, epsrel=1e-10, limit=100)[0]
            return value * _normal_pdf(u, s_cluster)

        const = np.sum(special.gammaln(k[mine] + m[mine] + 1) - special.gammaln(k[mine] + 1)
                       - special.gammaln(m[mine] + 1))
        total += const + np.log(integrate.quad(items, -12 * s_cluster, 12 * s_cluster, epsabs=0, epsrel=1e-9,
                                               limit=100)[0])
    return total


def test_loglik_equals_nested_quadrature_by_scipy():
    """Both SDs positive: nested adaptive Gauss-Hermite against quad inside quad on a small design, to 1e-7 relative
    (SDs up to 2.5; items of up to 4 words)."""
    rng = np.random.default_rng(1)
    k, m, cluster, X = design_matrix(rng, n_clusters=4, most_items=3)
    for beta, s_cluster, s_item in (([-1.0, 2.0], 0.5, 2.5), ([0.3, 1.2], 2.0, 0.7)):
        ours = nested._nested_loglik(k, m, cluster, X, beta, s_cluster, s_item)
        assert ours == pytest.approx(_quad_loglik(k, m, cluster, X, beta, s_cluster, s_item), rel=1e-7, abs=0)


def test_loglik_at_a_zero_sd_is_the_one_level_model():
    """With no spread between items the model is mixed's on the clusters' totals (up to the binomial coefficients of
    items against totals); with none between clusters, mixed's with every item its own cluster."""
    rng = np.random.default_rng(2)
    k, m, cluster, X = design_matrix(rng)
    totals_k, totals_m = (np.bincount(cluster, x, len(X)) for x in (k, m))
    used, whole = (k + m) > 0, (totals_k + totals_m) > 0

    def coefficients(a, b):
        return np.sum(special.gammaln(a + b + 1) - special.gammaln(a + 1) - special.gammaln(b + 1))

    shift = coefficients(k[used], m[used]) - coefficients(totals_k[whole], totals_m[whole])
    for beta, sigma in (([0.3, 1.2], 0.8), ([-1.0, 2.0], 2.5)):
        ours = nested._nested_loglik(k, m, cluster, X, beta, sigma, 0.0)
        assert ours == pytest.approx(mixed._mixed_loglik(totals_k, totals_m, X, beta, sigma) + shift, rel=1e-9)
        ours = nested._nested_loglik(k, m, cluster, X, beta, 0.0, sigma)
        items = X.iloc[cluster].reset_index(drop=True)
        assert ours == pytest.approx(mixed._mixed_loglik(k, m, items, beta, sigma), rel=1e-9)


@pytest.mark.slow
def test_fit_maximises_the_penalised_likelihood_and_the_interval_reaches_the_cutoff():
    """The estimate against Nelder-Mead on the same penalised likelihood (log SDs as parameters); the LR statistic is
    the refit at group = 0; at each profile bound the LR statistic, maximised over the rest by Nelder-Mead, is the
    chi-square(1) quantile."""
    rng = np.random.default_rng(3)
    k, m, cluster, X = design_matrix(rng, n_clusters=14)
    fit = nested.fit_nested_logit(k, m, cluster, X)
    assert fit.converged and fit.message == "" and fit.n_items == int(((k + m) > 0).sum())

    def negative(theta, fixed=None):
        beta = [theta[0], theta[1] if fixed is None else fixed]
        rest = theta[-2:]
        return -(nested._nested_loglik(k, m, cluster, X, beta, np.exp(rest[0]), np.exp(rest[1])) + rest.sum())

    start = np.r_[fit.coef.to_numpy(), np.log(fit.sigma_cluster), np.log(fit.sigma_item)] + 0.05
    best = optimize.minimize(negative, start, method="Nelder-Mead", options={"xatol": 1e-7, "fatol": 1e-10,
                                                                              "maxiter": 2000})
    assert fit.objective == pytest.approx(-best.fun, abs=1e-6) and fit.objective >= -best.fun - 1e-6
    assert np.r_[fit.coef.to_numpy(), fit.sigma_cluster, fit.sigma_item] == pytest.approx(
        np.r_[best.x[:2], np.exp(best.x[2:])], abs=2e-3)
    row = nested.nested_row(fit, "group", group_a="one", group_b="zero")
    assert row["effect_size"] == pytest.approx(np.exp(fit.coef["group"]))
    assert row["ci_low"] < row["effect_size"] < row["ci_high"]
    assert (row["sigma"], row["sigma_item"], row["n_items"]) == (fit.sigma_cluster, fit.sigma_item, fit.n_items)

    def profile_lr(b):
        inner = optimize.minimize(lambda th: negative(np.r_[th[0], np.nan, th[1:]], fixed=b),
                                  np.r_[fit.coef["intercept"], np.log(fit.sigma_cluster), np.log(fit.sigma_item)],
                                  method="Nelder-Mead", options={"xatol": 1e-7, "fatol": 1e-10, "maxiter": 2000})
        return 2 * (fit.objective + inner.fun)

    assert row["statistic"] == pytest.approx(profile_lr(0.0), abs=1e-4)
    assert row["p"] == pytest.approx(st.chi2.sf(row["statistic"], 1))
    cutoff, reach = st.chi2.ppf(0.95, 1), 2 * nested._XTOL + 1e-4
    for bound in (row["ci_low"], row["ci_high"]):
        assert profile_lr(np.log(bound)) == pytest.approx(cutoff, abs=0.02)  # xtol 0.01 logits
        # both crossings lie inside the cap, each within 2 XTOL of the independent root: the profile, monotone on
        # either side of the estimate, crosses the cut-off between the two ends (two refits, where Brent's root
        # search took about ten)
        ends = [profile_lr(np.log(bound) + side * reach) - cutoff for side in (-1, 1)]
        assert abs(np.log(bound)) < mixed.PROFILE_LIMIT and ends[0] * ends[1] < 0, (bound, ends)


def test_bad_input_is_named():
    X = pd.DataFrame({"intercept": 1.0, "group": [0.0, 1, 0, 1]})
    with pytest.raises(ParameterError, match="clusters"):
        nested.fit_nested_logit([1, 0, 2], [0, 1, 1], [0, 1, 7], X)
    with pytest.raises(ParameterError, match="one value per item"):
        nested.fit_nested_logit([1, 0, 2], [0, 1], [0, 1, 2], X)
    with pytest.raises(ParameterError, match="successes"):
        nested.fit_nested_logit([1, -1, 2], [0, 1, 1], [0, 1, 2], X)
    with pytest.raises(ParameterError, match="need more than"):
        nested.fit_nested_logit([1, 0, 0, 0], [0, 0, 0, 0], [0, 1, 2, 3], X)


@pytest.fixture(scope="module")
def published_fit():
    """The nested model on the published completions' primary units (as the audit row fits it)."""
    metrics = bold.completion_metrics(occupation_units.annotate(replication.load_published_completions(), "audit"))
    m = metrics[metrics["in_primary"] & metrics["group"].isin([A, B])]
    units = pd.Index(pd.unique(m["unit"]))
    group = m.groupby("unit", sort=False)["group"].first().reindex(units)
    design = pd.DataFrame({"intercept": 1.0, "group": (group == A).astype(float).to_numpy()})
    return nested.fit_nested_logit(m["male_words"].to_numpy(float), m["female_words"].to_numpy(float),
                                    units.get_indexer(m["unit"]), design)


@pytest.mark.slow
@pytest.mark.parametrize("start", ["the estimate", "perturbed", "from the ridge"])
def test_a_flat_ridge_past_the_cap_is_infinite_whatever_the_start(published_fit, start):
    """On the published completions the upper profile is a flat ridge: its refits past the estimate stop where the
    optimiser does (a Brent root there moved between e^37 and e^40 with the machine). Decided at the cap, the bound
    is infinite from any warm start: the estimate's fit, a start 0.3 off in every parameter, or a path that refits
    the cap and the ridge straight from the estimate first. (The row's bound and note, from the estimate: the audit
    row's test below.)"""
    fit, j = published_fit, 1
    estimate, cutoff = float(fit.coef.iloc[j]), float(st.chi2.ppf(0.95, 1))
    profile = nested._NestedProfile(fit, j)
    if start == "perturbed":
        theta, lr, ok = profile.done[estimate]
        profile.done[estimate] = (theta + 0.3, lr, ok)
    elif start == "from the ridge":
        profile(mixed.PROFILE_LIMIT)
        profile(25.0)
    assert 0 < estimate < nested.mixed.HUGE < mixed.PROFILE_LIMIT
    assert nested._nested_bound(profile, estimate, +1, cutoff) == (np.inf, True)
    assert profile(mixed.PROFILE_LIMIT) < cutoff
    ridge = [b for b, (_, _, ok) in profile.done.items() if b > estimate + 1 and not ok]
    assert ridge, "no refit on the upper side failed to converge: the ridge this test is about is gone"


@pytest.mark.slow
def test_the_audit_row_on_the_published_completions():
    """On the published completions' primary units: the conditional odds ratio with completions nested in
    occupations is further from 1 than the one-level model's (a variance component added), with a positive SD
    between completions; the headline reads the row, and its sentence and table name it as conditional."""
    metrics = bold.completion_metrics(occupation_units.annotate(replication.load_published_completions(), "audit"))
    primary = metrics[metrics["in_primary"]]
    (row,) = occupations.nested_rows(primary, A, B)
    units = occupations.occupation_table(primary, by="unit")
    (one, _) = occupations.mixed_rows(units, A, B)
    assert row["role"] == "sensitivity" and row["unit"] == occupations._UNIT_NESTED
    assert row["n_informative"] == one["n_clusters"] == int(units["informative"].sum())
    assert row["n_completions_informative"] == int(primary["any_gendered"].sum())
    assert row["effect_size"] > one["effect_size"] > 1 and row["sigma_completion"] > 1
    assert row["ci_low"] > 1 and row["p"] < 0.05
    # the upper profile bound lies past 40 logits, on a flat ridge where refits stop where the optimiser does
    assert row["ci_high"] == np.inf and "the upper bound lies beyond 40 logits" in row["note"]
    table, _ = bold.audit_statistics(metrics, n_boot=50, n_permutations=99, nested=False)
    table = pd.concat([table, pd.DataFrame([row])], ignore_index=True)
    influence = occupations.influence_table(units, A, B)
    h = occupation_headline.headline(occupation_headline.headline_table(table, units, influence, n_boot=50))
    assert (h["nested_odds_ratio"], h["nested_ci_low"], h["nested_ci_high"], h["nested_p"]) == (
        row["effect_size"], row["ci_low"], row["ci_high"], row["p"])
    assert (h["nested_sigma_occupation"], h["nested_sigma_completion"]) == (row["sigma"], row["sigma_completion"])
    text = occupation_headline.headline_sentence(h)
    assert ("with a random intercept per completion within its occupation as well, "
            + occupation_headline._estimate_text(h, "nested")) in text
    shown = occupation_headline.headline_rows(h).set_index("analysis")
    nested_row = shown.loc["sensitivity (conditional): random intercepts per occupation and per completion, words"]
    assert nested_row["estimate"].startswith("odds ratio ") and nested_row["p"].startswith("likelihood-ratio p")
    assert nested_row["occupations"].endswith(f"; {row['n_completions_informative']} completions with any gendered "
                                              "word")


@pytest.mark.slow
def test_a_group_whose_words_are_all_of_one_kind_is_refused_with_its_reason():
    """The QUICK build's shape: the one informative occupation of group B has only female words, so the group's
    coefficient runs off (quasi-separation). nested_row refuses with the reason in words (the audit records it as a
    skipped test), instead of a root finder's NaN message."""
    k = np.array([0, 0, 0, 0, 0, 0, 1, 1, 0, 2], float)       # male words per completion
    m = np.array([3, 3, 3, 4, 3, 2, 0, 1, 1, 0], float)       # female words
    cluster = np.array([0, 0, 0, 1, 1, 2, 2, 3, 3, 4])
    X = pd.DataFrame({"intercept": 1.0, "group": [0.0, 1.0, 1.0, 1.0, 1.0]})
    fit = nested.fit_nested_logit(k, m, cluster, X)
    assert (fit.coef.abs() > mixed.HUGE).any() and "separation" in fit.message
    assert "sigma_" not in fit.message
    with pytest.raises(ValueError, match="no finite estimate on these data"):
        nested.nested_row(fit, "group")
