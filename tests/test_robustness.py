"""Robustness: the specification grid, the joint test, the tokenisation confound and the
per-model summary against independent computations (scipy, hand counts); slow checks on a
real MiniLM slice. The vectorised tests are in test_stats, the axis null in test_axis_validity."""

import math
import time

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from test_axis_validity import toy_space

from bias_utils.book import crossmodel
from bias_utils.core import tables
from bias_utils.core.errors import ParameterError
from bias_utils.core.stats import adjust_pvalues, hedges_g
from bias_utils.profiles import axis_validity as av
from bias_utils.profiles import robustness as rb
from bias_utils.profiles import tokenisation

# ----------------------------------------------------------------- choices

def test_template_sets_keep_the_word_off_position_zero():
    sets = rb._template_sets()
    assert sets["original"] == rb.DEFAULT_TEMPLATES and len(sets["original"]) == 7
    assert len(sets["not_first"]) == 5 and not any(t.startswith("{word}") for t in sets["not_first"])
    assert len(sets["lead_in"]) == 7 and all(t == rb._LEAD_IN + o for t, o in zip(sets["lead_in"], sets["original"]))
    with pytest.raises(ParameterError, match="not_first"):
        rb._template_sets(["{word} is here"])
    with pytest.raises(ParameterError, match="lead_in"):
        rb._template_sets(lead_in="{word} ")


def test_split_terms_is_deterministic_disjoint_and_balanced():
    from bias_utils.profiles.dictionaries import load_full_dictionary_terms

    terms = load_full_dictionary_terms()
    terms = terms[terms["dimension"].isin(["politics", "religion"])]
    a, b = rb._split_terms(terms, seed=0)
    a2, b2 = rb._split_terms(terms.sample(frac=1.0, random_state=3), seed=0)
    assert set(a["sense_id"]) == set(a2["sense_id"]) and set(b["sense_id"]) == set(b2["sense_id"])
    assert not set(a["sense_id"]) & set(b["sense_id"]) and len(a) + len(b) == len(terms)
    for key, n in terms.groupby(["dimension", "direction"]).size().items():
        na = int((a.set_index(["dimension", "direction"]).index == key).sum())
        assert na == math.ceil(n / 2)


# ----------------------------------------------------------------- the specification grid

def _inputs(V, y, dims=("warmth", "competence", "sociability"), spaces=("warmth_competence",) * 2 + ("dimensions",)):
    cells = pd.DataFrame({"context_source": ["generated", "none"][:V.shape[0]], "template_set": "original",
                          "layer_choice": "mean", "layer": "mean"})
    words = pd.DataFrame({"group": np.where(y, "female", "male"), "word": [f"w{i}" for i in range(len(y))]})
    return rb._CurveInputs(cells, {"names": V}, {"names": words}, {"names": ("female", "male")}, dims, spaces)


def test_curve_sources_come_from_the_registry_primary_first():
    from bias_utils.profiles import contexts

    assert rb._curve_sources() == ("generated", "dictionary", "corpus", "none")
    assert set(rb._curve_sources()) == set(contexts.source_names())
    assert rb._curve_sources(["none", "corpus"]) == ("none", "corpus")
    assert rb.headline_source({"none": 1, "generated": 2}) == "generated"
    assert rb.headline_source({"none": 1, "corpus": 2}) == "none"


def test_specification_grid_against_scipy_and_holm():
    rng = np.random.default_rng(5)
    y = np.array([True] * 6 + [False] * 7)
    V = rng.normal(size=(2, 13, 3))
    V[:, y, 0] += 3.0  # female warmer
    V[:, ~y, 1] += 3.0  # male more competent
    curve = rb.specification_curve(_inputs(V, y), n_permutations=20, n_perm_test=200)
    s = curve.specs
    assert len(s) == 2 * 3 * 3 and set(s["test_choice"]) == set(rb.TESTS)
    for c, src in enumerate(["generated", "none"]):
        welch = s[(s.context_source == src) & (s.test_choice == "welch")].set_index("dimension")
        student = s[(s.context_source == src) & (s.test_choice == "student")].set_index("dimension")
        p_w = [sps.ttest_ind(V[c, y, d], V[c, ~y, d], equal_var=False).pvalue for d in range(3)]
        p_s = [sps.ttest_ind(V[c, y, d], V[c, ~y, d]).pvalue for d in range(3)]
        np.testing.assert_allclose(welch.loc[["warmth", "competence", "sociability"], "p"], p_w, rtol=1e-9)
        # Holm within a space: warmth and competence together, sociability alone
        np.testing.assert_allclose(welch.loc[["warmth", "competence"], "p_adj"], adjust_pvalues(p_w[:2]), rtol=1e-9)
        np.testing.assert_allclose(welch.loc["sociability", "p_adj"], p_w[2], rtol=1e-9)
        np.testing.assert_allclose(student.loc[["warmth", "competence"], "p_adj"], adjust_pvalues(p_s[:2]), rtol=1e-9)
        g = hedges_g(V[c, y, 0], V[c, ~y, 0])
        assert welch.loc["warmth", "effect_size"] == pytest.approx(g["effect_size"])
    # agreement counted by hand: expected sign and significant after correction
    for dim, sign in (("warmth", 1), ("competence", -1)):
        d = s[s.dimension == dim]
        hand = ((np.sign(d["effect_size"]) == sign) & (d["p_adj"] < 0.05)).mean()
        row = curve.summary.set_index("dimension").loc[dim]
        assert row["share_agree_significant"] == pytest.approx(hand) and hand > 0.5
        assert row["n_agree_significant"] == ((np.sign(d["effect_size"]) == sign) & (d["p_adj"] < 0.05)).sum()
        assert row["n_agree_significant_p"] <= 1 / 21 + 1e-12  # no relabelling beats a clear effect


@pytest.mark.slow
def test_joint_test_p_is_uniform_under_the_null():
    """No group difference at all: over repetitions the joint test's p must look uniform (KS)."""
    ps = {k: [] for k in rb._JOINT_STATISTICS}
    for rep in range(100):
        rng = np.random.default_rng(100 + rep)
        y = rng.permutation(np.array([True] * 10 + [False] * 10))
        base = rng.normal(size=(20, 3))
        # two correlated specifications of the same words, as a curve has
        V = np.stack([base + 0.5 * rng.normal(size=(20, 3)) for _ in range(2)])
        curve = rb.specification_curve(_inputs(V[:2], y), n_permutations=200, n_perm_test=200, seed=rep)
        row = curve.summary.set_index("dimension").loc["warmth"]
        for k in rb._JOINT_STATISTICS:
            ps[k].append(row[f"{k}_p"])
    # the median effect is continuous: its p is uniform on (0, 1]
    assert sps.kstest(ps["median_effect"], "uniform").pvalue > 0.01
    # the count is mostly 0 under the null (p = 1): it must never reject more often than alpha
    assert np.mean(np.array(ps["n_agree_significant"]) < 0.05) <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 100)


# ----------------------------------------------------------------- regression and tokens

def test_token_regression_and_verdict_on_a_confounded_slice():
    """A gap that is entirely a token-count effect must not survive the control."""
    rng = np.random.default_rng(9)
    n = 60
    female = np.arange(n) < n // 2
    tokens = np.where(female, rng.choice([2, 3], n), rng.choice([1, 2], n))
    z = 1.0 * tokens + 0.3 * rng.normal(size=n)
    words = pd.DataFrame({"population": "names", "group": np.where(female, "female", "male"),
                          "word": [f"w{i}" for i in range(n)]})
    values = words.assign(dimension="warmth", z=z)
    reg = tokenisation.token_regression(values, words.assign(n_tokens=tokens))
    g = reg[(reg.model == "gender") & (reg.term == "female")].iloc[0]
    c = reg[(reg.model == "gender + tokens") & (reg.term == "female")].iloc[0]
    assert g["p"] < 1e-4 and c["p"] > 0.01
    assert g["coef"] == pytest.approx(z[female].mean() - z[~female].mean())
    summary = pd.DataFrame([{"population": "names", "dimension": "warmth", "share_agree_significant": 0.5,
                             "n_specs": 4, "n_agree_significant_p": 1 / 201, "n_permutations": 200}])
    gaps = pd.DataFrame([{"population": "names", "dimension": "warmth", "template_set": t, "effect_size": 1.0,
                          "ci_low": 0.5, "ci_high": 1.5, "p": 0.001, "p_adj": 0.002} for t in ("not_first", "lead_in")])
    text = rb.name_gap_verdict(summary, reg, gaps, dimensions=["warmth"])
    assert "does not survive" in text and "50% of 4 specifications" in text and "joint test p ≤ 1/201" in text
    # the same gap among words that all take one token: nothing to control, the gap survives
    reg1 = tokenisation.token_regression(values.assign(z=z - tokens + 3.0 * female), words.assign(n_tokens=1))
    assert set(reg1["model"]) == {"gender", "one-token words"}
    text = rb.name_gap_verdict(summary, reg1, gaps, dimensions=["warmth"])
    assert "same number of tokens" in text and "the gap survives" in text and "not read" not in text
    reading = "not shown to beat its null (AUC 0.58, p = 0.21; n 40 high / 12 low; detectable AUC 0.71)"
    failed = rb.name_gap_verdict(summary.assign(axis_verdict="not shown", axis_reading=reading), reg1, gaps,
                                 dimensions=["warmth"])
    assert f"the gap survives the controls, but its axis is {reading}, so the gap is not read" in failed


# ----------------------------------------------------------------- real model, small slice

@pytest.mark.slow
def test_curve_inputs_match_the_profile_pipeline_minilm():
    from bias_utils.models.embeddings import embed_words
    from bias_utils.models.loading import load_model
    from bias_utils.profiles import dictionaries
    from bias_utils.profiles import population_profiles as profiles

    m = load_model("minilm-l6")
    inputs, extras = rb.collect_curve_inputs(m, dictionaries.load_dictionary(), ("names", "terms"),
                                             sources=("generated", "none"), limit=6, term_limit=3)
    assert len(inputs.cells) == 2 * 3 * 4 and inputs.values["names"].shape[1:] == (12, 9)
    curve = rb.specification_curve(inputs, n_permutations=20, n_perm_test=200)
    # the default cell equals notebook 04's statistics on the same space and embeddings
    sp = extras["spaces"]["generated"]
    pe = extras["population_embeddings"]["original"]
    stats = profiles.profile_stats(profiles.profile_table(pe, sp.bases, "mean"), populations=["names"])
    ours = curve.specs[(curve.specs.context_source == "generated") & (curve.specs.template_set == "original")
                       & (curve.specs.layer_choice == "mean") & (curve.specs.test_choice == "welch")
                       & (curve.specs.population == "names")].set_index("dimension")
    theirs = stats.set_index("dimension")
    for col_ours, col_theirs in (("effect_size", "g"), ("p", "p"), ("p_adj", "p_holm"), ("diff", "diff")):
        np.testing.assert_allclose(ours.loc[theirs.index, col_ours], theirs[col_theirs], rtol=1e-5, atol=1e-9)
    # the axis null's observed raw accuracy is Table 2's raw accuracy (space.direction_prediction)
    from bias_utils.profiles.space import direction_prediction

    null = av.validity_table(sp, extras["terms"], n_permutations=20)
    for d in range(7):  # the null's Gram solve reproduces polar_basis's pseudo-inverse on real directions
        np.testing.assert_allclose(av._pinv_row(sp.bases["dimensions"].directions, d),
                                   sp.bases["dimensions"].pinv[:, d],
                                   rtol=1e-8, atol=1e-12)
    acc = direction_prediction(m, sp, extras["term_table"], layer="all", n_boot=10, term_contexts="dictionary").accuracy
    acc = acc[acc.cutoff == "raw"].assign(layer=lambda a: a["layer"].astype(str)).set_index(["dimension", "layer"])
    merged = null.set_index(["dimension", "layer"]).join(acc["accuracy"], how="inner")
    assert len(merged) == 9 * (m.n_layers + 1)
    np.testing.assert_allclose(merged["raw_accuracy"], merged["accuracy"])
    # the chapters' own check (03, 04) sees the same terms, so it is the same null
    validity = av.axis_validity(m, sp, limit=3, n_permutations=20, term_contexts="dictionary")
    assert (validity.pop("term_contexts") == "dictionary").all()
    pd.testing.assert_frame_equal(validity, null)
    # chapter 10's null over every source is each source's null, stacked in the curve's order
    by_source, seconds = av.validity_by_source(m, extras["spaces"], limit=3, n_permutations=20,
                                               term_contexts="dictionary")
    assert list(dict.fromkeys(by_source["context_source"])) == ["generated", "none"] and seconds > 0
    pd.testing.assert_frame_equal(by_source[by_source.context_source == "generated"].drop(columns="term_contexts"),
                                  null)
    assert av.validity_layer(sp, "last") == str(m.n_layers) and av.validity_layer(sp, 2) == "2"
    # token counts agree with the embedding module's own count
    tok = tokenisation.token_table(m, inputs.words["names"].assign(population="names"))
    emb = embed_words(m, tok["context"].tolist(), tok["word"].tolist())
    np.testing.assert_array_equal(tok["n_tokens"], emb.n_tokens)


# ----------------------------------------------------------------- charts

def test_specification_curve_and_axis_validity_charts(tmp_path):
    import json

    from bias_utils.report import plots

    rng = np.random.default_rng(5)
    y = np.array([True] * 6 + [False] * 7)
    V = rng.normal(size=(2, 13, 3))
    V[0, y, 0] += 3.0  # one context source shows the gap, the other does not
    curve = rb.specification_curve(_inputs(V, y), n_permutations=20, n_perm_test=200)
    chart = plots.specification_curve_chart(curve.specs, "names", "warmth")
    spec = json.loads(chart.to_json())
    datasets = list(spec["datasets"].values())
    points = max(datasets, key=lambda d: len(d) if d and "effect_size" in d[0] else 0)
    assert [p["effect_size"] for p in points] == sorted(p["effect_size"] for p in points) and len(points) == 6
    matrix = next(d for d in datasets if d and "choice" in d[0])
    assert len(matrix) == 6 * len(plots._SPEC_CHOICES)
    assert {p["status"] for p in points} >= {"agrees, significant", "not significant"}
    assert plots.save(chart, tmp_path / "curve")["svg"].stat().st_size > 0

    space, terms = toy_space(np.random.default_rng(8))
    validity = av.validity_table(space, terms, n_permutations=20)
    spec = json.loads(plots.axis_validity_chart(validity).to_json())
    shown = next(iter(spec["datasets"].values()))
    assert "mean" not in {str(r["layer"]) for r in shown} and len(shown) == len(validity[validity.layer != "mean"])
    with pytest.raises(ValueError, match="context_source"):
        plots.axis_validity_chart(pd.concat([validity, validity.assign(context_source="none")]))


# ----------------------------------------------------------------- per model and across models

def test_summary_and_cross_model_table(tmp_path):
    from bias_utils.core.results import write_table

    rng = np.random.default_rng(5)
    y = np.array([True] * 6 + [False] * 7)
    V = rng.normal(size=(2, 13, 3))
    V[:, y, 0] += 3.0
    curve = rb.specification_curve(_inputs(V, y), n_permutations=20, n_perm_test=200)
    space, terms = toy_space(np.random.default_rng(8), n_terms=10)
    validity = av.validity_table(space, terms, n_permutations=20)
    summary = rb.robustness_summary(curve, validity, "toy")
    head = validity[(validity.layer == "mean")].set_index("dimension")
    for r in summary.itertuples():
        if r.dimension in head.index:
            assert r.axis_verdict == head.loc[r.dimension, "verdict"] and r.axis_auc == head.loc[r.dimension, "auc"]
            assert r.axis_reading == av.verdict_phrase(head.loc[r.dimension])
            single = validity[(validity.dimension == r.dimension) & (validity.layer != "mean")]
            assert r.share_layers_supported == pytest.approx((single["verdict"] == "supported").mean())
        else:  # the toy space has no such axis: unknown, not a verdict
            assert pd.isna(r.axis_verdict)
    timing = rb.timing_table(_inputs(V, y), curve, 1.5, time.perf_counter() - 10)
    assert timing["step"].tolist()[-3:] == ["curve_and_joint_test", "axis_validity", "total"]
    assert timing.set_index("step").loc["axis_validity", "seconds"] == 1.5 and timing["seconds"].iloc[-1] >= 10
    write_table(summary, tmp_path / "model-a" / tables.NAMES.ROBUSTNESS_SUMMARY)
    write_table(summary.assign(share_agree_significant=0.0), tmp_path / "model-b" / tables.NAMES.ROBUSTNESS_SUMMARY)
    table, skipped = crossmodel.cross_model_summary(["model-a", "model-b", "model-c"], tmp_path)
    assert list(table["model_id"].unique()) == ["model-a", "model-b"] and list(skipped["model_id"]) == ["model-c"]
    a = table[(table.model_id == "model-a") & (table.dimension == "warmth")].iloc[0]
    assert a["share_agree_significant"] == pytest.approx(
        curve.summary.set_index("dimension").loc["warmth", "share_agree_significant"])
