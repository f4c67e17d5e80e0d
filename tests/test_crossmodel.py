"""bias_utils.crossmodel: tables stacked across models, intrinsic vs extrinsic bias."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bias_utils import bold, crossmodel, replication


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
    t2 = crossmodel.accuracy_by_model(acc, "raw")
    assert list(t2.columns) == ["warmth", "competence"]
    assert t2.loc["m1", "warmth"] == 0.7 and np.isnan(t2.loc["m2", "competence"])
    with pytest.raises(ValueError, match="no accuracy rows"):
        crossmodel.accuracy_by_model(acc, "median")

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
    metrics = bold.completion_metrics(replication.load_published_completions())
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


def test_unreadable_axes_by_model_reads_each_models_verdicts():
    validity = pd.DataFrame({"model_id": ["a", "a", "a", "b", "b"], "dimension": ["warmth", "competence", "warmth",
                                                                                  "warmth", "religion"],
                             "layer": ["mean", "mean", "3", "mean", "mean"],
                             "verdict": ["supported", "not shown", "not shown", "supported", "untestable"]})
    got = crossmodel.unreadable_axes_by_model(validity)
    assert list(got.itertuples(index=False, name=None)) == [("a", "competence"), ("b", "religion")]
    assert list(crossmodel.unreadable_axes_by_model(validity, "3")["dimension"]) == ["warmth"]
    assert crossmodel.unreadable_axes_by_model(pd.DataFrame()).empty
