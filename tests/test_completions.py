"""bias_utils.intrinsic_extrinsic.completions: the projection of a model's own completions (notebook 08)."""

from __future__ import annotations

import json
from dataclasses import replace

import float32_bounds as bounds
import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from bias_utils.audit import bold_prompts, replication
from bias_utils.intrinsic_extrinsic import completions
from bias_utils.models.embeddings import embed_words
from bias_utils.models.loading import load_model
from bias_utils.profiles import axis_validity, dictionaries, projection, space
from bias_utils.report import plots, rendering

FEMALE, MALE = bold_prompts.FEMALE_GROUP, bold_prompts.MALE_GROUP

#: Two BOLD categories with occupations of both groups (healthcare 2 vs 2, computer 1 vs 2).
SLICE = ["Flight_Nurse", "Anesthesiologist_Assistant", "Emergency_Medical_Technician", "Social_Worker",
         "Data_entry_clerk", "Computer_operator", "Computer_repair_technician"]


@pytest.fixture(scope="module")
def smollm():
    return load_model("smollm2-135m-instruct")


@pytest.fixture(scope="module")
def published():
    """Two published completions of each slice occupation, plus one empty completion (a recorded skip)."""
    c = replication.load_published_completions()
    rows = c[c.occupation.isin(SLICE)].groupby("occupation", sort=False).head(2)
    empty = rows.iloc[[0]].assign(completion="")
    return pd.concat([rows, empty], ignore_index=True)[["group", "category", "occupation", "prompt", "completion"]]


@pytest.fixture(scope="module")
def basis(smollm):
    dictionary = dictionaries.load_dictionary(None)
    small = dictionary[dictionary.dimension.isin(["sociability", "morality", "ability", "agency"])]
    # the fewest distinct terms an axis takes (a term can have several senses, so rows are not terms)
    small = small.drop_duplicates(["dimension", "direction", "term"])
    small = small.groupby(["dimension", "direction"]).head(dictionaries.MIN_POLE_SIZE)
    return space.build_space(smollm, small, "dictionary", n_contexts=2, seed=0).bases["warmth_competence"]


def _token_states(model, text: str, start: int = 0) -> tuple[np.ndarray, int]:
    """Independent: run the backbone on ``text`` and keep the states of the tokens from character ``start`` on,
    ``[tokens, layers, hidden]`` float32, with the text's length in tokens (which sets the float32 bounds)."""
    offsets = model.tokenizer(text, return_offsets_mapping=True)["offset_mapping"]
    return bounds.token_states(model, text, [i for i, (s, e) in enumerate(offsets) if e > s and e > start])


def _tolerance(model, text: str, start: int = 0) -> np.ndarray:
    """``[layers, hidden]``: how far two float32 computations of the mean state of ``text``'s tokens from character
    ``start`` on may differ (``float32_bounds.pooled_state_tolerance`` of those tokens' states)."""
    tokens, n_tokens = _token_states(model, text, start)
    return bounds.pooled_state_tolerance(tokens, model, n_tokens)


@pytest.mark.slow
def test_completion_and_prompt_embeddings_are_mean_hidden_states(smollm, published):
    """The mean states equal a direct forward pass's within the bound of two float32 computations of a mean of the
    tokens' states (``float32_bounds.pooled_state_tolerance``: each token's ``2 sqrt(N_l + 1) u ||h_l||``, about
    4e-3 here, plus the mean's rounding); the first block's MLP output matrix scaled by 1.001 leaves it (by ~28x)."""
    values, _, skipped = completions.completion_embeddings(smollm, published)
    assert values.shape == (len(published), smollm.n_layers + 1, smollm.hidden_size)
    assert skipped["reason"].str.contains("empty").tolist() == [True]
    assert np.isnan(values[-1]).all()
    row = published.iloc[1]
    text, start = row.prompt.rstrip() + " " + row.completion.strip(), len(row.prompt.rstrip()) + 1
    tokens, n_tokens = _token_states(smollm, text, start)
    tol = bounds.pooled_state_tolerance(tokens, smollm, n_tokens)
    assert bounds.bound_ratio(values[1], tokens.mean(0), tol) <= 1
    with bounds.scaled(bounds.first_mlp_output(smollm).weight, 1.001):
        changed, _ = _token_states(smollm, text, start)
    assert bounds.bound_ratio(changed.mean(0), tokens.mean(0), tol) > 1

    prompts, _, prompt_skipped = completions.completion_embeddings(smollm, published, part="prompt")
    assert prompt_skipped.empty and not np.isnan(prompts).any()
    tokens, n_tokens = _token_states(smollm, row.prompt.strip())
    assert bounds.bound_ratio(prompts[1], tokens.mean(0), bounds.pooled_state_tolerance(tokens, smollm, n_tokens)) <= 1


@pytest.mark.slow
def test_chapter_functions_on_a_real_slice(smollm, published, basis):
    values, _, _ = completions.completion_embeddings(smollm, published)
    prompts, _, _ = completions.completion_embeddings(smollm, published, part="prompt")
    table = completions.completion_projection(basis, values, published, layer="mean", prompt_values=prompts)
    kept = published.iloc[:-1]  # the empty completion is left out

    # the prompt baseline equals projection.project of embed_words on the prompt alone
    texts = kept.prompt.str.strip().tolist()
    own_values = embed_words(smollm, texts, texts).values
    # The bounds (float32_bounds): the prompts' states are two float32 computations (embed_words here and in the
    # table, perhaps one cached), each within its tokens' bound seen through |pinv| and averaged over layers (about
    # 1.2e-4, 0.4% of the values' SD); the completions' projections are two float64 computations of the same
    # states (about 1e-13); the standardisations carry those through (2 + |z|) max dv / SD.
    vectors = basis.pinv.transpose(0, 2, 1)  # [layers, hidden, dimensions]
    prompt_tol = np.stack([bounds.pooled_projection_tolerance(t, vectors, smollm, n).mean(0)
                           for t, n in (_token_states(smollm, text) for text in texts)])
    value_tol = bounds.float64_projection_tolerance(values[:-1], vectors)

    def ratios(pinv_direct, pinv_own, own) -> dict[str, float]:
        """The table against the independent projections on ``pinv_*`` and prompt states ``own``: the largest
        ratio of each comparison's difference to its bound, over the dimensions."""
        direct = np.mean([values[:-1][:, i] @ pinv_direct[i].T for i in range(len(basis.layers))], axis=0)
        mine = projection.project(replace(basis, pinv=pinv_own), own, layer="mean")
        out = dict.fromkeys(["prompt_value", "value", "z", "beyond_prompt_z"], 0.0)
        for j, dim in enumerate(basis.dimensions):
            d = table[table.dimension == dim]
            sd = direct[:, j].std()
            z = (direct[:, j] - direct[:, j].mean()) / sd
            beyond = direct[:, j] - mine[:, j]
            beyond_z = (beyond - beyond.mean()) / sd
            for key, ratio in [
                ("prompt_value", bounds.bound_ratio(d.prompt_value, mine[:, j], prompt_tol[:, j])),
                ("value", bounds.bound_ratio(d.value, direct[:, j], value_tol[:, j])),
                ("z", bounds.bound_ratio(d.z, z, bounds.standardised_tolerance(z, value_tol[:, j], sd, direct[:, j]))),
                ("beyond_prompt_z", bounds.bound_ratio(d.beyond_prompt_z, beyond_z, bounds.standardised_tolerance(
                    beyond_z, prompt_tol[:, j] + value_tol[:, j], sd, beyond)))]:
                out[key] = max(out[key], ratio)
        return out

    assert max(ratios(basis.pinv, basis.pinv, own_values).values()) <= 1
    # companions: the basis rotated by 1e-9 rad leaves the float64 projections' bound (~100x) and the z's (~40x); by
    # 1e-3 rad, the float32 prompts' (1.4x to 2x: that bound adds every component's worst case through |pinv|);
    # one prompt read with its last word changed leaves the beyond-prompt z's (a shift common to all prompts, as a
    # rotation gives, cancels in its centring)
    rotated = ratios(bounds.rotated(basis.pinv, 1e-9), bounds.rotated(basis.pinv, 1e-3), own_values)
    changed = own_values.copy()
    other = texts[0].rsplit(" ", 1)[0] + " the"
    changed[0] = embed_words(smollm, [other], [other], cache=False, progress=False).values[0]
    assert min(rotated["value"], rotated["z"], rotated["prompt_value"],
               ratios(basis.pinv, basis.pinv, changed)["beyond_prompt_z"]) > 1

    result = completions.completion_projection_stats(table, n_boot=200, n_permutations=200)
    assert result.iloc[0][["analysis", "measure", "test"]].tolist() == ["occupation", "beyond_prompt", "welch_t"]
    assert result.loc[result.primary, ["analysis", "measure"]].drop_duplicates().values.tolist() == [
        ["occupation", completions._PRIMARY_MEASURE]]
    # the within-category gap has no interval: its bootstrap would have no variance in one-occupation cells
    assert result.loc[result.analysis == "within_category", ["ci_low", "ci_high"]].isna().all(axis=None)
    for dim in basis.dimensions:
        d = table[table.dimension == dim]
        occ = d.groupby(["group", "occupation"])[["z", "prompt_z"]].mean().reset_index()
        for measure, col in (("completion", "z"), ("prompt", "prompt_z")):
            ref = st.ttest_ind(occ.loc[occ.group == FEMALE, col], occ.loc[occ.group == MALE, col], equal_var=False)
            row = result[(result.analysis == "occupation") & (result.measure == measure)
                         & (result.dimension == dim) & (result.test == "welch_t")].iloc[0]
            assert (row.statistic, row.p, row.n_a, row.n_b) == (pytest.approx(ref.statistic), pytest.approx(ref.pvalue),
                                                                3, 4)
        ref = st.ttest_ind(d.loc[d.group == FEMALE, "z"], d.loc[d.group == MALE, "z"], equal_var=False)
        row = result[(result.analysis == "completions_as_independent") & (result.dimension == dim)
                     & (result.test == "welch_t")].iloc[0]
        assert row.p == pytest.approx(ref.pvalue) and row.n == len(kept)

        # within category: the coefficient of group in OLS with category dummies (independent: lstsq)
        cells = d.groupby(["category", "group", "occupation"])["z"].mean().reset_index()
        X = np.column_stack([cells.group.eq(FEMALE).astype(float), pd.get_dummies(cells.category).astype(float)])
        coef = np.linalg.lstsq(X, cells.z.to_numpy(), rcond=None)[0][0]
        row = result[(result.analysis == "within_category") & (result.measure == "completion")
                     & (result.dimension == dim)].iloc[0]
        assert row.effect_size == pytest.approx(coef)
        assert (row.n_categories, row.n_categories_total, row.p_floor) == (2, 2, pytest.approx(1 / 201))
    p = result[(result.analysis == "occupation") & (result.measure == "completion") & (result.test == "welch_t")].p
    holm = np.minimum(1, np.maximum.accumulate(np.sort(p) * np.arange(len(p), 0, -1)))
    assert sorted(result.loc[p.index, "p_adj"]) == pytest.approx(sorted(holm))

    cat = completions.category_contrasts(table)
    c = cat[(cat.measure == "completion") & (cat.dimension == "warmth")].set_index("category")
    assert c.loc["healthcare_occupations", ["n_a", "n_b"]].tolist() == [2, 2]
    assert c.loc["computer_occupations", ["n_a", "n_b"]].tolist() == [1, 2]

    lines = completions.describe_completion_stats(result, {"competence": "is not supported (test)"})
    assert lines[0].startswith("**warmth** (primary, stated before the results: what the completion adds beyond its "
                               "prompt's words, occupation means, 3 female-dominated vs 4 male-dominated")
    assert "the prompt alone" in lines[1] and "both groups: 2 of 2," in lines[2] and "as independent" in lines[3]
    assert lines[-1].startswith("**competence**: not read") and not any(ch.isdigit() for ch in lines[-1])


def _clustered(rng, n_sim: int, plan: dict, occupation_sd: float = 1.0) -> pd.DataFrame:
    """``n_sim`` data sets of completions whose occupations share a random effect, and no group effect.

    Each data set is one ``dimension`` (``sim0``, ...), so one call of the chapter's
    function tests them all (raw p values are read; Holm would mix the data sets).
    ``plan``: ``{category: (shift, female occupations, male occupations)}``; ``shift``
    is a topic effect that the groups do not share equally.
    """
    units = [(sim, category, shift, group, f"{category}/{group}/{i}") for sim in range(n_sim)
             for category, (shift, n_a, n_b) in plan.items()
             for group, n in ((FEMALE, n_a), (MALE, n_b)) for i in range(n)]
    sims, categories, shifts, groups, occupations = map(np.array, zip(*units))
    k = rng.integers(1, 12, len(units))
    unit = np.repeat(np.arange(len(units)), k)
    effect = shifts.astype(float) + occupation_sd * rng.normal(size=len(units))
    return pd.DataFrame({"dimension": np.char.add("sim", sims.astype(str))[unit], "group": groups[unit],
                         "category": categories[unit], "occupation": occupations[unit],
                         "z": effect[unit] + rng.normal(size=len(unit)), "space": "warmth_competence",
                         "layer": "mean"})


def _rejection_rates(table: pd.DataFrame, **kw) -> dict[str, float]:
    """Share of data sets with raw p < 0.05, per analysis (one test per analysis and data set)."""
    result = completions.completion_projection_stats(table, n_boot=2, **kw)
    tests = result[result.measure.eq("completion") & result.p.notna()]
    return tests.groupby("analysis").p.apply(lambda p: float((p < 0.05).mean())).to_dict()


@pytest.mark.slow
def test_occupation_level_test_holds_alpha_where_the_completion_level_test_does_not():
    rates = _rejection_rates(_clustered(np.random.default_rng(0), 300, {"all": (0.0, 20, 40)}).drop(
        columns="category"))
    assert rates["occupation"] <= 0.07
    assert rates["completions_as_independent"] >= 0.2


@pytest.mark.slow
def test_within_category_test_holds_alpha_where_topic_confounds_the_occupation_test():
    topic = {"nursing": (1.0, 8, 2), "health": (0.3, 5, 4), "computing": (-0.3, 3, 8), "engineering": (-1.0, 2, 10)}
    rates = _rejection_rates(_clustered(np.random.default_rng(1), 200, topic, occupation_sd=0.5), n_permutations=99)
    assert rates["within_category"] <= 0.07
    assert rates["occupation"] >= 0.5


def test_permutation_floor_and_unreadable_axes_in_the_reading():
    table = _clustered(np.random.default_rng(2), 1, {"a": (0.0, 6, 6), "b": (0.5, 6, 6)}, occupation_sd=0.2)
    table = pd.concat([table.assign(dimension="warmth"), table.assign(dimension="competence")], ignore_index=True)
    table.loc[table.group == FEMALE, "z"] += 3
    # the prompt alone carries twice the completion's gap: the completion narrows it
    table["prompt_z"] = 2 * table.z
    table["beyond_prompt_z"] = table.z - table.prompt_z
    result = completions.completion_projection_stats(table, n_boot=50, n_permutations=99)
    within = result[result.analysis == "within_category"]
    assert within.p.eq(0.01).all() and within.p_floor.eq(0.01).all()
    lines = completions.describe_completion_stats(result)
    assert "permutation p ≤ 1/100, Holm p ≤ 0.02" in lines[2] and "95% CI" not in lines[2]
    assert lines[1].endswith("the completion narrows the gap its prompt alone already shows.")
    assert sum(line.startswith("**") for line in lines) == 2

    verdict = pd.Series({"verdict": "not shown", "auc": 0.55, "null_low": 0.4, "null_high": 0.7, "p": 0.3,
                         "n_permutations": 200, "n_high": 20, "n_low": 20, "detectable_auc": 0.7})
    unreadable = {"competence": axis_validity.verdict_phrase(verdict)}
    flagged = completions.completion_projection_stats(table, n_boot=2, n_permutations=99, unreadable=list(unreadable))
    assert flagged.loc[flagged.dimension == "competence", "axis_readable"].eq(False).all()
    read = completions.describe_completion_stats(flagged, unreadable)
    assert read[-1] == (f"**competence**: not read: the axis {unreadable['competence']}, so no gap on it is "
                        "interpreted (the numbers stay in the table below).")
    assert all("competence" not in line for line in read[:-1])
    chart = completions.completion_chart(table, list(unreadable), title="minilm-l6--0a1b2c3d4e5f--fp32").to_dict()
    assert chart["encoding"]["y"]["title"].endswith(plots.INVALID_MARK)
    assert chart["title"] == {"text": "minilm-l6", "subtitle": [plots.INVALID_NOTE]}
    alt_text, caption = rendering._figure_text(chart)
    assert alt_text.startswith("Scatter plot of ") and "occupations' completion means on warmth (x)" in alt_text
    assert "size the number of completions" in caption and caption.endswith(plots.INVALID_NOTE + ".")


def test_not_shown_beside_an_interval_that_excludes_0_names_what_decides_it():
    """Issue 57: chapter 08 called a warmth gap "not shown" beside "0.61 SD colder (95% CI −1.18 to −0.06)": the
    verdict followed a Holm p of 0.097 and the printed interval was unadjusted. Planted: the same row with its Holm p
    moved above 0.05 says that the correction decides and labels the interval unadjusted; with its interval moved
    across 0 it is plainly not shown; left as it is, it is shown."""
    table = _clustered(np.random.default_rng(2), 1, {"a": (0.0, 6, 6), "b": (0.5, 6, 6)}, occupation_sd=0.2)
    table = pd.concat([table.assign(dimension="warmth"), table.assign(dimension="competence")], ignore_index=True)
    table.loc[table.group == FEMALE, "z"] += 3
    result = completions.completion_projection_stats(table, n_boot=50, n_permutations=99)
    first = completions.describe_completion_stats(result)[0]
    assert "not shown" not in first and ", unadjusted)" in first
    primary = (result.analysis == "occupation") & (result.measure == "completion") & (result.dimension == "warmth")
    holm = result.copy()
    holm.loc[primary & (holm.test == "welch_t"), "p_adj"] = 0.097
    first = completions.describe_completion_stats(holm)[0]
    assert ("a difference is not shown after Holm's correction over the dimensions (the unadjusted interval excludes "
            "0; the Holm p, which decides, does not reach 0.05)") in first
    across = holm.copy()
    across.loc[primary & (across.test == "cluster_bootstrap_occupation"), "ci_low"] = -0.5
    first = completions.describe_completion_stats(across)[0]
    assert "a difference is not shown: " in first and "after Holm" not in first


def test_completion_projection_requires_two_occupations_per_group():
    table = pd.DataFrame({"dimension": "warmth", "space": "warmth_competence", "layer": "mean",
                          "group": [FEMALE] * 3 + [MALE] * 2, "occupation": ["n", "n", "m", "e", "e"],
                          "z": [0.1, 0.2, 0.3, 0.4, 0.5]})
    with pytest.raises(ValueError, match="1 male_dominated occupations; need at least 2 each"):
        completions.completion_projection_stats(table, n_boot=2)


@pytest.mark.slow
def test_stored_states_equal_the_re_embedding_where_it_reads_the_same_text(smollm, isolated_cache):
    """The decoding loop's mean states (every layer) against chapter 08's re-embedding of prompt + " " + completion.

    Bound: two float32 computations of a mean of the same tokens' states (the decoding loop's, step by step with the
    KV cache, and a batch's), ``float32_bounds.pooled_state_tolerance`` of those tokens' states read by a direct
    forward pass. The re-embedding reads other text where the completion begins with whitespace (BOLD prompts end in
    a space; SmolLM2 then often writes a newline, which the re-embedding replaced by the one space): exactly those
    rows leave the bound, the companion check of one token of one context changed. The prompts' states agree on
    every row. A cache written before the states existed falls back to the re-embedding.
    """
    from bias_utils.core.cache import read_jsonl
    from bias_utils.models.generation import generate

    sel = bold_prompts.resolve_selection("audit").iloc[::97].head(16)
    gen = generate(smollm, sel["prompt"].tolist(), prompt_ids=sel["prompt_id"].tolist(), max_new_tokens=40,
                   progress=False).merge(sel[["prompt_id", "group", "occupation"]], on="prompt_id")
    assert set(gen["finish_reason"]) == {"stop", "length"}  # the extra forward step and a stopped row
    values, layers, skipped, stored = completions.completion_embeddings(smollm, gen, with_source=True)
    reference, ref_layers, ref_skipped = completions.completion_embeddings(smollm, gen, stored=False)
    assert stored.all() and layers == ref_layers and skipped.empty and ref_skipped.empty
    texts = gen["prompt"].str.rstrip() + " " + gen["completion"].str.strip()
    ratio = np.array([bounds.bound_ratio(values[r], reference[r], _tolerance(smollm, text, len(prompt.rstrip()) + 1))
                      for r, (text, prompt) in enumerate(zip(texts, gen["prompt"]))])
    same_text = texts == (gen["prompt"] + gen["completion"]).str.rstrip()
    assert 3 <= same_text.sum() < len(gen)
    assert (ratio[same_text] <= 1).all() and (ratio[~same_text] > 1).all(), ratio

    prompts, _, _, prompt_stored = completions.completion_embeddings(smollm, gen, part="prompt", with_source=True)
    ref_prompts, _, _ = completions.completion_embeddings(smollm, gen, part="prompt", stored=False)
    assert prompt_stored.all()
    assert all(bounds.bound_ratio(prompts[r], ref_prompts[r], _tolerance(smollm, prompt.strip())) <= 1
               for r, prompt in enumerate(gen["prompt"]))

    # a cache from before the states: same completions, NaN expected counts, and the re-embedding
    (rows_file,) = isolated_cache.glob("generations/*/rows.jsonl")
    old = [{k: v for k, v in r.items() if k not in {"states", "expected_male", "expected_female", "lexicon_key"}}
           for r in read_jsonl(rows_file)]
    rows_file.write_text("".join(json.dumps(r) + "\n" for r in old), encoding="utf-8")
    again = generate(smollm, sel["prompt"].tolist(), prompt_ids=sel["prompt_id"].tolist(), max_new_tokens=40,
                     progress=False)
    assert again["completion"].tolist() == gen["completion"].tolist()
    assert again[["expected_male", "expected_female"]].isna().all().all()
    fallback, _, _, from_store = completions.completion_embeddings(smollm, gen, with_source=True)
    assert not from_store.any()
    np.testing.assert_array_equal(fallback, reference)
