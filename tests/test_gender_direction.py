"""bias_utils.profiles.gender_direction: the female − male direction checked against the BLS share of women, and the
``occupations`` population it uses (chapter 04)."""

from __future__ import annotations

import csv
import json

import float32_bounds as bounds
import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats as st
from statsmodels.stats.multitest import multipletests

from bias_utils.core import criterion_validity as cv
from bias_utils.core import data, paths
from bias_utils.core.stats import correlation_rows
from bias_utils.profiles import gender_direction as gd
from bias_utils.profiles import population_profiles as pr
from bias_utils.profiles.populations import load_populations, occupation_shares, population_kind


def _tsv_rows() -> list[dict]:
    """The published file read with the csv module, apart from the package's reader."""
    with open(data.resolve("winogender_occupation_stats"), newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_occupations_population_is_the_60_bls_nouns_split_at_half_women():
    rows = _tsv_rows()
    assert len(rows) == 60
    female = [r["occupation"] for r in rows if float(r["bls_pct_female"]) >= 50]
    male = [r["occupation"] for r in rows if float(r["bls_pct_female"]) < 50]
    groups = load_populations("occupations")
    assert groups == {"female-majority": female, "male-majority": male}
    assert (len(female), len(male)) == (31, 29)  # the counts chapter 04's method section states
    assert {"nurse", "secretary", "hairdresser"} <= set(female) and {"plumber", "engineer"} <= set(male)
    assert population_kind("occupations") == "noun"
    shares = occupation_shares()
    assert shares["occupation"].tolist() == [r["occupation"] for r in rows]
    assert shares["bls_pct_female"].tolist() == [float(r["bls_pct_female"]) for r in rows]
    assert set(shares["bls_year"]) == {2015, 2016}


# --------------------------------------------------------------------------- the verdict rule


@pytest.mark.parametrize("ci_low, n, verdict", [
    (0.01, 60, "supported"), (0.0, 60, "not shown"), (-0.3, 60, "not shown"), (0.5, 9, "untestable"),
    (0.5, 10, "supported"), (float("nan"), 60, "untestable"),
])
def test_verdict_rule(ci_low, n, verdict):
    assert cv._verdict(ci_low, n) == verdict


def _values(position, share, warmth=None) -> pd.DataFrame:
    n = len(position)
    return pd.DataFrame({"occupation": [f"o{i}" for i in range(n)], "bls_pct_female": share,
                         "gender_position": position, "warmth": warmth if warmth is not None else np.nan,
                         "competence": np.nan})


def test_verdict_and_sentence_on_constructed_cases():
    rng = np.random.default_rng(3)
    share = rng.uniform(0, 100, 60)
    noise = rng.standard_normal(60)
    cases = {"tracks": share / 50 + noise, "against": -share / 50 + noise, "too few": (share / 50 + noise)}
    found = {}
    for name, position in cases.items():
        values = _values(position[:8] if name == "too few" else position, share[:8] if name == "too few" else share)
        stats = gd._validity_statistics(values, n_boot=300, seed=0)
        found[name] = (gd._direction_verdict(stats), gd.describe_validity(stats, "m"))
        rho = stats[(stats["measure"] == "gender_position") & (stats["test"] == "spearman")].iloc[0]
        assert found[name][0] == cv._verdict(rho["ci_low"], int(rho["n"]))
    assert found["tracks"][0] == "supported" and "the direction is validated for this model" in found["tracks"][1]
    assert found["against"][0] == "not shown"
    assert "the direction is not validated for this model" in found["against"][1]
    assert "*against* the share of women" in found["against"][1]
    assert found["too few"][0] == "untestable" and "not validated for this model" in found["too few"][1]
    assert "fewer than the 10" in found["too few"][1]


def test_statistics_equal_scipy_and_measures_without_values_give_no_rows():
    rng = np.random.default_rng(5)
    share = rng.uniform(0, 100, 40)
    position, warmth = share + rng.normal(0, 40, 40), rng.standard_normal(40)
    values = _values(position, share, warmth)
    values.loc[3, "gender_position"] = np.nan  # a noun the model could not embed is left out
    stats = gd._validity_statistics(values, n_boot=200, seed=1).set_index(["measure", "test"])
    assert set(stats.index) == {(m, t) for m in ("gender_position", "warmth") for t in ("pearson", "spearman")} | {
        ("gender_position", "partial_pearson"), ("gender_position", "partial_spearman")}
    keep = values["gender_position"].notna()
    rho, p = st.spearmanr(values.loc[keep, "gender_position"], share[keep])
    assert stats.loc[("gender_position", "spearman"), ["effect_size", "p", "n"]].tolist() == pytest.approx(
        [rho, p, 39], rel=1e-12)
    r, p = st.pearsonr(warmth, share)
    assert stats.loc[("warmth", "pearson"), ["effect_size", "p", "n"]].tolist() == pytest.approx([r, p, 40])
    for test in ("pearson", "spearman"):  # Holm over the measures within a test
        rows = stats.xs(test, level="test")
        assert rows["p_adj"].to_numpy() == pytest.approx(multipletests(rows["p"], method="holm")[1], rel=1e-12)
    assert stats.loc[("warmth", "spearman"), "verdict"] == ""
    assert stats.loc[("gender_position", "pearson"), "verdict"] == stats.loc[("gender_position", "spearman"),
                                                                             "verdict"]
    # the discriminant rows: beyond the one control with values (competence has none), independently by statsmodels'
    # least squares (the partial r's t-test is the slope's) and by ranking by hand for the partial Spearman ρ
    partial = stats.xs("partial_pearson", level="test").loc["gender_position"]
    assert partial["controls"] == "warmth" and partial["n"] == 39 and partial["df"] == 36
    t = values[keep]
    fit = sm.OLS(t["bls_pct_female"], sm.add_constant(t[["gender_position", "warmth"]])).fit()
    assert partial["p"] == pytest.approx(fit.pvalues["gender_position"], rel=1e-9)
    ranks = t[["gender_position", "bls_pct_female", "warmth"]].rank()
    resid = [sm.OLS(ranks[c], sm.add_constant(ranks["warmth"])).fit().resid for c in ("gender_position",
                                                                                       "bls_pct_female")]
    rho_partial = stats.xs("partial_spearman", level="test").loc["gender_position"]
    assert rho_partial["effect_size"] == pytest.approx(np.corrcoef(*resid)[0, 1], rel=1e-10)
    assert rho_partial["ci_low"] < rho_partial["effect_size"] < rho_partial["ci_high"]
    assert rho_partial["verdict"] == partial["verdict"] == cv._verdict(rho_partial["ci_low"], 39)
    assert cv._discriminant_verdict(stats.reset_index(), "gender_position") == rho_partial["verdict"]


def test_discriminant_row_separates_gender_from_warmth():
    """Constructed: a position that follows the share only through warmth is supported against the share but not
    beyond warmth (and the sentence says so); one with gender of its own is supported beyond it as well; without
    warmth and competence the discriminant rows are untestable."""
    rng = np.random.default_rng(11)
    share = rng.uniform(0, 100, 60)
    warmth = share / 25 + rng.standard_normal(60)
    through = warmth + 0.3 * rng.standard_normal(60)  # the share only through warmth
    own = warmth + share / 25 + rng.standard_normal(60)  # gender of its own beside warmth
    found = {}
    for name, position in (("through warmth", through), ("own", own)):
        stats = gd._validity_statistics(_values(position, share, warmth), n_boot=300, seed=0)
        found[name] = (gd._direction_verdict(stats), cv._discriminant_verdict(stats, "gender_position"),
                       gd.describe_validity(stats, "m"))
    assert found["through warmth"][:2] == ("supported", "not shown")
    assert "Beyond the nouns' warmth" in found["through warmth"][2] and "may be carried by warmth" in found[
        "through warmth"][2]
    assert found["own"][:2] == ("supported", "supported")
    alone = gd._validity_statistics(_values(own, share), n_boot=100, seed=0)
    assert cv._discriminant_verdict(alone, "gender_position") == "untestable"
    assert alone.loc[alone["test"] == "partial_spearman", "effect_size"].isna().all()
    assert "untestable here" in gd.describe_validity(alone, "m")


@pytest.mark.slow
def test_verdict_has_its_stated_false_positive_rate_and_power():
    """Simulation: 60 pairs from a bivariate normal, the rule on the interval ``validity_statistics`` reads
    (``stats.correlation_rows``). With no association the direction is called supported in about 2.5% of 200
    samples (one side of a 95% interval); at the Spearman ρ that ``detectable_correlation`` names for 60 nouns, in
    about 80% of them."""
    rng = np.random.default_rng(17)
    n, runs = 60, 200
    target = cv._detectable_correlation(n)
    assert 0.3 < target < 0.45
    rate = {}
    for rho_s in (0.0, target):
        r = 2 * np.sin(np.pi * rho_s / 6)  # the Pearson r of a bivariate normal with Spearman ρ rho_s
        hits = 0
        for i in range(runs):
            x = rng.standard_normal(n)
            y = r * x + np.sqrt(1 - r ** 2) * rng.standard_normal(n)
            [rho] = [row for row in correlation_rows(x, y, n_boot=200, seed=i) if row["test"] == "spearman"]
            hits += cv._verdict(rho["ci_low"], n) == "supported"
        rate[rho_s] = hits / runs
    assert rate[0.0] <= 0.05, rate
    assert 0.68 <= rate[target] <= 0.92, rate


# --------------------------------------------------------------------------- real model


@pytest.mark.slow
def test_bls_correlations_equal_scipy_on_the_real_table(smollm, smollm_quick_bases):
    check = gd.occupation_validity(smollm, smollm_quick_bases["warmth_competence"], n_boot=200, seed=0)
    values, stats = check.values, check.statistics
    rows = _tsv_rows()
    assert values["occupation"].tolist() == [r["occupation"] for r in rows]
    assert values["bls_pct_female"].tolist() == [float(r["bls_pct_female"]) for r in rows]
    assert (values["n_templates"] == 7).all() and check.skipped.empty
    by = stats.set_index(["measure", "test"])
    for measure in gd._MEASURES:
        rho, p = st.spearmanr(values[measure], values["bls_pct_female"])
        assert by.loc[(measure, "spearman"), "effect_size"] == pytest.approx(rho, abs=1e-12)
        assert by.loc[(measure, "spearman"), "p"] == pytest.approx(p, rel=1e-9)
        r, p = st.pearsonr(values[measure], values["bls_pct_female"])
        assert by.loc[(measure, "pearson"), "effect_size"] == pytest.approx(r, abs=1e-12)
        assert by.loc[(measure, "pearson"), "p"] == pytest.approx(p, rel=1e-9)
        assert by.loc[(measure, "spearman"), "n"] == 60
    rho = by.loc[("gender_position", "spearman")]
    assert check.verdict == ("supported" if rho["ci_low"] > 0 else "not shown")
    # independent: the position of one noun by hand, from the profiles' own embeddings of the same words (read from
    # the embedding cache the check wrote: the same float32 vectors), in float64 as the pipeline computes it
    emb = pr.population_embeddings(smollm, {"terms": load_populations("terms"), "o": {"o": ["nurse"]}},
                                   kind="noun")
    group = emb.words["group"].to_numpy()
    f, m = emb.values[group == "female"].astype(float).mean(0), emb.values[group == "male"].astype(float).mean(0)
    x = emb.values[group == "o"][0].astype(float)

    def by_hand(d):
        return np.mean([(x[i] - (f[i] + m[i]) / 2) @ d[i] / (d[i] @ d[i]) for i in range(x.shape[0])])

    # the bound: two float64 computations (the pipeline's einsums, this loop) of two sums over the hidden width (the
    # numerator and |d|^2) and a mean over layers: twice float32_bounds.float64_projection_tolerance of x - mid on
    # d / |d|^2, whose componentwise sums |x - mid|^T |d| count the cancellation in (x - mid) · d
    d = f - m
    unit = (d / (d * d).sum(-1, keepdims=True))[..., None]  # [layers, hidden, 1]
    tol = 2 * bounds.float64_projection_tolerance((x - (f + m) / 2)[None], unit).item()
    nurse = values.set_index("occupation").loc["nurse", "gender_position"]
    assert abs(nurse - by_hand(d)) <= tol
    # companion: the direction rotated by 1e-9 rad leaves the bound
    assert abs(nurse - by_hand(bounds.rotated(d, 1e-9))) > tol
    sentence = gd.describe_validity(stats, smollm.model_id)
    assert f"Spearman ρ = {rho['effect_size']:.2f}".replace("-", "−") in sentence and "n = 60 occupations" in sentence
    assert ("not validated for this model" in sentence) == (check.verdict != "supported")
    chart = gd.validity_chart(values, stats).to_dict()
    assert chart["layer"][0]["mark"]["type"] == "point" and "verdict" in chart["title"]["subtitle"][0]
    # a dictionary without warmth and competence: the direction alone, the same positions and verdict
    alone = gd.occupation_validity(smollm, None, n_boot=200, seed=0)
    assert set(alone.statistics["measure"]) == {"gender_position"} and alone.values["warmth"].isna().all()
    pd.testing.assert_series_equal(alone.values["gender_position"], values["gender_position"])
    assert alone.verdict == check.verdict


@pytest.mark.slow
def test_adding_occupations_leaves_the_other_populations_profiles_unchanged(smollm, smollm_quick_bases):
    """Chapter 04's default gained ``occupations``: every number of names, terms and non-binary terms (values,
    standardisation, tests with their Holm families, group means, the non-binary scale) is what it was."""
    before = pr.run_profiles(smollm, smollm_quick_bases, ("names", "terms", "nonbinary"), limit=12)
    after = pr.run_profiles(smollm, smollm_quick_bases, ("names", "terms", "nonbinary", "occupations"), limit=12)
    assert set(after.stats["population"]) == {"names", "terms", "occupations"}
    for field in ("values", "values_by_layer", "stats", "stats_by_layer", "means", "nonbinary"):
        old, new = getattr(before, field), getattr(after, field)
        new = new[new["population"] != "occupations"].reset_index(drop=True)
        pd.testing.assert_frame_equal(new, old.reset_index(drop=True), check_exact=True, obj=field)
    occ = after.stats[(after.stats["population"] == "occupations")]
    assert set(zip(occ["group_a"], occ["group_b"])) == {("female-majority", "male-majority")}
    assert set(occ["n_a"]) == {31} and set(occ["n_b"]) == {29}


def test_chapter_04_states_the_rule_the_code_applies():
    """The chapter's method section gives the verdict's threshold and the power as the code has them."""
    cells = json.loads((paths.ROOT / "notebooks" / "04_profiles.ipynb").read_text(encoding="utf-8"))["cells"]
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert f"fewer than {gd._MIN_NOUNS} nouns could be embedded" in text
    assert f"finds {int(gd.POWER * 100)}% of the time" in text
    assert "95% interval of Spearman's ρ between the position and the BLS share lies above 0" in text
