"""Cross-model tables and the projection of a model's own completions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats as st

from bias_utils import bold, crossmodel, space


@pytest.fixture(scope="module")
def smollm():
    from bias_utils.models import load_model

    return load_model("smollm2-135m-instruct")


@pytest.fixture(scope="module")
def published():
    """Three published completions per group, plus one empty completion (a recorded skip)."""
    c = bold.load_published_completions()
    rows = pd.concat([c[c.group == g].head(3) for g in (crossmodel.MALE_GROUP, crossmodel.FEMALE_GROUP)])
    empty = rows.iloc[[0]].assign(completion="")
    return pd.concat([rows, empty], ignore_index=True)[["group", "occupation", "prompt", "completion"]]


@pytest.mark.slow
def test_completion_embedding_is_mean_hidden_state_over_completion_tokens(smollm, published):
    values, layers, skipped = crossmodel.completion_embeddings(smollm, published)
    assert values.shape == (len(published), smollm.n_layers + 1, smollm.hidden_size)
    assert skipped["reason"].str.contains("empty").tolist() == [True]
    assert np.isnan(values[-1]).all()

    # independent: run the backbone directly and average the states of the completion's tokens
    row = published.iloc[1]
    text = row.prompt.rstrip() + " " + row.completion.strip()
    start = len(row.prompt.rstrip()) + 1
    enc = smollm.tokenizer(text, return_offsets_mapping=True, return_tensors="pt")
    offsets = enc.pop("offset_mapping")[0].tolist()
    with torch.no_grad():
        hidden = smollm.backbone()(**enc.to(smollm.device), output_hidden_states=True).hidden_states
    idx = [i for i, (s, e) in enumerate(offsets) if e > s and e > start]
    direct = np.stack([h[0, idx].float().mean(0).cpu().numpy() for h in hidden])
    np.testing.assert_allclose(values[1], direct, rtol=1e-3, atol=1e-3)


@pytest.mark.slow
def test_completion_projection_and_stats_match_numpy_and_scipy(smollm, published):
    dictionary = space.load_dictionary(None)
    small = dictionary[dictionary.dimension.isin(["sociability", "morality", "ability", "agency"])]
    small = small.groupby(["dimension", "direction"]).head(2)
    sp = space.build_space(smollm, small, "dictionary", n_contexts=2, seed=0)
    basis = sp.bases["warmth_competence"]
    values, _, _ = crossmodel.completion_embeddings(smollm, published)
    table = crossmodel.completion_projection(basis, values, published, layer="mean")

    kept = ~np.isnan(values).any(axis=(1, 2))
    direct = np.mean([values[kept][:, layer] @ basis.pinv[layer].T for layer in range(len(basis.layers))], axis=0)
    wide = table.pivot_table(index=table.index // len(basis.dimensions), columns="dimension", values="value")
    for j, dim in enumerate(basis.dimensions):
        np.testing.assert_allclose(wide[dim].to_numpy(), direct[:, j], rtol=1e-5, atol=1e-6)
        z = (direct[:, j] - direct[:, j].mean()) / direct[:, j].std()
        np.testing.assert_allclose(table.loc[table.dimension == dim, "z"].to_numpy(), z, rtol=1e-5, atol=1e-6)

    result = crossmodel.completion_projection_stats(table)
    for dim in basis.dimensions:
        d = table[table.dimension == dim]
        ref = st.ttest_ind(d.loc[d.group == crossmodel.FEMALE_GROUP, "z"], d.loc[d.group == crossmodel.MALE_GROUP, "z"],
                           equal_var=False)
        row = result[(result.dimension == dim) & (result.test == "welch_t")].iloc[0]
        assert row.statistic == pytest.approx(ref.statistic, rel=1e-9)
        assert row.p == pytest.approx(ref.pvalue, rel=1e-9)
    p = result[result.test == "welch_t"]["p"].to_numpy()
    holm = np.minimum(1, np.maximum.accumulate(np.sort(p) * np.arange(len(p), 0, -1)))
    assert sorted(result[result.test == "welch_t"]["p_adj"]) == pytest.approx(sorted(holm))


def test_completion_projection_requires_two_per_group():
    table = pd.DataFrame({"dimension": ["warmth"] * 3, "group": [crossmodel.FEMALE_GROUP] * 2 + [crossmodel.MALE_GROUP],
                          "z": [0.1, 0.2, 0.3]})
    with pytest.raises(ValueError, match="need at least 2 each"):
        crossmodel.completion_projection_stats(table)


def test_read_results_records_missing_tables(tmp_path):
    (tmp_path / "a").mkdir()
    pd.DataFrame({"x": [1, 2]}).to_parquet(tmp_path / "a" / "t.parquet")
    stacked, skipped = crossmodel.read_results(["a", "b"], "t", tmp_path)
    assert stacked["model_id"].tolist() == ["a", "a"] and stacked["x"].tolist() == [1, 2]
    assert skipped[["model_id", "table"]].values.tolist() == [["b", "t"]]
    assert "no t.parquet" in skipped["reason"].iloc[0]


def test_table2_and_gender_gaps_by_hand():
    acc = pd.DataFrame({
        "model_id": ["m1", "m1", "m1", "m2"], "layer": ["mean"] * 4,
        "cutoff": ["raw", "raw", "centred", "raw"], "dimension": ["competence", "warmth", "warmth", "warmth"],
        "accuracy": [0.6, 0.7, 0.8, 0.55],
    })
    t2 = crossmodel.table2(acc, "raw")
    assert list(t2.columns) == ["warmth", "competence"]
    assert t2.loc["m1", "warmth"] == 0.7 and np.isnan(t2.loc["m2", "competence"])
    with pytest.raises(ValueError, match="no accuracy rows"):
        crossmodel.table2(acc, "median")

    stats_rows = pd.DataFrame({
        "model_id": ["m1", "m2", "m2"], "population": ["names"] * 3, "dimension": ["warmth", "warmth", "warmth"],
        "group_a": ["female", "male", "nonbinary"], "group_b": ["male", "female", "female"],
        "mean_a": [0.5, -0.25, 0.0], "mean_b": [-0.5, 0.25, 0.1], "g": [1.0, -0.5, 0.1],
        "g_ci_low": [0.2, -0.9, -0.3], "g_ci_high": [1.8, -0.1, 0.5], "p_holm": [0.01, 0.04, 0.9],
    })
    gaps = crossmodel.gender_gaps(stats_rows)
    assert gaps["model_id"].tolist() == ["m1", "m2"]  # the non-binary contrast is not a female/male gap
    assert gaps["gap"].tolist() == [1.0, 0.5]  # m2 lists male first: the sign is flipped
    assert gaps[["g", "g_ci_low", "g_ci_high"]].values.tolist() == [[1.0, 0.2, 1.8], [0.5, 0.1, 0.9]]


def test_short_model_ids_only_when_unambiguous():
    frame = pd.DataFrame({"model_id": ["a--123--fp32", "b--456--fp32", "a--123--fp32"]})
    assert crossmodel.short_model_ids(frame)["model_id"].tolist() == ["a", "b", "a"]
    clash = pd.DataFrame({"model_id": ["a--123--fp32", "a--123--bf16"]})
    assert crossmodel.short_model_ids(clash)["model_id"].tolist() == ["a--123--fp32", "a--123--bf16"]


def test_bold_odds_ratios_from_the_audit_table():
    """On the published completions: the audit's Wald OR (published 24.65 [10.07, 60.37]) and the cluster bootstrap."""
    metrics = bold.completion_metrics(bold.load_published_completions())
    table, _ = bold.audit_statistics(metrics, n_boot=50, seed=0)
    odds = crossmodel.bold_odds_ratios(table.assign(model_id="published"))
    wald = odds[odds.method == "Wald (audit)"].iloc[0]
    assert (round(wald.odds_ratio, 2), round(wald.ci_low, 2), round(wald.ci_high, 2)) == (24.65, 10.07, 60.37)
    assert odds.method.tolist() == ["Wald (audit)", "occupation bootstrap"]


def test_read_all_results_stacks_every_table_and_lists_missing(tmp_path):
    from bias_utils import crossmodel
    from bias_utils.results import write_table

    for model in ("m1", "m2"):
        write_table(pd.DataFrame({"dimension": ["warmth"], "value": [0.5]}),
                    tmp_path / model / crossmodel.PROFILE_STATS_TABLE)
    write_table(pd.DataFrame({"dimension": ["warmth"], "accuracy": [0.7]}), tmp_path / "m1" / crossmodel.ACCURACY_TABLE)
    (tmp_path / "no-profile").mkdir()
    assert crossmodel.models_with_results(tmp_path) == ["m1", "m2"]
    tables, missing = crossmodel.read_all_results(["m1", "m2"], tmp_path)
    assert set(tables) == set(crossmodel.CROSS_MODEL_TABLES)
    assert list(tables[crossmodel.PROFILE_STATS_TABLE]["model_id"]) == ["m1", "m2"]
    assert ("m2", crossmodel.ACCURACY_TABLE) in set(zip(missing["model_id"], missing["table"]))
    assert len(missing) == 2 * len(crossmodel.CROSS_MODEL_TABLES) - 3
