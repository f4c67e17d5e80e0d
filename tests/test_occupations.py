"""bias_utils.audit.occupations: the occupation as the unit (intervals, permutation p, influence)."""

import itertools

import numpy as np
import pandas as pd
import pytest

from bias_utils.audit import bold, bold_prompts, occupation_units, occupations, replication
from bias_utils.core import mixed, precision, stats
from bias_utils.report import rendering

A, B = bold_prompts.MALE_GROUP, bold_prompts.FEMALE_GROUP
OR = "odds_ratio (words)"


@pytest.fixture(scope="module")
def published():
    """The audit's 1,525 published completions: metrics (with their units), the BOLD keys' occupation table,
    statistics, the primary units' table, their influence and the headline."""
    completions = replication.load_published_completions()
    metrics = bold.completion_metrics(occupation_units.annotate(completions, "audit"))
    table, _ = bold.audit_statistics(metrics, n_boot=200)
    occ = occupations.occupation_table(metrics)
    units = occupations.occupation_table(metrics[metrics["in_primary"]], by="unit")
    influence = occupations.influence_table(units, A, B)
    return metrics, occ, table, influence, occupations.headline_table(table, units, influence, n_boot=200), units


def _word_or(metrics: pd.DataFrame) -> dict:
    """The audit's odds ratio recomputed from completions (stats.odds_ratio on the pooled 2x2 table)."""
    words = [[metrics.loc[metrics["group"] == g, w].sum() for w in ("male_words", "female_words")] for g in (A, B)]
    return stats.odds_ratio(words)


def test_occupation_table_adds_up_to_the_published_counts(published):
    metrics, occ, *_ = published
    assert len(occ) == 224 and occ.groupby("group").size().to_dict() == {A: 172, B: 52}
    totals = occ.groupby("group")[["male_words", "female_words", "n_gendered_completions", "n_completions"]].sum()
    # the audit's published 2x2 table and its 66 gendered completions (paper 5.1: 31 and 35)
    assert totals.loc[A].tolist() == [64, 22, 31, 1172] and totals.loc[B].tolist() == [7, 64, 35, 353]
    midwife = occ.set_index("occupation").loc["Midwife"]
    assert (midwife["male_words"], midwife["female_words"]) == (3, 52)
    assert midwife["share_of_group_female_words"] == pytest.approx(52 / 64)
    gendered = metrics[metrics["any_gendered"]]
    assert occ["sum_male_share"].sum() == pytest.approx(gendered["male_share"].sum())


def test_cluster_interval_draws_the_replicates_of_stats_cluster_bootstrap_ci(published):
    """Same seed, same replicates: the vectorised interval equals the completion-level one."""
    metrics, occ, *_ = published

    def log_or(d):
        return np.log(_word_or(d)["effect_size"])

    def share(d):
        s = d.groupby("group")["any_gendered"].mean()
        return s.get(A, np.nan) - s.get(B, np.nan)

    def male_share(d):
        s = d[d["any_gendered"]].groupby("group")["male_share"].mean()
        return s.get(A, np.nan) - s.get(B, np.nan)

    for measure, fn, back in ((OR, log_or, np.exp), ("completions with any gendered word", share, float),
                              ("male_share among gendered completions", male_share, float)):
        expected = [back(x) for x in stats.cluster_bootstrap_ci(metrics, fn, cluster="occupation", strata="group",
                                                                n_boot=60, seed=7)]
        got = occupations._cluster_interval(occ, measure, A, B, n_boot=60, seed=7)
        assert got == pytest.approx(expected, rel=1e-9), measure


def test_influence_is_the_odds_ratio_recomputed_without_each_occupation(published):
    metrics, occ, *_ = published
    influence = occupations.influence_table(occ, A, B, estimate="pooled")
    assert influence["odds_ratio"].iloc[0] == pytest.approx(_word_or(metrics)["effect_size"])
    picked = pd.concat([influence.head(4), influence.sample(6, random_state=0)])
    for r in picked.itertuples():
        assert r.odds_ratio_without == pytest.approx(_word_or(metrics[metrics["occupation"] != r.occupation])[
            "effect_size"])
        assert r.pooled_odds_ratio_without == pytest.approx(r.odds_ratio_without)
    top = influence.iloc[0]
    assert (top["occupation"], top["group"]) == ("Midwife", B)
    assert round(top["odds_ratio_without"], 2) == 7.96  # the audit's 24.65 rests on Midwife's 52 female words
    assert influence["log_or_change"].abs().is_monotonic_decreasing
    assert set(influence.loc[influence["influential"], "occupation"]) == {"Midwife", "Tailor", "Dispatcher"}
    sentence = occupations._describe_influence(influence)
    assert sentence.startswith("3 occupations of 224 move the odds ratio (24.65) by more than a third when left out")
    assert "without Midwife (female-dominated, 3 male and 52 female words) it is 7.96 (−68%)".replace("−", "-") \
        in sentence


def test_mixed_influence_refits_the_primary_model_without_each_occupation(published):
    *_, influence, _, units = published
    assert (influence["estimate"] == "mixed").all()

    def refit(frame):
        design = pd.DataFrame({"intercept": 1.0, "group": (frame["group"] == A).astype(float).to_numpy()})
        return float(np.exp(mixed.fit_mixed_logit(frame["male_words"], frame["female_words"], design).coef["group"]))

    assert influence["odds_ratio"].iloc[0] == pytest.approx(refit(units), rel=1e-6)
    for r in influence.head(3).itertuples():
        assert r.odds_ratio_without == pytest.approx(refit(units[units["occupation"] != r.occupation]), rel=1e-6)
    silent = influence[(influence["male_words"] + influence["female_words"]) == 0]
    assert (silent["odds_ratio_without"] == silent["odds_ratio"]).all()  # no words: nothing to leave out
    # one talkative occupation cannot carry the primary estimate the way it carries the pooled words
    midwife = influence.set_index("occupation").loc["midwife"]
    assert abs(midwife["log_or_change"]) < abs(midwife["pooled_log_or_change"])
    # a primary fit drifting to infinity (the QUICK build's separation): the chart draws the pooled words instead
    drifted = influence.assign(odds_ratio=np.exp(600.0), odds_ratio_without=np.inf)
    spec = occupations.influence_chart(drifted).to_dict()
    point = next(layer for layer in spec["layer"] if layer["mark"]["type"] == "point")
    drawn = pd.DataFrame(spec["datasets"][point["data"]["name"]])
    assert len(drawn) == 15 and "pooled words' odds ratio instead" in str(spec)
    want = influence.iloc[np.argsort(-influence["pooled_log_or_change"].abs().to_numpy(), kind="stable")].head(15)
    assert drawn["odds_ratio_without"].tolist() == pytest.approx(want["pooled_odds_ratio_without"].tolist())


def test_headline_reads_the_primary_row_and_the_published_selection(published):
    metrics, _, table, influence, head, units = published
    h = occupations.headline(head)
    primary = table[table["role"] == "primary"]
    assert len(primary) == 1 and table.index[table["role"] == "primary"][0] == 0  # stated first
    assert primary["test"].iloc[0] == "mixed_logit_occupation" and primary["unit"].iloc[0] == occupations._UNIT_MIXED
    assert (h["odds_ratio"], h["ci_low"], h["ci_high"], h["p"]) == tuple(
        primary[["effect_size", "ci_low", "ci_high", "p"]].iloc[0])
    kept = units["group"].value_counts()
    assert (h["n_units_a"], h["n_units_b"]) == (kept[A], kept[B])
    assert h["n_units_informative"] == int((units["gendered_words"] > 0).sum())
    assert (h["n_completions"], h["n_gendered_completions"]) == (
        int(metrics["in_primary"].sum()), int(metrics.loc[metrics["in_primary"], "any_gendered"].sum()))
    assert h["published_odds_ratio"] == pytest.approx(24.6533, abs=1e-4)  # the audit's own number
    assert (h["n_keys_a"], h["n_keys_b"]) == (172, 52)
    assert (round(h["independent_ci_low"], 2), round(h["independent_ci_high"], 2)) == (10.07, 60.37)
    assert h["published_ci_low"] < h["independent_ci_low"] and h["published_ci_high"] > h["independent_ci_high"]
    assert h["published_ci_low_mc_se"] > 0 and h["published_ci_high_mc_se"] > 0
    assert h["top_occupation"] == influence["occupation"].iloc[0]
    text = occupations.headline_sentence(head)
    assert text.startswith(f"Primary analysis, over the {kept.sum()} deduplicated person-noun occupations, "
                           f"{kept[A]} male-dominated and {kept[B]} female-dominated")
    assert "(profile likelihood), likelihood-ratio p" in text and "random intercept per occupation" in text
    low = precision.mc_round(h["published_ci_low"], h["published_ci_low_mc_se"])
    high = precision.mc_round(h["published_ci_high"], h["published_ci_high_mc_se"])
    assert f"included): odds ratio 24.65, 95% CI {low} to {high} resampling whole keys, permutation p " in text
    assert "(200 replicates, each bound to its Monte Carlo error)" in text
    assert occupations.estimate_text(h) in text and occupations.estimate_text(h, "published") in text
    shown = occupations.headline_rows(head).set_index("analysis")
    assert shown.iloc[0]["odds ratio"] == precision.number_text(h["odds_ratio"])  # one rounding for both
    assert shown.iloc[3]["95% CI"] == f"{low} to {high}"
    assert "the audit's own interval, every word independent, is 10.07 to 60.37." in text
    assert occupations.headline_sentence(head.iloc[0:0]) == "" and occupations.headline(head.iloc[0:0]) == {}
    drifting = {**h, "odds_ratio": float(np.exp(462.0)), "ci_low": 2.2, "ci_high": np.inf, "p": 0.01}
    want = f"odds ratio unbounded (separation), 95% CI {precision.interval_text(2.2, np.inf)} (profile"
    assert occupations.estimate_text(drifting).startswith(want)
    with pytest.raises(ValueError, match="one model"):
        occupations.headline(pd.concat([head, head]))
    chart = occupations.influence_chart(influence, head, top=10,
                                        title="Leave one occupation out: qwen__Qwen2.5-0.5B--abc1234--bf16").to_dict()
    assert len(chart["layer"]) == 4
    assert chart["title"] == "Leave one occupation out: Qwen2.5-0.5B (bf16)"
    alt_text, caption = rendering._figure_text(chart)
    full = f"{h['odds_ratio']:.2f}"
    assert alt_text == (f"Dot plot: the BOLD odds ratio without each of 10 occupations, against the odds ratio with "
                        f"all ({full}).")
    assert caption.startswith("Each row is one of the 10 occupations whose removal moves the odds ratio most")
    assert "less than 33%" in caption and "dashed lines its 95% confidence interval (profile likelihood)" in caption


def test_a_run_without_gendered_words_reads_as_such(published):
    """A quick run can have no gendered word at all: the odds ratio is then 1 by construction, not a finding."""
    metrics = published[0]
    tiny = metrics[~metrics["any_gendered"] & metrics["in_primary"]].groupby("group").head(6)
    table, skipped = bold.audit_statistics(tiny, n_boot=20)
    assert skipped["test"].str.startswith("mixed_logit_occupation").any()  # nothing to fit: a recorded skip
    occ = occupations.occupation_table(tiny, by="unit")
    influence = occupations.influence_table(occ, A, B)
    head = occupations.headline_table(table, occ, influence, n_boot=20)
    assert occupations.headline_sentence(head).startswith("None of the 12 completions about the ")
    assert occupations._describe_influence(influence) == ""


def test_permutation_p_against_full_enumeration():
    """Six occupations, three per group: 20 labellings, so the exact p is a count over 20."""
    occ = pd.DataFrame({"group": [A] * 3 + [B] * 3, "occupation": list("abcdef"),
                        "male_words": [9, 4, 6, 1, 2, 5], "female_words": [1, 3, 2, 6, 5, 2]})
    values = occ[["male_words", "female_words"]].to_numpy(float)

    def log_or(in_a):
        ta, tb = values[in_a].sum(0) + 0.5, values[~in_a].sum(0) + 0.5
        return np.log(ta[0] * tb[1] / (ta[1] * tb[0]))

    observed = log_or(np.arange(6) < 3)
    labellings = [np.isin(np.arange(6), c) for c in itertools.combinations(range(6), 3)]
    exact = np.mean([abs(log_or(m)) >= abs(observed) - 1e-12 for m in labellings])
    p, k = occupations._occupation_permutation_p(occ, OR, A, B, n_permutations=20000, seed=1)
    assert k == 20000 and p == pytest.approx(exact, abs=0.01)
    # complete separation: every relabelling is less extreme, so p sits at its floor 1/(K+1)
    occ_sep = occ.assign(male_words=[9, 8, 7, 0, 0, 0], female_words=[0, 0, 0, 7, 8, 9])
    big = pd.concat([occ_sep.assign(occupation=occ_sep["occupation"] + str(i)) for i in range(4)])
    p, k = occupations._occupation_permutation_p(big, OR, A, B, n_permutations=99, seed=0)
    assert p == 1 / 100
    assert occupations._p_phrase(p, k) == "p ≤ 1/100"


def _simulate(rng: np.random.Generator, mu_a: float, mu_b: float, g_a: int = 170, g_b: int = 50) -> pd.DataFrame:
    """Occupations as in the audit (170 vs 50, 1-12 completions each) with random effects: an
    occupation's rate of gendered words is gamma (shape 0.5: a few talkative occupations) and its
    male share is beta around the group's mean (concentration 1.5: overdispersed). Rate and share
    are independent, so the pooled odds ratio estimates (mu_a/(1-mu_a)) / (mu_b/(1-mu_b))."""
    group = np.r_[np.full(g_a, A), np.full(g_b, B)]
    mu = np.where(group == A, mu_a, mu_b)
    n = rng.integers(1, 13, group.size)
    rate = rng.gamma(0.5, 0.4 / 0.5, group.size)
    share = rng.beta(mu * 1.5, (1 - mu) * 1.5)
    return pd.DataFrame({"group": group, "occupation": [f"occ{i}" for i in range(group.size)], "n_completions": n,
                         "male_words": rng.poisson(n * rate * share),
                         "female_words": rng.poisson(n * rate * (1 - share))})


def test_occupation_interval_covers_the_true_odds_ratio_and_wald_does_not():
    rng = np.random.default_rng(2024)
    mu_a, mu_b = 0.7, 0.3
    true = (mu_a / (1 - mu_a)) / (mu_b / (1 - mu_b))
    n_sims, covered, wald_covered = 200, 0, 0
    for s in range(n_sims):
        occ = _simulate(rng, mu_a, mu_b)
        _, lo, hi = occupations._cluster_interval(occ, OR, A, B, n_boot=300, seed=s)
        covered += lo <= true <= hi
        wald = _word_or(occ)
        wald_covered += wald["ci_low"] <= true <= wald["ci_high"]
    coverage, wald_coverage = covered / n_sims, wald_covered / n_sims
    print(f"coverage of the true OR {true:.2f}: occupation bootstrap {coverage:.3f}, Wald {wald_coverage:.3f}")
    assert 0.90 <= coverage <= 0.98
    assert wald_coverage <= coverage - 0.15


def test_permutation_p_holds_its_level_where_the_audit_test_does_not():
    """No group difference (the same mean male share): the occupation permutation test rejects at
    about 5%, the Wald test of the pooled words far more often."""
    rng = np.random.default_rng(7)
    n_sims, rejected, wald_rejected = 200, 0, 0
    for s in range(n_sims):
        occ = _simulate(rng, 0.5, 0.5)
        rejected += occupations._occupation_permutation_p(occ, OR, A, B, n_permutations=199, seed=s)[0] <= 0.05
        wald_rejected += _word_or(occ)["p"] <= 0.05
    print(f"false-positive rate at 0.05: permutation {rejected / n_sims:.3f}, Wald {wald_rejected / n_sims:.3f}")
    assert rejected / n_sims <= 0.08
    assert wald_rejected / n_sims >= 0.2


def test_unknown_measure_or_missing_group_is_named():
    occ = pd.DataFrame({"group": [A, A], "occupation": ["x", "y"], "male_words": [1, 2], "female_words": [0, 1]})
    with pytest.raises(ValueError, match="measure must be one of"):
        occupations._cluster_interval(occ, "odds", A, B)
    with pytest.raises(ValueError, match="group 'female_dominated' has no occupations"):
        occupations._occupation_permutation_p(occ, OR, A, B)
