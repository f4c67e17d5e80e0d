"""bias_utils.intrinsic_extrinsic.link: intrinsic vs extrinsic bias per occupation (notebook 11)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
import statsmodels.formula.api as smf
from scipy import stats as st

from bias_utils.audit import bold, occupation_units, replication
from bias_utils.core import mixed, precision, stats
from bias_utils.core.errors import ParameterError
from bias_utils.intrinsic_extrinsic import bold_link, link
from bias_utils.profiles.gender_direction import gender_position
from bias_utils.profiles.population_profiles import population_embeddings
from bias_utils.profiles.populations import load_populations, occupation_shares
from bias_utils.report import rendering


@pytest.fixture(scope="module")
def metrics():
    """The published audit's 1,525 real completions with the audit's word counts (and their BOLD prompt ids)."""
    c = replication.load_published_completions()
    return bold.completion_metrics(c[["group", "category", "occupation", "prompt", "prompt_id", "completion"]])


@pytest.fixture(scope="module")
def linked(smollm, smollm_quick_bases, metrics):
    """The link on the audit's 88 primary occupations (published completions: too few of them have gendered words
    for the within-field model on any slice), on the chapter's own axes with the QUICK build's contexts."""
    annotated = occupation_units.annotate(metrics, "audit")
    keep = annotated.loc[annotated["in_primary"], "unit"].drop_duplicates()
    return bold_link.run_link(smollm, annotated[annotated["unit"].isin(keep)], smollm_quick_bases["warmth_competence"],
                         n_boot=200, seed=1, direction_verdict="supported", n_permutations=99)


@pytest.mark.parametrize("bad", [0, -1, "0.5", True, float("nan"), None])
def test_correction_must_be_a_positive_number(bad):
    with pytest.raises(ParameterError, match="^correction"):
        bold_link._check_correction(bad)


def test_occupation_noun_reads_the_bold_key_as_a_common_noun():
    assert bold_link.occupation_noun("Registered_Nurse") == "registered nurse"
    assert bold_link.occupation_noun("Tool_and_die_maker") == "tool and die maker"
    assert bold_link.occupation_noun("registered nurse") == "registered nurse"  # a unit's name is a noun already
    assert bold_link.occupation_noun("nurse (Nurse_x)") == "nurse"  # a second unit of one noun is told by its key


def test_extrinsic_log_odds_from_sampled_counts(metrics):
    table = bold_link._extrinsic_table(metrics)
    assert len(table) == metrics["occupation"].nunique() == 224
    assert set(table["extrinsic_measure"]) == {"sampled"}
    # independent: the counts summed per occupation by hand
    nurse = metrics[metrics["occupation"] == "Registered_nurse"]
    f, m = nurse["female_words"].sum(), nurse["male_words"].sum()
    row = table.set_index("occupation").loc["Registered_nurse"]
    assert (row.female_count, row.male_count, row.n_completions) == (f, m, len(nurse))
    assert row.log_odds == pytest.approx(np.log((f + 0.5) / (m + 0.5)), abs=1e-12)
    assert table["log_odds"].notna().all()
    assert not table["category"].str.contains(";").any()


def test_link_chart_carries_alt_text_a_caption_and_the_display_name(metrics):
    table = bold_link._extrinsic_table(metrics)
    # any intrinsic value will do for the chart's text: the occupation's share of the audit's gendered words
    table = table.assign(noun=table["occupation"].map(bold_link.occupation_noun),
                         gender_position=table["female_words"] / (table["female_words"] + table["male_words"] + 1))
    spec = link.link_chart(table, title="smollm2-135m-instruct--b179c9523d0e--fp32: inside against writing").to_dict()
    assert spec["title"] == "smollm2-135m-instruct: inside against writing"
    alt_text, caption = rendering._figure_text(spec)
    assert alt_text == ("Scatter plot of 224 occupations: gender position (x) against the log-odds of female words "
                        "in the completions (y).")
    assert "position on the female − male direction" in caption and "No line is drawn" in caption
    assert "(male-dominated, female-dominated)" in caption
    # the labelled occupations' names stand at least 12 px apart (at the top of the real chart four overprinted)
    labels = next(d for d in spec["datasets"].values() if d and "label_y" in d[0])
    assert len(labels) >= 8
    domain = spec["layer"][0]["encoding"]["y"]["scale"]["domain"]
    px = np.diff(np.sort([r["label_y"] for r in labels])) * spec["height"] / (domain[1] - domain[0])
    assert px.min() >= 12 - 1e-6
    # the names stand right of every point (beside its point a name covered its neighbours), inside the x scale
    x_domain = spec["layer"][0]["encoding"]["x"]["scale"]["domain"]
    assert min(r["label_x"] for r in labels) > table["gender_position"].max()
    assert max(r["label_x"] for r in labels) < x_domain[1]
    assert max(spec["layer"][0]["encoding"]["x"]["axis"]["values"]) < min(r["label_x"] for r in labels)  # no tick


def test_link_chart_caption_says_where_the_points_lie_against_the_terms_means(metrics):
    """All nouns beyond the male terms' mean (as SmolLM2's, −3.35 to −2.76): the caption says so and why, with the
    ends from the data; positions around the midpoint get no such sentence."""
    table = bold_link._extrinsic_table(metrics)
    share = table["female_words"] / (table["female_words"] + table["male_words"] + 1)
    table = table.assign(noun=table["occupation"].map(bold_link.occupation_noun), gender_position=share - 3.35)
    _, caption = rendering._figure_text(link.link_chart(table).to_dict())
    low, high = table.loc[table["gender_position"].idxmin()], table.loc[table["gender_position"].idxmax()]
    ends = (f"run from {precision.number_text(low.gender_position)} ({low.noun}) to "
            f"{precision.number_text(high.gender_position)} ({high.noun})")
    assert ends in caption and "all beyond the male terms' mean (−0.5)" in caption
    assert "no neutral point for occupation nouns" in caption
    _, centred = rendering._figure_text(link.link_chart(table.assign(gender_position=share - 0.5)).to_dict())
    assert "positions run from" in centred and "beyond" not in centred


def test_extrinsic_uses_expected_counts_only_when_every_completion_has_them(metrics):
    part = metrics[metrics["occupation"].isin(["Registered_nurse", "Machinist"])]
    expected = part.assign(expected_male=part["male_words"] + 0.25, expected_female=part["female_words"] * 0.5)
    table = bold_link._extrinsic_table(expected, correction=1.0).set_index("occupation")
    nurse = expected[expected["occupation"] == "Registered_nurse"]
    assert table.loc["Registered_nurse", "extrinsic_measure"] == "expected"
    assert table.loc["Registered_nurse", "male_count"] == pytest.approx(nurse["expected_male"].sum())
    assert table.loc["Registered_nurse", "log_odds"] == pytest.approx(
        np.log((nurse["expected_female"].sum() + 1) / (nurse["expected_male"].sum() + 1)))
    gap = expected.copy()
    gap.loc[gap.index[0], "expected_male"] = np.nan
    assert set(bold_link._extrinsic_table(gap)["extrinsic_measure"]) == {"sampled"}


@pytest.mark.slow
def test_gender_position_puts_the_gendered_terms_at_plus_and_minus_half(smollm):
    terms = load_populations("terms")
    emb = population_embeddings(smollm, {"terms": terms, "occupations": {"o": ["nurse", "welder"]}}, kind="noun")
    groups = emb.words["group"].to_numpy()
    female, male, occ = emb.values[groups == "female"], emb.values[groups == "male"], emb.values[groups == "o"]
    pos = gender_position(emb.values, female, male)
    assert pos[groups == "female"].mean(axis=0) == pytest.approx(np.full(pos.shape[1], 0.5), abs=1e-6)
    assert pos[groups == "male"].mean(axis=0) == pytest.approx(np.full(pos.shape[1], -0.5), abs=1e-6)
    # independent: per layer, the scalar projection on the unit direction, over the distance of the means
    f, m = female.astype(float).mean(0), male.astype(float).mean(0)
    for layer in (0, 7, pos.shape[1] - 1):
        d = f[layer] - m[layer]
        want = (occ[:, layer].astype(float) - (f[layer] + m[layer]) / 2) @ (d / np.linalg.norm(d)) / np.linalg.norm(d)
        assert pos[groups == "o", layer] == pytest.approx(want, rel=1e-6)


@pytest.mark.slow
def test_link_statistics_agree_with_scipy_statsmodels_and_the_mixed_model_on_real_data(linked):
    table, stats_ = linked.occupations, linked.statistics
    units = occupation_units.unit_table("audit")
    assert len(table) == units.loc[units["primary"], "unit"].nunique() and table["group"].nunique() == 2
    assert linked.skipped.empty
    assert list(table.columns) == bold_link._OCCUPATION_COLUMNS
    assert set(table["occupation"]) <= set(occupation_units.unit_table("audit")["unit"])  # units, not BOLD keys
    pooled = stats_[stats_["group"] == ""].set_index(["intrinsic", "test"])
    for measure in bold_link._INTRINSIC_MEASURES:
        x, y = table[measure], table["log_odds"]
        r, p = st.pearsonr(x, y)
        assert pooled.loc[(measure, "pearson"), "effect_size"] == pytest.approx(r, abs=1e-10)
        assert pooled.loc[(measure, "pearson"), "p"] == pytest.approx(p, rel=1e-8)
        rho, p = st.spearmanr(x, y)
        assert pooled.loc[(measure, "spearman"), "effect_size"] == pytest.approx(rho, abs=1e-10)
        assert pooled.loc[(measure, "spearman"), "p"] == pytest.approx(p, rel=1e-8)
        for group, g in table.groupby("group"):
            row = stats_[(stats_["test"] == "spearman_within_group") & (stats_["intrinsic"] == measure)
                         & (stats_["group"] == group)].iloc[0]
            want = st.spearmanr(g[measure], g["log_odds"])[0] if g["log_odds"].nunique() > 1 else np.nan
            assert row["effect_size"] == pytest.approx(want, abs=1e-10, nan_ok=True)
        frame = table.assign(z=(x - x.mean()) / x.std(ddof=0))
        for test, formula in (("ols", "log_odds ~ z"), ("ols_category", "log_odds ~ z + C(category)")):
            fit = smf.ols(formula, frame).fit()
            got = pooled.loc[(measure, test)]
            assert got["effect_size"] == pytest.approx(fit.params["z"], rel=1e-8)
            assert got["se"] == pytest.approx(fit.bse["z"], rel=1e-8)
            assert (got["ci_low"], got["ci_high"]) == pytest.approx(tuple(fit.conf_int().loc["z"]), rel=1e-8)
        # the mixed model without fixed effects, fitted here on the counts directly
        direct = mixed.fit_mixed_logit(table["female_count"], table["male_count"],
                                       pd.DataFrame({"intercept": 1.0, "z": frame["z"].to_numpy()}))
        got = pooled.loc[(measure, "mixed_logit")]
        assert got["effect_size"] == pytest.approx(direct.coef["z"], rel=1e-6)
        assert got["se"] == pytest.approx(direct.se["z"], rel=1e-6)
        within = pooled.loc[(measure, "mixed_logit_within_category")]
        assert within["n_fixed_effects"] >= 1 and within["scope"] == "within BOLD category and group"
        assert (within["ci_low"] > 0 or within["ci_high"] < 0) == (within["p"] < 0.05)  # profile CI and LR test
        assert within["n_permutations"] == 99 and within["p"] >= 1 / 100
    assert stats_["primary"].sum() == 1
    primary = stats_[stats_["primary"]].iloc[0]
    assert (primary["intrinsic"], primary["test"]) == ("gender_position", "mixed_logit_within_category")
    sentence = bold_link.describe_link(stats_, "SmolLM2")
    assert f"{primary.effect_size:.2f}".replace("-", "−") + " log-odds per SD" in sentence
    assert "permutation likelihood-ratio p " in sentence
    assert ("is not shown" in sentence) == (primary.ci_low <= 0 <= primary.ci_high)
    rho = pooled.loc[("gender_position", "spearman")]
    # each number after the words that say what it is about: the pooled correlation as such, and what drives it
    assert "over all occupations together" in sentence
    assert f"Spearman ρ = {rho.effect_size:.2f}, 95% CI ".replace("-", "−") in sentence
    if rho.ci_low <= 0 <= rho.ci_high:
        assert "neither a positive nor a negative correlation is shown" in sentence
    else:
        assert "the difference between female- and male-dominated occupations" in sentence
    assert "within each group, Spearman ρ " in sentence
    # the mixed models' n reconciled with the table (issue 47: 75, 88 and 33 were printed unexplained)
    counted = int(((table["female_count"] + table["male_count"]) > 0).sum())
    sampled = int(((table["female_words"] + table["male_words"]) > 0).sum())
    assert 0 < counted < len(table)
    for test in ("mixed_logit", "mixed_logit_within_category"):
        row = pooled.loc[("gender_position", test)]
        assert (row["n"], row["n_occupations"], row["n_sampled"]) == (counted, len(table), sampled)
    assert (f"n = {counted} of the {len(table)} occupations, those whose sampled word counts are above 0"
            in sentence)
    assert link.counted_units(primary) == f"BOLD primary units with a count above 0 ({counted} of {len(table)})"
    constant = [g for g, t in table.groupby("group") if t["log_odds"].nunique() == 1]
    assert sentence.count("is not defined among the") == len(constant)
    shown = bold_link.describe_link(stats_, "smollm2-135m-instruct--b179c9523d0e--fp32")
    assert "In smollm2-135m-instruct" in shown and "b179c9523d0e" not in shown  # the display name
    # a direction not validated against the BLS share is not read, and no number of it is printed
    unread = bold_link._link_statistics(table, n_boot=20, direction_verdict="not shown", n_permutations=39)
    assert not unread.loc[unread["intrinsic"] == "gender_position", "readable"].any()
    assert unread.loc[unread["intrinsic"] != "gender_position", "readable"].all()
    text = bold_link.describe_link(unread, "SmolLM2")
    assert "is not shown against the BLS share of women" in text and re.search(r"\d\.\d", text) is None
    chart = link.link_chart(table).to_dict()
    marks = [layer["mark"]["type"] for layer in chart["layer"]]
    # points, leader lines, names; no pooled line: the BOLD-based link's pre-stated test is within field and group
    assert marks[:2] == ["point", "rule"] and set(marks[2:]) == {"text"}
    _, caption = rendering._figure_text(chart)
    assert "No line is drawn" in caption and "within one colour" in caption
    next_word = link.link_chart(table.assign(log_ratio=table["log_odds"]), y="log_ratio").to_dict()
    assert [layer["mark"]["type"] for layer in next_word["layer"]][:2] == ["area", "line"]  # the fit and its band


def _fields(rng, slope: float, sigma: float = 0.8, n_categories: int = 8, per_category: int = 8) -> pd.DataFrame:
    """Occupations in fields as in the audit: a field shifts both the position and the log-odds (the topic
    confound a pooled correlation reads as a link), the group splits the fields, counts are few (expected-count
    like: Poisson totals with mean 2), and the log-odds of female words rise by ``slope`` per SD of the position
    within a field, around a random intercept per occupation."""
    category = np.repeat(np.arange(n_categories), per_category)
    shift = rng.normal(0, 1.0, n_categories)[category]
    x = shift + rng.normal(size=category.size)
    z = (x - x.mean()) / x.std()
    eta = 1.5 * shift + slope * z + sigma * rng.normal(size=category.size)
    total = rng.poisson(2.0, category.size)
    female = rng.binomial(total, 1 / (1 + np.exp(-eta)))
    return pd.DataFrame({"occupation": [f"o{i}" for i in range(category.size)], "category": category.astype(str),
                         "group": np.where(category < n_categories // 2, "f", "m"), "gender_position": x,
                         "female_count": female.astype(float), "male_count": (total - female).astype(float)})


def _primary_row(table: pd.DataFrame) -> dict:
    return next(r for r in bold_link._mixed_link_rows(table, "gender_position", n_permutations=39)
                if r["test"] == "mixed_logit_within_category")


@pytest.mark.slow
def test_the_primary_slope_holds_its_level_where_topic_confounds_the_pooled_correlation():
    """Simulation, 200 data sets without a link within fields: the primary within-field slope (its p from 39
    relabellings within category and group) rejects at about 5% (at most 0.07), while the correlation pooled over
    the fields, which the topic drives, rejects far more. The slope's coverage with permutations is
    tests/test_mixed.py's design (c)."""
    rng = np.random.default_rng(3)
    primary = pooled = 0
    for _ in range(200):
        table = _fields(rng, slope=0.0)
        primary += _primary_row(table)["p"] < 0.05
        log_odds = np.log((table["female_count"] + 0.5) / (table["male_count"] + 0.5))
        pooled += st.spearmanr(table["gender_position"], log_odds)[1] < 0.05
    print(f"false-positive rate: within-field slope {primary / 200:.3f}, pooled Spearman {pooled / 200:.3f}")
    assert primary / 200 <= 0.07
    assert pooled / 200 >= 0.2


def _bivariate(rng, n: int, rho: float) -> tuple[np.ndarray, np.ndarray]:
    x = rng.standard_normal(n)
    return x, rho * x + np.sqrt(1 - rho ** 2) * rng.standard_normal(n)


@pytest.mark.slow
def test_bootstrap_interval_covers_a_known_correlation():
    """Simulation: 100 samples of 80 pairs with ρ = 0.4; Pearson's and Spearman's population values
    ((6/π)·asin(ρ/2) for a bivariate normal) fall inside about 95% of the intervals."""
    rng = np.random.default_rng(7)
    rho, spearman = 0.4, 6 / np.pi * np.arcsin(0.4 / 2)
    hits = {"pearson": 0, "spearman": 0}
    for i in range(100):
        for row in stats.correlation_rows(*_bivariate(rng, 80, rho), n_boot=200, seed=i):
            truth = rho if row["test"] == "pearson" else spearman
            hits[row["test"]] += row["ci_low"] <= truth <= row["ci_high"]
    assert 85 <= hits["pearson"] <= 100 and 85 <= hits["spearman"] <= 100, hits


@pytest.mark.slow
def test_bootstrap_interval_rarely_excludes_zero_under_independence():
    """Simulation: independent pairs; an interval excluding 0 (a false positive) in about 5% of 100 samples."""
    rng = np.random.default_rng(11)
    false = {"pearson": 0, "spearman": 0}
    for i in range(100):
        for row in stats.correlation_rows(*_bivariate(rng, 80, 0.0), n_boot=200, seed=i):
            false[row["test"]] += not row["ci_low"] <= 0 <= row["ci_high"]
    assert false["pearson"] <= 12 and false["spearman"] <= 12, false


def test_constant_extrinsic_measure_gives_no_correlation_and_says_so():
    table = pd.DataFrame({"occupation": list("abcdef"), "category": ["c", "c", "c", "d", "d", "d"],
                          "group": ["g", "g", "g", "h", "h", "h"],
                          "gender_position": [0.1, 0.3, 0.2, 0.5, 0.4, 0.0], "warmth": np.arange(6.0),
                          "competence": np.arange(6.0)[::-1], "female_count": 0.0, "male_count": 0.0,
                          "log_odds": 0.0, "extrinsic_measure": "sampled"})
    stats_ = bold_link._link_statistics(table, n_boot=100, n_permutations=39)
    assert stats_.loc[stats_["test"].isin(["pearson", "spearman"]), "effect_size"].isna().all()
    assert "could not be fitted" in bold_link.describe_link(stats_, "m")  # no counts: the model has nothing to fit


# --------------------------------------------------------------------------- the link on the same occupations


def _shaped(rng, replicates: int, inside: float = 0.45, writing: float = 1.1) -> tuple[np.ndarray, np.ndarray]:
    """Data shaped like the primary analysis: the 60 real BLS shares; an inside measure and a writing measure that
    each follow the (standardised) share, with independent noise, so the inside carries nothing beyond the share.
    ``inside`` 0.45 gives a Spearman ρ of about 0.4 with the share (SmolLM2's direction), ``writing`` 1.1 about 0.7."""
    share = occupation_shares()["bls_pct_female"].to_numpy(float)
    z = (share - share.mean()) / share.std()
    return (inside * z + rng.standard_normal((replicates, len(z))),
            writing * z + rng.standard_normal((replicates, len(z))))


@pytest.mark.slow
def test_partial_association_beyond_the_share_is_calibrated():
    """Simulation of the beyond-the-BLS-share row when the inside carries no information beyond the share: its p
    (4,000 replicates; both partial tests) falls below 0.05 in 0.05 ± 0.015 of them (± 4.4 standard errors), and the
    interval the chapter reads (the partial Spearman ρ's occupation bootstrap: 300 replicates × 300 resamples)
    excludes 0 in 0.05 ± 0.04 of them. Vectorised over replicates with the functions the row is computed by
    (``stats._rowwise_partial``, ``stats._partial_p``, ``stats.resamples``); the marginal association the two share
    through the share is large, so a plain correlation would be a false positive almost always."""
    rng = np.random.default_rng(38)
    share = occupation_shares()["bls_pct_female"].to_numpy(float)
    n = len(share)
    inside, writing = _shaped(rng, 4000)
    controls = np.broadcast_to(share[None, :, None], (4000, n, 1))
    for method in ("pearson", "spearman"):
        p = stats._partial_p(stats._rowwise_partial(method, inside, writing, controls), n, 1)
        assert abs((p < 0.05).mean() - 0.05) <= 0.015, (method, (p < 0.05).mean())
    plain = stats.rowwise_correlation("spearman", inside[:300], writing[:300])
    assert np.median(plain) > 0.2  # the confounded association the partial row must not read as a link
    replicates, n_boot = 300, 300
    inside, writing = inside[:replicates], writing[:replicates]
    draws = stats.resamples(n, n_boot, seed=0)
    boots = stats._rowwise_partial("spearman", inside[:, draws].reshape(-1, n), writing[:, draws].reshape(-1, n),
                                   np.broadcast_to(share[draws][None, ..., None], (replicates, n_boot, n, 1))
                                   .reshape(-1, n, 1)).reshape(replicates, n_boot)
    low, high = np.nanpercentile(boots, [2.5, 97.5], axis=1)
    assert abs(((low > 0) | (high < 0)).mean() - 0.05) <= 0.04, ((low > 0) | (high < 0)).mean()


def _next_word_inputs(rng, n=60, units=20):
    share = occupation_shares()["bls_pct_female"].to_numpy(float)
    position = share / 50 + rng.standard_normal(n)
    values = pd.DataFrame({"occupation": occupation_shares()["occupation"], "group": "g", "bls_pct_female": share,
                           "gender_position": position})
    unit_nouns = [f"unit {i}" for i in range(units)]
    unit_table = pd.DataFrame({"occupation": [f"Unit_{i}" for i in range(units)], "noun": unit_nouns, "group": "h",
                               "gender_position": rng.standard_normal(units)})
    exact = pd.DataFrame({"occupation": list(values["occupation"]) + unit_nouns,
                          "log_ratio": np.r_[position + share / 40 + rng.standard_normal(n),
                                             unit_table["gender_position"] + rng.standard_normal(units)],
                          "gendered_mass": 0.3})
    return values, exact, unit_table


def test_next_word_link_rows_equal_scipy_and_pingouin_and_carry_the_bold_row():
    rng = np.random.default_rng(3)
    values, exact, units = _next_word_inputs(rng)
    exact = exact.drop(index=4)  # a noun without the measure is left out of its rows
    bold = pd.DataFrame([{c: np.nan for c in stats.STAT_COLUMNS} | {
        "test": bold_link.PRIMARY["test"], "intrinsic": "gender_position", "effect": "log_odds_slope",
        "effect_size": 0.6, "ci_low": -0.64, "ci_high": 2.01, "p": 0.32, "n": 33, "extrinsic_measure": "expected",
        "note": ""}])
    result = link.next_word_link(values, exact, units, bold, direction_verdict="supported", n_boot=300, seed=2)
    st_ = result.statistics.set_index(["analysis", "test"])
    assert list(result.statistics.columns) == stats.STAT_COLUMNS + link._NEXT_WORD_LINK_COLUMNS
    assert result.statistics["primary"].sum() == 1 and st_.loc[("primary", "spearman"), "primary"]
    bls = values.merge(exact.rename(columns={"occupation": "noun"}), left_on="occupation", right_on="noun")
    rho, p = st.spearmanr(bls["gender_position"], bls["log_ratio"])
    assert st_.loc[("primary", "spearman"), ["effect_size", "p", "n"]].tolist() == pytest.approx([rho, p, 59])
    ref = pg.partial_corr(bls, "gender_position", "log_ratio", ["bls_pct_female"], method="spearman")
    beyond = st_.loc[("beyond the BLS share", "partial_spearman")]
    assert [beyond["effect_size"], beyond["p"]] == pytest.approx([ref["r"].iloc[0], ref["p_val"].iloc[0]], rel=1e-8)
    assert beyond["controls"] == "bls_pct_female" and beyond["df"] == 56
    rho_u, _ = st.spearmanr(units["gender_position"], exact["log_ratio"].iloc[-20:])
    assert st_.loc[("BOLD primary units", "spearman"), "effect_size"] == pytest.approx(rho_u)
    row = st_.loc[("BOLD link", bold_link.PRIMARY["test"])]
    assert (row["role"], row["units"], row["effect_size"], row["n"]) == ("robustness", "BOLD primary units", 0.6, 33)
    assert "sampled BOLD completions" in row["extrinsic_measure"]
    assert set(result.occupations["units"]) == {"BLS occupations", "BOLD primary units"}
    text = link.describe_next_word_link(result.statistics, "m")
    assert text.startswith("In m, across the 59 BLS occupations") and "beyond the BLS share of women" in text
    assert "Robustness, the BOLD-based link (BOLD primary units" in text and "not shown is not absent" in text
    # a direction not validated against the share: no number of it is read
    unread = link.next_word_link(values, exact, direction_verdict="not shown", n_boot=50).statistics
    assert not unread["readable"].any()
    assert "is not read" in link.describe_next_word_link(unread, "m") and "ρ =" not in link.describe_next_word_link(
        unread, "m")
    with pytest.raises(ParameterError, match="^direction_verdict"):
        link.next_word_link(values, exact, direction_verdict="valid", n_boot=50)
    chart = link.link_chart(result.occupations[result.occupations["units"] == "BLS occupations"], y="log_ratio")
    alt_text, caption = rendering._figure_text(chart.to_dict())
    assert "next-word log-ratio" in alt_text and "a female word is the likelier" in caption
