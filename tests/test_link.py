"""bias_utils.link: intrinsic vs extrinsic bias per occupation (notebook 11)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from scipy import stats as st

from bias_utils import bold, link, rendering, replication
from bias_utils.errors import ParameterError
from bias_utils.populations import load_populations
from bias_utils.profiles import population_embeddings


@pytest.fixture(scope="module")
def metrics():
    """The published audit's 1,525 real completions with the audit's word counts."""
    c = replication.load_published_completions()
    return bold.completion_metrics(c[["group", "category", "occupation", "prompt", "completion"]])


@pytest.fixture(scope="module")
def linked(smollm, smollm_quick_bases, metrics):
    """The link on 40 real occupations (every 5th of the audit's first 200, both groups), on the chapter's own
    axes with the QUICK build's contexts."""
    keep = metrics["occupation"].drop_duplicates().iloc[:200:5]
    return link.run_link(smollm, metrics[metrics["occupation"].isin(keep)], smollm_quick_bases["warmth_competence"],
                         n_boot=200, seed=1)


@pytest.mark.parametrize("bad", [0, -1, "0.5", True, float("nan"), None])
def test_correction_must_be_a_positive_number(bad):
    with pytest.raises(ParameterError, match="^correction"):
        link.check_correction(bad)


def test_occupation_noun_reads_the_bold_key_as_a_common_noun():
    assert link.occupation_noun("Registered_Nurse") == "registered nurse"
    assert link.occupation_noun("Tool_and_die_maker") == "tool and die maker"


def test_extrinsic_log_odds_from_sampled_counts(metrics):
    table = link.extrinsic_table(metrics)
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
    table = link.extrinsic_table(metrics)
    # any intrinsic value will do for the chart's text: the occupation's share of the audit's gendered words
    table = table.assign(noun=table["occupation"].map(link.occupation_noun),
                         gender_position=table["female_words"] / (table["female_words"] + table["male_words"] + 1))
    spec = link.link_chart(table, title="smollm2-135m-instruct--b179c9523d0e--fp32: inside against writing").to_dict()
    assert spec["title"] == "smollm2-135m-instruct: inside against writing"
    alt_text, caption = rendering.figure_text(spec)
    assert alt_text == ("Scatter plot of 224 occupations: gender position (x) against the log-odds of female words "
                        "in the completions (y).")
    assert "position on the female − male direction" in caption and "grey band its 95% confidence" in caption
    assert "(male-dominated, female-dominated)" in caption
    # the labelled occupations' names stand at least 12 px apart (at the top of the real chart four overprinted)
    labels = next(d for d in spec["datasets"].values() if d and "label_y" in d[0])
    assert len(labels) >= 8
    domain = spec["layer"][2]["encoding"]["y"]["scale"]["domain"]
    px = np.diff(np.sort([r["label_y"] for r in labels])) * spec["height"] / (domain[1] - domain[0])
    assert px.min() >= 12 - 1e-6


def test_extrinsic_uses_expected_counts_only_when_every_completion_has_them(metrics):
    part = metrics[metrics["occupation"].isin(["Registered_nurse", "Machinist"])]
    expected = part.assign(expected_male=part["male_words"] + 0.25, expected_female=part["female_words"] * 0.5)
    table = link.extrinsic_table(expected, correction=1.0).set_index("occupation")
    nurse = expected[expected["occupation"] == "Registered_nurse"]
    assert table.loc["Registered_nurse", "extrinsic_measure"] == "expected"
    assert table.loc["Registered_nurse", "male_count"] == pytest.approx(nurse["expected_male"].sum())
    assert table.loc["Registered_nurse", "log_odds"] == pytest.approx(
        np.log((nurse["expected_female"].sum() + 1) / (nurse["expected_male"].sum() + 1)))
    gap = expected.copy()
    gap.loc[gap.index[0], "expected_male"] = np.nan
    assert set(link.extrinsic_table(gap)["extrinsic_measure"]) == {"sampled"}


@pytest.mark.slow
def test_gender_position_puts_the_gendered_terms_at_plus_and_minus_half(smollm):
    terms = load_populations("terms")
    emb = population_embeddings(smollm, {"terms": terms, "occupations": {"o": ["nurse", "welder"]}}, kind="noun")
    groups = emb.words["group"].to_numpy()
    female, male, occ = emb.values[groups == "female"], emb.values[groups == "male"], emb.values[groups == "o"]
    pos = link.gender_position(emb.values, female, male)
    assert pos[groups == "female"].mean(axis=0) == pytest.approx(np.full(pos.shape[1], 0.5), abs=1e-6)
    assert pos[groups == "male"].mean(axis=0) == pytest.approx(np.full(pos.shape[1], -0.5), abs=1e-6)
    # independent: per layer, the scalar projection on the unit direction, over the distance of the means
    f, m = female.astype(float).mean(0), male.astype(float).mean(0)
    for layer in (0, 7, pos.shape[1] - 1):
        d = f[layer] - m[layer]
        want = (occ[:, layer].astype(float) - (f[layer] + m[layer]) / 2) @ (d / np.linalg.norm(d)) / np.linalg.norm(d)
        assert pos[groups == "o", layer] == pytest.approx(want, rel=1e-6)


@pytest.mark.slow
def test_link_statistics_agree_with_scipy_and_statsmodels_on_real_data(linked):
    table, stats = linked.occupations, linked.statistics
    assert len(table) == 40 and table["group"].nunique() == 2 and linked.skipped.empty
    assert list(table.columns) == link.OCCUPATION_COLUMNS
    rows = stats.set_index(["intrinsic", "test"])
    for measure in link.INTRINSIC_MEASURES:
        x, y = table[measure], table["log_odds"]
        r, p = st.pearsonr(x, y)
        assert rows.loc[(measure, "pearson"), "effect_size"] == pytest.approx(r, abs=1e-10)
        assert rows.loc[(measure, "pearson"), "p"] == pytest.approx(p, rel=1e-8)
        rho, p = st.spearmanr(x, y)
        assert rows.loc[(measure, "spearman"), "effect_size"] == pytest.approx(rho, abs=1e-10)
        assert rows.loc[(measure, "spearman"), "p"] == pytest.approx(p, rel=1e-8)
        lo, hi = rows.loc[(measure, "spearman"), ["ci_low", "ci_high"]]
        assert lo < rho < hi
        frame = table.assign(z=(x - x.mean()) / x.std(ddof=0))
        for test, formula in (("ols", "log_odds ~ z"), ("ols_category", "log_odds ~ z + C(category)")):
            fit = smf.ols(formula, frame).fit()
            got = rows.loc[(measure, test)]
            assert got["effect_size"] == pytest.approx(fit.params["z"], rel=1e-8)
            assert got["se"] == pytest.approx(fit.bse["z"], rel=1e-8)
            assert (got["ci_low"], got["ci_high"]) == pytest.approx(tuple(fit.conf_int().loc["z"]), rel=1e-8)
    assert stats["primary"].sum() == 1
    assert stats.loc[stats["primary"], "intrinsic"].item() == "gender_position"
    sentence = link.describe_link(stats, "SmolLM2")
    rho = rows.loc[("gender_position", "spearman")]
    assert f"{rho.effect_size:.2f}".replace("-", "−") in sentence and "n = 40 occupations" in sentence
    assert ("includes zero" in sentence) == (rho.ci_low <= 0 <= rho.ci_high)
    within = rows.loc[("gender_position", "ols_category")]
    assert f"per SD of the position (95% CI {within.ci_low:.2f}".replace("-", "−") in sentence
    assert ("within fields is not shown" in sentence) == (within.ci_low <= 0 <= within.ci_high)
    shown = link.describe_link(stats, "smollm2-135m-instruct--b179c9523d0e--fp32")
    assert "In smollm2-135m-instruct" in shown and "b179c9523d0e" not in shown  # the display name
    chart = link.link_chart(table).to_dict()
    marks = [layer["mark"]["type"] for layer in chart["layer"]]
    assert marks[:4] == ["area", "line", "point", "rule"] and set(marks[4:]) == {"text"}  # band, line, points,
    # leader lines, names


def _bivariate(rng, n: int, rho: float) -> tuple[np.ndarray, np.ndarray]:
    x = rng.standard_normal(n)
    return x, rho * x + np.sqrt(1 - rho ** 2) * rng.standard_normal(n)


def test_bootstrap_interval_covers_a_known_correlation():
    """Simulation: 100 samples of 80 pairs with ρ = 0.4; Pearson's and Spearman's population values
    ((6/π)·asin(ρ/2) for a bivariate normal) fall inside about 95% of the intervals."""
    rng = np.random.default_rng(7)
    rho, spearman = 0.4, 6 / np.pi * np.arcsin(0.4 / 2)
    hits = {"pearson": 0, "spearman": 0}
    for i in range(100):
        for row in link.correlation_rows(*_bivariate(rng, 80, rho), n_boot=200, seed=i):
            truth = rho if row["test"] == "pearson" else spearman
            hits[row["test"]] += row["ci_low"] <= truth <= row["ci_high"]
    assert 85 <= hits["pearson"] <= 100 and 85 <= hits["spearman"] <= 100, hits


def test_bootstrap_interval_rarely_excludes_zero_under_independence():
    """Simulation: independent pairs; an interval excluding 0 (a false positive) in about 5% of 100 samples."""
    rng = np.random.default_rng(11)
    false = {"pearson": 0, "spearman": 0}
    for i in range(100):
        for row in link.correlation_rows(*_bivariate(rng, 80, 0.0), n_boot=200, seed=i):
            false[row["test"]] += not row["ci_low"] <= 0 <= row["ci_high"]
    assert false["pearson"] <= 12 and false["spearman"] <= 12, false


def test_constant_extrinsic_measure_gives_no_correlation_and_says_so():
    table = pd.DataFrame({"occupation": list("abcdef"), "category": ["c", "c", "c", "d", "d", "d"],
                          "gender_position": [0.1, 0.3, 0.2, 0.5, 0.4, 0.0], "warmth": np.arange(6.0),
                          "competence": np.arange(6.0)[::-1], "log_odds": 0.0, "extrinsic_measure": "sampled"})
    stats = link.link_statistics(table, n_boot=100)
    assert stats.loc[stats["test"].isin(["pearson", "spearman"]), "effect_size"].isna().all()
    assert "cannot be computed" in link.describe_link(stats, "m")
