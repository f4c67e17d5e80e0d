"""bias_utils.book.crossmodel: tables stacked across models, intrinsic vs extrinsic bias."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import vl_convert as vlc
from statsmodels.stats.meta_analysis import combine_effects

from bias_utils.audit import bold, replication
from bias_utils.book import crossmodel, pooling
from bias_utils.core import paths, precision, tables
from bias_utils.intrinsic_extrinsic import bold_link
from bias_utils.profiles import population_profiles as profiles
from bias_utils.profiles.populations import load_populations
from bias_utils.report import plots, rendering, table_html


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


@pytest.mark.slow
def test_bold_odds_ratios_from_the_audit_table():
    """On the published completions: the audit's Wald OR (published 24.65 [10.07, 60.37]) and the cluster bootstrap."""
    metrics = bold.completion_metrics(replication.load_published_completions())
    table, _ = bold.audit_statistics(metrics, n_boot=50, seed=0, nested=False)
    odds = crossmodel.bold_odds_ratios(table.assign(model_id="published"))
    wald = odds[odds.method == "Wald, every word independent (audit)"].iloc[0]
    assert (round(wald.odds_ratio, 2), round(wald.ci_low, 2), round(wald.ci_high, 2)) == (24.65, 10.07, 60.37)
    assert odds.method.tolist() == ["marginal, occupation-mean shares (primary)",
                                    "random-intercept model (conditional)", "occupation bootstrap",
                                    "published selection, keys resampled", "Wald, every word independent (audit)"]
    primary = table[(table["role"] == "primary") & (table["effect"] == "odds_ratio")].iloc[0]
    assert odds.iloc[0][["odds_ratio", "ci_low", "ci_high"]].tolist() == primary[
        ["effect_size", "ci_low", "ci_high"]].tolist()
    # one count of occupations, and of those with a gendered word, for every method (the tests' own n differ)
    assert odds.iloc[0][["n_occupations", "n_informative"]].tolist() == primary[
        ["n_occupations", "n_informative"]].tolist()
    assert odds.loc[odds.method == "Wald, every word independent (audit)", "n_occupations"].isna().all()
    conditional = table[table["test"] == "mixed_logit_occupation"].iloc[0]
    assert conditional["role"] == "sensitivity" and odds.iloc[1]["odds_ratio"] == conditional["effect_size"]
    spec = crossmodel.forest_chart(odds.assign(model_id="smollm2-135m-instruct--b179c9523d0e--fp32")).to_dict()
    alt_text, caption = rendering._figure_text(spec)
    assert alt_text.startswith("Forest plot")
    assert "random-intercept model (conditional), occupation bootstrap" in alt_text
    assert "dashed line marks 1" in caption and "resamples those occupations" in caption
    # the book's one log-tick scheme, not one tick per integer
    ticks = spec["layer"][0]["encoding"]["x"]["axis"]["values"]
    assert ticks == plots.log_ticks(odds[["odds_ratio", "ci_low", "ci_high"]].to_numpy().ravel())
    svg = vlc.vegalite_to_svg(spec)
    assert "smollm2-135m-instruct" in svg and "b179c9523d0e" not in svg
    # the colour is the interval's unit: only the audit's Wald interval treats words as independent
    drawn = {r["method"]: r["unit_kind"] for rows in spec["datasets"].values() for r in rows if "unit_kind" in r}
    clustered, independent = plots.UNIT_COLORS
    assert drawn == {m: independent if m == "Wald, every word independent (audit)" else clustered for m in odds.method}
    assert ">3<" not in svg or 3 in ticks  # the ticks drawn are the scheme's
    # the dashed line at 1 stays inside the plot (padded), not under the axis line at its edge
    assert spec["layer"][0]["encoding"]["x"]["scale"]["padding"] > 0
    # the side-by-side row's odds ratio is the primary estimand's, with its interval
    side = crossmodel.intrinsic_extrinsic(pd.DataFrame(columns=["model_id", "population", "dimension", "gap"]), odds,
                                          pd.DataFrame(), pd.DataFrame())
    assert side.iloc[0][["odds_ratio", "or_ci_low", "or_ci_high"]].tolist() == odds.iloc[0][
        ["odds_ratio", "ci_low", "ci_high"]].tolist()
    # and prints it as the odds ratios' table does: its bounds to their Monte Carlo error (issue 57: 16.99 was
    # "3.2 to 82" in one table and "3.23 to 81.71" in the other)
    printed = odds.iloc[[0]][["odds_ratio", "ci_low", "ci_high", "ci_low_mc_se", "ci_high_mc_se"]].assign(
        ci_low_mc_se=0.05, ci_high_mc_se=5.0, ci_low=3.2271, ci_high=81.712)
    beside = side.iloc[[0]][["odds_ratio", "or_ci_low", "or_ci_high", "or_ci_low_mc_se", "or_ci_high_mc_se"]].assign(
        or_ci_low_mc_se=0.05, or_ci_high_mc_se=5.0, or_ci_low=3.2271, or_ci_high=81.712)
    cells = [re.findall(r'<td[^>]*data-role="interval">([^<]*)<', table_html.table_html(t)) for t in (printed, beside)]
    assert cells[0] == cells[1] == [f"{precision.bound_text(3.2271, mc_se=0.05)} to "
                                    f"{precision.bound_text(81.712, mc_se=5.0)}"] != ["3.23 to 81.71"]


def test_read_all_results_stacks_every_table_and_lists_missing(tmp_path):
    from bias_utils.book import crossmodel
    from bias_utils.core.results import write_table

    for model in ("m1", "m2"):
        write_table(pd.DataFrame({"dimension": ["warmth"], "value": [0.5]}),
                    tmp_path / model / tables.NAMES.PROFILE_STATS)
    write_table(pd.DataFrame({"dimension": ["warmth"], "accuracy": [0.7]}),
                tmp_path / "m1" / tables.NAMES.DIRECTION_ACCURACY)
    (tmp_path / "no-profile").mkdir()
    folders = crossmodel.model_folders(results_dir=tmp_path)
    assert folders[["folder", "used"]].values.tolist() == [["m1", True], ["m2", True], ["no-profile", False]]
    stacked, missing = crossmodel.read_all_results(["m1", "m2"], tmp_path)
    assert set(stacked) == set(crossmodel._CROSS_MODEL_TABLES)
    assert list(stacked[tables.NAMES.PROFILE_STATS]["model_id"]) == ["m1", "m2"]
    assert ("m2", tables.NAMES.DIRECTION_ACCURACY) in set(zip(missing["model_id"], missing["table"]))
    assert len(missing) == 2 * len(crossmodel._CROSS_MODEL_TABLES) - 3


def test_unreadable_axes_by_model_reads_each_models_verdicts():
    validity = pd.DataFrame({"model_id": ["a", "a", "a", "b", "b"], "dimension": ["warmth", "competence", "warmth",
                                                                                  "warmth", "religion"],
                             "layer": ["mean", "mean", "3", "mean", "mean"],
                             "verdict": ["supported", "not shown", "not shown", "supported", "untestable"]})
    got = crossmodel.unreadable_axes_by_model(validity)
    assert list(got.itertuples(index=False, name=None)) == [("a", "competence"), ("b", "religion")]
    assert list(crossmodel.unreadable_axes_by_model(validity, "3")["dimension"]) == ["warmth"]
    assert crossmodel.unreadable_axes_by_model(pd.DataFrame()).empty


#: Colditz et al. (1994) BCG vaccine trials (metafor's ``dat.bcg``): tpos, tneg, cpos, cneg.
BCG = np.array([[4, 119, 11, 128], [6, 300, 29, 274], [3, 228, 11, 209], [62, 13536, 248, 12619],
                [33, 5036, 47, 5761], [180, 1361, 372, 1079], [8, 2537, 10, 619], [505, 87886, 499, 87892],
                [29, 7470, 45, 7232], [17, 1699, 65, 1600], [186, 50448, 141, 27197], [5, 2493, 3, 2338],
                [27, 16886, 29, 17825]], dtype=float)


def test_random_effects_agree_with_statsmodels_and_metafor_on_the_bcg_trials():
    a, b, c, d = BCG.T
    y = np.log(a / (a + b) / (c / (c + d)))
    v = 1 / a - 1 / (a + b) + 1 / c - 1 / (c + d)
    got = pooling._random_effects(y, np.sqrt(v))
    ref = combine_effects(y, v, method_re="dl")
    assert got["estimate"] == pytest.approx(ref.mean_effect_re, rel=1e-10)
    assert got["se"] == pytest.approx(ref.sd_eff_w_re, rel=1e-10)
    assert (got["tau2"], got["q"], got["i2"]) == pytest.approx((ref.tau2, ref.q, ref.i2), rel=1e-10)
    # metafor::rma(measure = "RR", method = "DL") as published: -0.7141 (SE 0.1787), tau^2 0.3088
    assert (got["estimate"], got["se"], got["tau2"]) == pytest.approx((-0.7141, 0.1787, 0.3088), abs=1e-4)
    one = pooling._random_effects([0.2], [0.1])
    assert (one["estimate"], one["ci_low"]) == pytest.approx((0.2, 0.2 - 1.96 * 0.1), abs=1e-3)
    assert np.isnan([one["tau2"], one["q"], one["q_p"], one["i2"]]).all()  # no spread to estimate from one model
    with pytest.raises(ValueError, match="standard errors"):
        pooling._random_effects([0.1, 0.2], [0.1, 0.0])


def test_random_effects_interval_covers_the_mean_under_heterogeneity():
    """Simulation: 400 meta-analyses of 20 models with true effects drawn around 0.3 (τ² = 0.02) and unequal
    sampling errors; the DerSimonian–Laird 95% interval covers 0.3 in about 95% (DL runs a little below)."""
    rng = np.random.default_rng(3)
    covered = 0
    for _ in range(400):
        se = rng.uniform(0.05, 0.2, 20)
        y = 0.3 + rng.normal(0, np.sqrt(0.02), 20) + rng.normal(0, se)
        r = pooling._random_effects(y, se)
        covered += r["ci_low"] <= 0.3 <= r["ci_high"]
    assert 0.89 <= covered / 400 <= 0.99, covered


def test_pooled_link_pools_the_primary_slope_and_says_when_nothing_can_be_pooled():
    primary = bold_link.PRIMARY["test"]
    stats = pd.DataFrame({
        "model_id": ["a", "b", "c", "a"], "intrinsic": "gender_position", "test": [primary] * 3 + ["spearman"],
        "effect_size": [0.5, 0.2, 0.9, 0.3], "se": [0.1, 0.2, 0.3, np.nan], "n": [88, 80, 60, 88],
        # each model's own (profile) interval, asymmetric: what its chapter prints
        "ci_low": [0.25, -0.3, 0.4, 0.1], "ci_high": [0.8, 0.55, 1.6, 0.5],
        "readable": [True, True, False, True], "extrinsic_measure": "expected"})
    none = stats.iloc[:0].assign(primary=pd.Series(dtype=bool))  # no next-word table: the BOLD slope alone
    pooled = pooling.pooled_link(none, stats).set_index(["test", "model_id"])
    # c is not read; the link table's own Spearman row (the between-occupation ρ) is not the next-word primary
    assert set(pooled.index) == {(primary, "a"), (primary, "b"), (primary, pooling._POOLED)}
    slope = pooling._random_effects([0.5, 0.2], [0.1, 0.2])
    row = pooled.loc[(primary, pooling._POOLED)]
    assert (row.estimate, row.tau2, row.n) == pytest.approx((slope["estimate"], slope["tau2"], 2))
    # a model's row carries the interval its own chapter prints (one quantity, one interval in the book)
    assert pooled.loc[(primary, "a"), ["ci_low", "ci_high"]].tolist() == [0.25, 0.8]
    assert pooled.loc[(primary, "b"), ["ci_low", "ci_high"]].tolist() == [-0.3, 0.55]
    assert (pooled["se_scale"] == "log-odds per SD of the position").all()  # the SE says its unit (issue 47)
    sentence = pooling.describe_pooling(pooling.pooled_link(none, stats), test=primary)
    assert sentence.startswith("Pooled over 2 models (DerSimonian–Laird random effects), the BOLD-based "
                               "within-field slope (chapter 11's robustness row) is ")
    chart = pooling.link_forest_chart(pooling.pooled_link(none, stats), test=primary).to_dict()
    alt_text, caption = rendering._figure_text(chart)
    assert alt_text.startswith("Forest plot of the BOLD-based within-field slope")
    assert "diamond in the last row pools" in caption
    # the shape legend (model, pooled) is black: a hue on chapter 09's page names a dimension or a unit
    assert [layer["mark"].get("color") for layer in chart["layer"][1:]] == ["black", "black"]
    # one decoder: no pooled row, no diamond, and the spread between models is not estimable
    one = pooling.pooled_link(none, stats.iloc[[0]])
    assert list(one["model_id"]) == ["a"]
    assert pooling.describe_pooling(one, test=primary) == (
        "1 model of this build has the BOLD-based within-field slope (chapter 11's robustness row) on a validated "
        "direction: nothing is pooled, and the spread between models (τ², Q, I²) is not estimable.")
    alt_text, caption = rendering._figure_text(pooling.link_forest_chart(one, test=primary).to_dict())
    assert "With one model nothing is pooled." in caption and "diamond" not in caption and "pooled" not in alt_text


def test_pooled_next_word_link_pools_spearman_on_fishers_z_as_statsmodels_does():
    """The primary (the next-word ρ across the BLS occupations) pools on Fisher's z with var 1.06 / (n − 3): the
    pooled ρ is tanh of statsmodels' DerSimonian–Laird mean of the z values; a model's row keeps its chapter's
    bootstrap interval; rows of other analyses (the partial, the BOLD units) and unread directions are not pooled."""
    from statsmodels.stats.meta_analysis import combine_effects

    rho, n = np.array([0.53, 0.31, 0.70]), np.array([60, 60, 58])
    nw = pd.DataFrame({
        "model_id": ["a", "b", "c", "a", "a", "d"], "intrinsic": "gender_position",
        "test": ["spearman"] * 3 + ["partial_spearman", "spearman", "spearman"],
        "analysis": ["primary"] * 3 + ["beyond the BLS share", "BOLD primary units", "primary"],
        "primary": [True, True, True, False, False, True], "effect_size": [*rho, 0.4, 0.58, 0.9],
        "ci_low": [0.32, 0.05, 0.5, 0.1, 0.4, 0.8], "ci_high": [0.72, 0.52, 0.84, 0.6, 0.73, 0.95],
        "n": [*n, 60, 88, 60], "readable": [True, True, True, True, True, False],
        "units": "BLS occupations", "extrinsic_measure": "next-word log-ratio (exact)"})
    pooled = pooling.pooled_link(nw).set_index("model_id")
    assert list(pooled.index) == ["a", "b", "c", pooling._POOLED] and (pooled["test"] == "spearman").all()
    ref = combine_effects(np.arctanh(rho), 1.06 / (n - 3), method_re="dl")
    pool = pooled.loc[pooling._POOLED]
    assert pool.estimate == pytest.approx(np.tanh(ref.mean_effect_re), rel=1e-10)
    assert (pool.ci_low, pool.ci_high) == pytest.approx(
        np.tanh(ref.mean_effect_re + np.array([-1, 1]) * 1.959963984540054 * ref.sd_eff_w_re), rel=1e-9)
    assert pooled.loc["a", ["ci_low", "ci_high"]].tolist() == [0.32, 0.72]
    assert (pooled["se_scale"] == "Fisher's z (atanh of ρ)").all()
    assert pooling.describe_pooling(pooled.reset_index()).startswith(
        "Pooled over 3 models (DerSimonian–Laird random effects), the Spearman ρ between the direction and the "
        "next-word log-ratio across the BLS occupations (chapter 11's primary) is ")


def test_profile_grid_titles_each_model_by_its_display_name_and_captions_the_grid():
    rng = np.random.default_rng(2)
    rows = [("names", group, w, space, "mean", d, rng.normal())
            for group, words in load_populations("names").items() for w in words[:20]
            for space, dims in (("dimensions", ["warmth", "competence", "agency"]),
                                ("warmth_competence", ["warmth", "competence"])) for d in dims]
    table = profiles._standardise(pd.DataFrame(rows, columns=["population", "group", "word", "space", "layer",
                                                              "dimension", "value"]))
    models = ["smollm2-135m-instruct--b179c9523d0e--fp32", "minilm-l6--0a1b2c3d4e5f--fp32"]
    means = pd.concat([profiles._group_means(table).assign(model_id=m) for m in models])
    stats = pd.concat([profiles.profile_stats(table).assign(model_id=m) for m in models])
    spec = crossmodel.profile_grid(means, stats).to_dict()
    assert [panel["title"]["text"] if isinstance(panel["title"], dict) else panel["title"]
            for panel in spec["vconcat"]] == ["smollm2-135m-instruct: 7D profile (names)",
                                              "smollm2-135m-instruct: warmth × competence",
                                              "minilm-l6: 7D profile (names)", "minilm-l6: warmth × competence"]
    alt_text, caption = rendering._figure_text(spec)
    assert alt_text == ("Stacked dot plots and scatter plots: the names profile and warmth × competence plane of "
                        "2 models.")
    assert "(smollm2-135m-instruct, minilm-l6)" in caption and "not read" in caption


# --------------------------------------------------------------------------- chapter 09 on the folders a user has

#: The SmolLM2 folder of a QUICK build (12 names per group) that stopped before chapter 06: the tables chapter 09
#: reads that it has (no BOLD, link or completion tables), as that build wrote them.
QUICK = Path(__file__).parent / "fixtures" / "quick_build" / "smollm2-135m-instruct--b179c9523d0e--fp32"
SMOL_ID, MINILM_ID = QUICK.name, "minilm-l6--53aa51172d14--fp32"


def _chapter_09(results: Path, out: Path, *args: str) -> tuple[str, str]:
    """Chapter 09 under papermill on ``results``; ``(its error output, its outputs' text)``."""
    executed = out.parent / f"{out.name}.ipynb"
    proc = subprocess.run([sys.executable, "-m", "papermill", "--log-level", "ERROR",
                           str(paths.ROOT / "notebooks" / "09_cross_model.ipynb"), str(executed),
                           "-p", "results_dir", str(results), "-p", "output_dir", str(out), *args],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(paths.ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    nb = json.loads(executed.read_text(encoding="utf-8"))
    outputs = [o for c in nb["cells"] for o in c.get("outputs", [])]
    text = "\n".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/markdown", ""))
                     + "".join(o.get("data", {}).get("text/plain", "")) for o in outputs)
    errors = [o for o in outputs if o.get("output_type") == "error"]
    assert not errors and "Traceback" not in text, errors
    return proc.stderr, text


@pytest.mark.slow
def test_chapter_09_reads_on_past_every_folder_it_cannot_use(tmp_path):
    """A QUICK build's partial folder beside a copy of it, another model's folder holding SmolLM2's tables, an empty
    folder, and two names of no folder (one a model's short name): the chapter names each folder it leaves out and
    why, by the model its model.json records, and builds every section from the QUICK folder (read from the folder
    named after its model, though the copy is listed first)."""
    results = tmp_path / "results"
    shutil.copytree(QUICK, results / SMOL_ID)
    shutil.copytree(QUICK, results / "smol-copy")
    (results / "minilm").mkdir(parents=True)
    (results / "minilm" / "model.json").write_text(json.dumps({"model_id": MINILM_ID}), encoding="utf-8")
    shutil.copy(QUICK / f"{tables.NAMES.PROFILE_STATS}.parquet", results / "minilm")
    (results / "empty").mkdir()
    asked = ["smol-copy", SMOL_ID, "minilm", "empty", "nowhere", "smollm2-135m-instruct"]  # the copy listed first
    _, text = _chapter_09(results, tmp_path / "cross", "-y", f"models: {json.dumps(asked)}")

    folders = pd.read_csv(tmp_path / "cross" / "model_folders.csv", keep_default_na=False).set_index("folder")
    assert folders.loc[asked, "used"].tolist() == [False, True, False, False, False, False]
    assert folders.loc["minilm", "model_id"] == MINILM_ID and folders.loc["smol-copy", "model_id"] == SMOL_ID
    reasons = folders["reason"]
    assert reasons["smol-copy"] == (f"holds the results of smollm2-135m-instruct, as folder {SMOL_ID!r} does: each "
                                    "model is read once, from the folder named after it or else the first listed")
    assert reasons["minilm"].startswith(f"its model.json records {MINILM_ID}, but every table in it has rows of "
                                        f"{SMOL_ID}: another model's results")
    assert reasons["empty"].startswith("holds none of the tables this chapter reads (chapters 03, 04, 06, 10 and 11 "
                                       "write them; nor a model.json")
    assert reasons["nowhere"].startswith(f"no folder {results / 'nowhere'}: models takes the names of results "
                                         "folders under results_dir, one per model (a model id")
    # "empty" holds no results: not offered (it could only send the reader to another empty folder)
    assert reasons["nowhere"].endswith(f"; the folders there that hold results: minilm, smol-copy, {SMOL_ID}")
    assert reasons["smollm2-135m-instruct"].endswith(f"; did you mean {SMOL_ID!r} (the results of "
                                                     "smollm2-135m-instruct)?")
    assert "**Models of this build** (1): smollm2-135m-instruct." in text
    assert "**Folders not used** (5):" in text and "- `minilm` (minilm-l6): its model.json records" in text
    # every section is built from the QUICK folder, its rows named by the model it records
    quick_stats = pd.read_parquet(QUICK / f"{tables.NAMES.PROFILE_STATS}.parquet")
    gaps = pd.read_csv(tmp_path / "cross" / "gender_gaps.csv")
    assert set(gaps["model_id"]) == {SMOL_ID}
    assert len(gaps) == len(crossmodel.gender_gaps(quick_stats))
    accuracy = pd.read_csv(tmp_path / "cross" / "direction_accuracy_all_models.csv")
    assert len(accuracy) == len(pd.read_parquet(QUICK / f"{tables.NAMES.DIRECTION_ACCURACY}.parquet"))
    assert len(pd.read_csv(tmp_path / "cross" / "robustness_all_models.csv")) == len(
        pd.read_parquet(QUICK / f"{tables.NAMES.ROBUSTNESS_SUMMARY}.parquet"))
    assert "No model in this book has BOLD results." in text  # the QUICK build stopped before chapter 06


@pytest.mark.slow
def test_chapter_09_on_an_empty_results_folder_says_there_is_nothing_to_compare(tmp_path):
    """An empty results folder: the chapter says plainly that it holds no runs, naming it, and points at no table
    (there is none: the missing tables' table is not shown, nor a sentence that sends the reader to it)."""
    results = tmp_path / "results"
    results.mkdir()
    said = crossmodel.describe_folders(crossmodel.model_folders([], results), results)
    assert said.startswith(f"**No runs to compare**: `{results}` holds no runs (no model's results folder is in it)")
    _, text = _chapter_09(results, tmp_path / "cross")
    assert said in text and "Run chapters 03 and 04 for a model first" in text
    assert "Models of this build:" not in text
    assert "table of missing tables" not in text and "Tables a model of this build does not have" not in text
    assert pd.read_csv(tmp_path / "cross" / "model_folders.csv").empty
    assert pd.read_csv(tmp_path / "cross" / "gender_gaps.csv").empty


def test_did_you_mean_offers_only_a_folder_that_holds_results(tmp_path):
    """A failed run's folder (its model.json and the senses it dropped, nothing chapter 09 reads) is not what a
    reader meant: it is neither suggested nor listed; a folder holding results is."""
    from bias_utils.core.results import write_table
    from bias_utils.profiles import space

    results = tmp_path / "results"
    failed = results / SMOL_ID
    failed.mkdir(parents=True)
    shutil.copy(QUICK / "model.json", failed / "model.json")
    write_table(pd.DataFrame(columns=space.DROPPED_COLUMNS), failed / tables.NAMES.DROPPED_SENSES)
    [reason] = crossmodel.model_folders(["smollm2-135m-instruct"], results)["reason"]
    assert "did you mean" not in reason and repr(SMOL_ID) not in reason
    assert reason.endswith("; no folder in results_dir holds results this chapter reads")
    shutil.copytree(QUICK, results / "smol-run")  # the same model's results under another name
    folders = crossmodel.model_folders(["smollm2-135m-instruct"], results)
    assert folders["reason"].iloc[0].endswith("; did you mean 'smol-run' (the results of smollm2-135m-instruct)?")
    assert "did you mean 'smol-run'" in crossmodel.describe_folders(folders, results)


def test_pooled_link_pools_like_with_like_and_names_what_it_keeps_apart():
    """Three models of the built-in next-word measure are pooled; one of other templates and one whose table does
    not record its definition are kept apart, each with its reason, left out of the pool, the chart and the count,
    and named in the sentence. The BOLD slope (no template defines it) pools as before."""
    from bias_utils.audit.next_word_prompts import DEFAULT_DEFINITION, measure_definition

    german = measure_definition(["Gestern sagte {occupation}, dass"])
    rho, n = np.array([0.53, 0.41, 0.67, 0.12, 0.3]), np.array([60, 60, 60, 60, 58])
    nw = pd.DataFrame({
        "model_id": ["a", "b", "c", "d", "e"], "intrinsic": "gender_position", "test": "spearman",
        "analysis": "primary", "primary": True, "effect_size": rho, "ci_low": rho - 0.2, "ci_high": rho + 0.2, "n": n,
        "readable": True, "units": "BLS occupations", "extrinsic_measure": "next-word log-ratio (exact)",
        "measure_definition": [DEFAULT_DEFINITION] * 3 + [german, np.nan]})
    pooled = pooling.pooled_link(nw)
    ref = combine_effects(np.arctanh(rho[:3]), 1.06 / (n[:3] - 3), method_re="dl")
    pool = pooled.set_index("model_id").loc[pooling._POOLED]
    assert (pool.n, pool.measure_definition, pool.kept_apart) == (3, DEFAULT_DEFINITION, "")
    assert pool.estimate == pytest.approx(np.tanh(ref.mean_effect_re), rel=1e-10)
    apart = pooled.set_index("model_id")["kept_apart"]
    assert (apart[["a", "b", "c"]] == "").all()
    assert apart["d"].startswith(f"its next-word measure is defined by other templates or words (definition {german})"
                                 f" than the pooled models' ({DEFAULT_DEFINITION}, the built-in templates and the "
                                 "audit's words)")
    assert apart["e"].startswith("its table does not record what defines its next-word measure")
    sentence = pooling.describe_pooling(pooled)
    assert sentence.startswith("Pooled over 3 models")
    assert f"**Kept apart: d**: {apart['d']}." in sentence and f"**Kept apart: e**: {apart['e']}." in sentence
    drawn = pooling.link_forest_chart(pooled).to_dict()["datasets"].values()
    assert {row.get("model_id") for rows in drawn for row in rows} - {None} == {"a", "b", "c", pooling._POOLED}
    # tables written before the definition was recorded pool among themselves, as they did
    old = pooling.pooled_link(nw.drop(columns="measure_definition"))
    assert old.set_index("model_id").loc[pooling._POOLED, "n"] == 5 and (old["kept_apart"] == "").all()


@pytest.mark.slow
def test_chapter_09_keeps_a_run_of_other_templates_out_of_the_pool(tmp_path, smollm, smollm_quick_bases):
    """Issue 46: a results folder holding SmolLM2's chapter 11 tables with a German template beside one with the
    built-in templates (real runs, 12 BLS nouns): chapter 09's reading of the folders keeps the German run apart,
    says why, and does not call its link the built-in next-word log-ratio."""
    from bias_utils.audit import next_word as nw
    from bias_utils.audit import next_word_prompts as nwp
    from bias_utils.core.results import write_table
    from bias_utils.intrinsic_extrinsic import link
    from bias_utils.profiles import gender_direction
    from bias_utils.profiles.populations import occupation_shares

    nouns = occupation_shares()["occupation"].iloc[::5].tolist()
    check = gender_direction.occupation_validity(smollm, smollm_quick_bases["warmth_competence"], n_boot=100, seed=0)
    results = tmp_path / "results"
    for folder, templates in (("smol-builtin", None), ("smol-german", ["Gestern sagte {occupation}, dass"])):
        exact = nw.next_word_table(smollm, nouns, templates=templates, progress=False)
        world = link.next_word_link(check.values, exact.occupations, direction_verdict=check.verdict, n_boot=100)
        write_table(world.statistics, results / folder / tables.NAMES.LINK_NEXT_WORD)
    folders = crossmodel.model_folders([], results)
    found, _ = crossmodel.read_all_results(list(folders["folder"]), results)
    pooled = pooling.pooled_link(found[tables.NAMES.LINK_NEXT_WORD]).set_index("model_id")
    assert pooling._POOLED not in pooled.index and pooled.loc["smol-builtin", "kept_apart"] == ""
    german = nwp.measure_definition(["Gestern sagte {occupation}, dass"])
    assert pooled.loc["smol-german", "kept_apart"].startswith(
        f"its next-word measure is defined by other templates or words (definition {german})")
    assert pooled.loc["smol-german", "extrinsic_measure"] == (f"next-word log-ratio (exact; its own templates or "
                                                              f"words, definition {german})")
    assert pooled.loc["smol-builtin", "extrinsic_measure"] == "next-word log-ratio (exact)"
    assert "**Kept apart: smol-german**: its next-word measure" in pooling.describe_pooling(pooled.reset_index())
