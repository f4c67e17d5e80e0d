"""Profiles: templates, standardisation and the group statistics against independent
computations (numpy, scipy, pingouin, hand formulas); one slow end-to-end run."""

import math

import float32_bounds as bounds
import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from scipy import stats as sps

from bias_utils.core.errors import ParameterError
from bias_utils.models.embeddings import embed_words, find_word, token_indices
from bias_utils.models.loading import load_model
from bias_utils.profiles import dictionaries, space
from bias_utils.profiles import population_profiles as pr
from bias_utils.profiles.populations import load_populations, takes_article


@pytest.fixture(scope="module")
def names():
    return load_populations("names")


@pytest.fixture(scope="module")
def terms():
    return load_populations("terms")


# ----------------------------------------------------------------- templates

def test_default_templates_are_the_original_seven():
    assert [t.replace("{word}", "X") for t in pr.DEFAULT_TEMPLATES] == [
        "this is X", "that is X", "there is X", "the person is X", "here is X", "X is here", "X is there"]


def _sentences(pop, word):
    pops, kinds = pr._resolve_populations(pop)
    return [pr.fill_template(t, word, takes_article(word, kinds[pop])) for t in pr.DEFAULT_TEMPLATES]


def test_article_rule_names_nouns_pronouns():
    assert _sentences("names", "Mary") == [
        "this is Mary", "that is Mary", "there is Mary", "the person is Mary", "here is Mary",
        "Mary is here", "Mary is there"]
    assert _sentences("terms", "woman") == [
        "this is the woman", "that is the woman", "there is the woman", "the person is the woman",
        "here is the woman", "the woman is here", "the woman is there"]
    assert _sentences("terms", "she")[0] == "this is she" and _sentences("terms", "he")[-1] == "he is there"
    pops, kinds = pr._resolve_populations(["terms", "nonbinary"])
    with_article = {w for g in pops["terms"].values() for w in g if takes_article(w, kinds["terms"])}
    assert with_article == set(pops["terms"]["female"] + pops["terms"]["male"]) - {"she", "he"}
    assert _sentences("nonbinary", "nonbinary")[5] == "the nonbinary is here"


def test_kind_override_and_custom_templates():
    pops, kinds = pr._resolve_populations({"names": {"f": ["Mary"], "m": ["John"]}, "mine": {"a": ["x"]}})
    assert kinds == {"names": "name", "mine": "noun"}
    assert pr._resolve_populations("terms", kind="name")[1] == {"terms": "name"}
    with pytest.raises(ParameterError, match="kind"):
        pr._resolve_populations("terms", kind="people")
    assert pr.check_templates(["my friend {word} smiled"]) == ("my friend {word} smiled",)
    assert pr.fill_template("my friend {word} smiled", "sister", True) == "my friend the sister smiled"
    for bad in (["this is X"], ["{word} and {word}"], [], "this is {word}", ["a {word}", "a {word}"]):
        with pytest.raises(ParameterError):
            pr.check_templates(bad)


def test_limit_populations_keeps_terms_whole(names, terms):
    pops = {"names": names, "terms": terms}
    out = pr._limit_populations(pops, 5)
    assert [len(v) for v in out["names"].values()] == [5, 5]
    assert out["names"]["male"] == names["male"][:5]
    assert out["terms"] == terms
    with pytest.raises(ParameterError):
        pr._limit_populations(pops, 1)


# ----------------------------------------------------------------- standardisation

def _table(names, terms, seed=0, shift=0.4):
    """A profile-shaped table with the real words and seeded values; the female
    group is shifted up on 'warmth' so there is something to find."""
    rng = np.random.default_rng(seed)
    rows = []
    for pop, groups in (("names", names), ("terms", terms)):
        for gi, (group, words) in enumerate(groups.items()):
            for w in words:
                for dim in ("warmth", "competence"):
                    v = rng.normal(2.0 if pop == "names" else -1.0, 0.5 if pop == "names" else 2.0)
                    if dim == "warmth" and gi == 0:
                        v += shift
                    rows.append((pop, group, w, "x", "warmth_competence", "mean", dim, v))
    return pd.DataFrame(rows, columns=["population", "group", "word", "kind", "space", "layer", "dimension", "value"])


def test_standardise_matches_numpy_per_population(names, terms):
    t = pr._standardise(_table(names, terms))
    for (pop, dim), d in t.groupby(["population", "dimension"]):
        v = d["value"].to_numpy()
        np.testing.assert_allclose(d["z"].to_numpy(), (v - v.mean()) / v.std(ddof=0), rtol=1e-12)
        assert abs(d["z"].mean()) < 1e-12 and math.isclose(d["z"].std(ddof=0), 1.0)


def test_standardise_against_reference(names, terms):
    tab = _table(names, terms)
    nb = tab[tab["population"] == "terms"].head(6).assign(population="nonbinary", group="nb")
    t = pr._standardise(pd.concat([tab, nb], ignore_index=True), {"nonbinary": "terms"})
    for dim in ("warmth", "competence"):
        ref = tab[(tab["population"] == "terms") & (tab["dimension"] == dim)]["value"].to_numpy()
        got = t[(t["population"] == "nonbinary") & (t["dimension"] == dim)]
        np.testing.assert_allclose(got["z"], (got["value"] - ref.mean()) / ref.std(ddof=0), rtol=1e-12)
    with pytest.raises(ParameterError, match="not profiled"):
        pr._standardise(tab, {"nonbinary": "other"} | {"names": "missing"})


def test_standardise_zero_variance_is_an_error(names, terms):
    tab = _table(names, terms).assign(value=1.0)
    with pytest.raises(ParameterError, match="standard deviation"):
        pr._standardise(tab)


# ----------------------------------------------------------------- statistics

def _hedges_g_by_hand(a, b):
    na, nb = len(a), len(b)
    sp = math.sqrt(((na - 1) * np.var(a, ddof=1) + (nb - 1) * np.var(b, ddof=1)) / (na + nb - 2))
    d = (np.mean(a) - np.mean(b)) / sp
    j = 1 - 3 / (4 * (na + nb) - 9)
    se = math.sqrt((na + nb) / (na * nb) + d**2 / (2 * (na + nb)))
    return d * j, (d - 1.959963984540054 * se) * j, (d + 1.959963984540054 * se) * j


def test_profile_stats_against_scipy_and_hand(names, terms):
    tab = pr._standardise(_table(names, terms))
    st = pr.profile_stats(tab)
    assert set(pr._PROFILE_STATS_COLUMNS) <= set(st.columns)
    assert len(st) == 4 and not st.duplicated(["population", "dimension"]).any()
    for r in st.itertuples():
        d = tab[(tab.population == r.population) & (tab.dimension == r.dimension)]
        a = d[d.group == r.group_a]["z"].to_numpy()
        b = d[d.group == r.group_b]["z"].to_numpy()
        w = sps.ttest_ind(a, b, equal_var=False)
        s = sps.ttest_ind(a, b, equal_var=True)
        assert math.isclose(r.t, w.statistic, rel_tol=1e-10) and math.isclose(r.p, w.pvalue, rel_tol=1e-9)
        assert math.isclose(r.t_student, s.statistic, rel_tol=1e-10)
        assert math.isclose(r.p_student, s.pvalue, rel_tol=1e-9)
        assert r.df_student == len(a) + len(b) - 2
        assert math.isclose(r.sd_a, np.std(a), rel_tol=1e-12) and math.isclose(r.mean_b, b.mean(), rel_tol=1e-12)
        g, lo, hi = _hedges_g_by_hand(a, b)
        assert math.isclose(r.g, g, rel_tol=1e-10)
        assert math.isclose(r.g_ci_low, lo, rel_tol=1e-9) and math.isclose(r.g_ci_high, hi, rel_tol=1e-9)
    # Holm within each population's family of dimensions (pingouin implements it independently)
    for _, fam in st.groupby("population"):
        np.testing.assert_allclose(fam["p_holm"], pg.multicomp(fam["p"].to_numpy(), method="holm")[1])
        np.testing.assert_allclose(fam["p_student_holm"],
                                   pg.multicomp(fam["p_student"].to_numpy(), method="holm")[1])
    names_warmth = st[(st.population == "names") & (st.dimension == "warmth")].iloc[0]
    assert names_warmth.group_a == "female" and names_warmth["diff"] > 0


def test_standardising_does_not_change_the_tests(names, terms):
    tab = pr._standardise(_table(names, terms))
    on_z, on_raw = pr.profile_stats(tab), pr.profile_stats(tab, value="value")
    for col in ("t", "p", "t_student", "p_student", "g"):
        np.testing.assert_allclose(on_z[col], on_raw[col], rtol=1e-9)


def test_more_than_two_groups_path(names):
    rng = np.random.default_rng(3)
    groups = {"a": names["female"][:20], "b": names["male"][:20], "c": names["female"][20:45]}
    rows = [("p", g, w, "name", "dimensions", "mean", dim, rng.normal(0.8 if (g == "c" and dim == "status") else 0, 1))
            for g, ws in groups.items() for w in ws for dim in ("status", "politics")]
    tab = pr._standardise(pd.DataFrame(rows, columns=["population", "group", "word", "kind", "space",
                                                     "layer", "dimension", "value"]))
    st = pr.profile_stats(tab)
    assert len(st) == 2 * 3 and set(zip(st.group_a, st.group_b)) == {("a", "b"), ("a", "c"), ("b", "c")}
    np.testing.assert_allclose(st["p_holm"], pg.multicomp(st["p"].to_numpy(), method="holm")[1])
    an = pr._profile_anova(tab)
    assert len(an) == 2
    for r in an.itertuples():
        d = tab[tab.dimension == r.dimension]
        ref = pg.welch_anova(data=d, dv="z", between="group").iloc[0]
        assert math.isclose(r.statistic, ref["F"], rel_tol=1e-10)
        assert r.effect == "eta_squared" and r.ci_low <= r.effect_size <= r.ci_high
    np.testing.assert_allclose(an["p_adj"], pg.multicomp(an["p"].to_numpy(), method="holm")[1])
    assert pr._profile_anova(pr._standardise(_table(names, names))).empty


def test_group_means_and_nonbinary_table(names, terms):
    tab = _table(names, terms)
    nb = tab[tab["word"].isin(["woman", "man", "he"])].assign(population="nonbinary", group="non-binary")
    t = pr._standardise(pd.concat([tab, nb], ignore_index=True), {"nonbinary": "terms"})
    gm = pr._group_means(t)
    r = gm[(gm.population == "names") & (gm.group == "male") & (gm.dimension == "warmth")].iloc[0]
    v = t[(t.population == "names") & (t.group == "male") & (t.dimension == "warmth")]["z"].to_numpy()
    lo, hi = sps.t.interval(0.95, len(v) - 1, loc=v.mean(), scale=sps.sem(v))
    assert math.isclose(r.ci_low, lo, rel_tol=1e-9) and math.isclose(r.ci_high, hi, rel_tol=1e-9)
    nbt = pr._nonbinary_table(t)
    assert set(nbt["series"]) == {"term", "group mean"}
    assert len(nbt[nbt.series == "term"]) == 3 * 2
    assert set(nbt[nbt.series == "group mean"]["group"]) == {"female", "male"}
    assert "nonbinary" not in set(pr.profile_stats(t)["population"])
    with pytest.raises(ParameterError):
        pr._nonbinary_table(t, population="absent")


def test_word_summary_by_hand():
    words = pd.DataFrame({"population": ["terms"] * 3 + ["names"] * 2, "group": ["f", "f", "m", "f", "m"],
                          "word": ["woman", "she", "man", "Mary", "John"], "article": [True, False, True, False, False],
                          "n_templates": [7, 5, 7, 7, 6]})
    got = pr.word_summary(words)
    assert got.loc[("terms", "f")].tolist() == [2, 0.5, 5]
    assert got.loc[("names", "m")].tolist() == [1, 0.0, 6]
    assert len(got) == 4
    shown = pr.word_summary(words, "This is {word}.")["example"]
    assert shown.loc[("terms", "f")] == "This is the woman." and shown.loc[("names", "m")] == "This is John."


def test_share_below_group_means_by_hand():
    # two reference means per dimension; terms at, above and below the lower one
    rows = [("group mean", "female", "", "warmth", 0.5), ("group mean", "male", "", "warmth", -0.2),
            ("group mean", "female", "", "competence", -0.1), ("group mean", "male", "", "competence", 0.3),
            ("term", "nb", "a", "warmth", -0.3), ("term", "nb", "b", "warmth", -0.2),
            ("term", "nb", "c", "warmth", 0.0), ("term", "nb", "a", "competence", -0.5),
            ("term", "nb", "b", "competence", -0.2), ("term", "nb", "c", "competence", 0.4)]
    nb = pd.DataFrame(rows, columns=["series", "group", "word", "dimension", "z"]).assign(space="warmth_competence")
    got = pr.share_below_group_means(nb).set_index("dimension")
    # warmth: only a (-0.3) is below min(0.5, -0.2); b equals it (not below). competence: a and b below -0.1
    assert got.loc["warmth", "n_below"] == 1 and got.loc["competence", "n_below"] == 2
    assert got.loc["warmth", "share_below"] == pytest.approx(1 / 3)
    assert got.loc["competence", "share_below"] == pytest.approx(2 / 3)
    assert (got["n_terms"] == 3).all()
    with pytest.raises(ParameterError, match="dimensions"):
        pr.share_below_group_means(nb, "dimensions")


def test_describe_stats_reads_direction(names, terms):
    st = pr.profile_stats(pr._standardise(_table(names, terms, shift=1.0)))
    line = pr._describe_stats(st, ["warmth"])[0]
    assert line.startswith("names: female higher than male on warmth")
    unread = pr._describe_stats(st, ["warmth"], invalid_axes=["warmth"])[0]
    assert unread.startswith("names: warmth not read, its axis") and "higher" not in unread


def test_paper_finding_checks_direction_and_significance(names, terms):
    t = _table(names, terms, shift=1.0)  # female names up on warmth
    t.loc[(t.group == "male") & (t.dimension == "competence"), "value"] += 1.0  # male names up on competence
    z = pr._standardise(t)
    f = pr.paper_finding(pr.profile_stats(z)).set_index("dimension")
    assert f.loc["warmth", "holds"] and f.loc["competence", "holds"]
    for dim in ("warmth", "competence"):  # female minus male of the standardised values, computed directly
        d = z[(z.population == "names") & (z.dimension == dim)]
        assert f.loc[dim, "diff"] == pytest.approx(d[d.group == "female"].z.mean() - d[d.group == "male"].z.mean())
    assert f.loc["warmth", "g"] > 0 > f.loc["competence", "g"]
    swapped = t.assign(group=t["group"].map({"female": "male", "male": "female"}))
    assert not pr.paper_finding(pr.profile_stats(pr._standardise(swapped)))["holds"].any()
    sentence = pr.paper_finding_sentence(f.reset_index(), invalid_axes=["competence"])
    assert "female names higher on warmth: yes" in sentence and "male names higher on competence: yes" in sentence
    flag = "not shown to beat its label-shuffling null"
    assert sentence.count(flag) == 1 and sentence.index("competence") < sentence.index(flag)
    reading = {"competence": "untestable (3 covered low-pole terms; 10 per pole needed)"}
    assert f"its axis is {reading['competence']}, so" in pr.paper_finding_sentence(f.reset_index(), reading)
    assert pr.paper_finding_sentence(pr.paper_finding(pr.profile_stats(pr._standardise(swapped)))).count(": no") == 2
    text = pr.describe_profile(pr.profile_stats(z))
    assert text.splitlines()[0].startswith("- names: female higher than male on warmth")


# ----------------------------------------------------------------- real model, small slice

def _word_tolerance(model, context: str, word: str) -> np.ndarray:
    """Per element ``[layers, hidden]``: how far two float32 computations of ``word``'s mean state in ``context`` may
    differ (``float32_bounds.pooled_state_tolerance`` of its tokens' states, from a forward pass of the context)."""
    offsets = model.tokenizer(context, return_offsets_mapping=True)["offset_mapping"]
    tokens, n_tokens = bounds.token_states(model, context, token_indices(offsets, find_word(context, word)))
    return bounds.pooled_state_tolerance(tokens, model, n_tokens)


@pytest.mark.slow
def test_end_to_end_minilm_small_slice(tmp_path):
    m = load_model("minilm-l6")
    sp = space.build_space(m, dictionaries.load_dictionary(), "none", n_contexts=1, seed=0)
    res = pr.run_profiles(m, sp.bases, ["names", "terms"], limit=5)
    res.write(tmp_path)
    st = pd.read_csv(tmp_path / "profile_stats.csv")
    assert len(st) == 2 * 9 and not st.duplicated(["population", "dimension"]).any()
    assert set(st["n_a"]) == {5, 9} and st[["t", "p", "p_holm", "g", "g_ci_low", "g_ci_high"]].notna().all().all()
    assert len(pd.read_parquet(tmp_path / "profile_stats_by_layer.parquet")) == 2 * 9 * (m.n_layers + 1)

    # the template average is the plain mean of the word's embeddings in the seven sentences
    sentences = ["this is the woman", "that is the woman", "there is the woman", "the person is the woman",
                 "here is the woman", "the woman is here", "the woman is there"]
    per_template = embed_words(m, sentences, ["woman"] * 7).values
    direct = per_template.mean(axis=0)
    row = res.embeddings.words.index[res.embeddings.words["word"] == "woman"][0]
    # two float32 computations of each template's word state (float32_bounds.pooled_state_tolerance of the word's
    # tokens' states there, each 2 sqrt(N_l + 1) u ||h_l||) and of the float32 mean of the seven (mean_tolerance)
    tol = np.mean([_word_tolerance(m, s, "woman") for s in sentences], axis=0) + bounds.mean_tolerance(per_template)
    assert bounds.bound_ratio(res.embeddings.values[row], direct, tol) <= 1
    # companion: with the first block's MLP output matrix scaled by 1.001 the template mean leaves the bound
    with bounds.scaled(bounds.first_mlp_output(m).weight, 1.001):
        changed = embed_words(m, sentences, ["woman"] * 7, cache=False, progress=False).values.mean(axis=0)
    assert bounds.bound_ratio(changed, direct, tol) > 1
    assert res.embeddings.words.loc[row, "n_templates"] == 7

    # headline = mean over layers of the per-layer projections, then standardised
    by_layer = res.values_by_layer
    raw = (by_layer[(by_layer.population == "names") & (by_layer.dimension == "warmth")]
           .groupby("word", sort=False)["value"].mean())
    head = res.values[(res.values.population == "names") & (res.values.dimension == "warmth")].set_index("word")
    np.testing.assert_allclose(head.loc[raw.index, "value"], raw.to_numpy(), rtol=1e-9)
