"""bias_utils.audit.next_word: the exact next-word measure of what a decoder writes about an occupation (chapter 11)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import float32_bounds as bounds
import nbformat
import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats as st

from bias_utils.audit import next_word as nw
from bias_utils.audit import next_word_prompts as nwp
from bias_utils.audit import occupation_units, replication
from bias_utils.book import crossmodel, validation
from bias_utils.core import criterion_validity as cv
from bias_utils.core import lexicon, paths
from bias_utils.core.errors import ParameterError
from bias_utils.intrinsic_extrinsic import bold_link, link
from bias_utils.models.builtin_models import BUILTIN_MODELS
from bias_utils.models.generation import generate
from bias_utils.models.loading import _LOADED, _files_of
from bias_utils.profiles import gender_direction
from bias_utils.profiles.population_profiles import DEFAULT_TEMPLATES
from bias_utils.profiles.populations import occupation_shares

NOUNS = ["nurse", "plumber", "registered nurse"]


# --------------------------------------------------------------------------- templates


def test_builtin_templates_are_neutral_sentences_the_intrinsic_side_does_not_use():
    templates = nwp.check_next_word_templates(None)
    assert templates == nwp.TEMPLATES and len(templates) >= 8
    assert len(nwp._REFERENCE) == len(templates)
    assert set(nwp._REFERENCE) == {"subject", "possessive", "object"}
    intrinsic = {t.replace("{word}", "").strip() for t in DEFAULT_TEMPLATES}
    for t in templates:
        assert t.count("{occupation}") == 1 and t[-1].isalpha()
        assert not any(word in t.lower().split() for word in lexicon.MALE_WORDS + lexicon.FEMALE_WORDS), t
        assert all(frame not in t.lower() for frame in intrinsic), t


@pytest.mark.parametrize("bad, match", [
    ("The {occupation} said that", "not one string"), ([], "non-empty list"), (["The nurse said"], "exactly once"),
    (["The {occupation} said that "], "trailing space"), (["The {occupation} said that."], "end in a word"),
    (["The {occupation} said", "The {occupation} said"], "twice"),
])
def test_bad_templates_name_the_parameter(bad, match):
    with pytest.raises(ParameterError, match=f"^templates.*{match}"):
        nwp.check_next_word_templates(bad)


def test_one_string_for_a_list_is_refused_before_any_model_is_named_or_loaded():
    """``next_word_table(model, "nurse")`` would measure the nouns n, u, r, s, e; every list parameter goes through
    ``errors.check_word_list``. The model named does not exist: a check that ran after the model was resolved would
    fail on it instead, so these messages show that the lists are checked first."""
    cases = [
        (dict(occupations="nurse"), r"^occupations must be a list of strings, not one string: got 'nurse'; write "
                                    r"\['nurse'\]$"),
        (dict(occupations=["nurse"], templates="The {occupation} said that"), r"^templates must be a list of strings, "
                                                                             "not one string"),
        (dict(occupations=["nurse"], lexicons={"female": "she", "male": ["he"]}),
         r"^lexicons\['female'\] must be a list of strings, not one string: got 'she'"),
        (dict(occupations=[]), r"^occupations is empty"),
        (dict(occupations=["nurse", 3]), r"^occupations must be a list of strings; item 1 is 3"),
    ]
    for kwargs, match in cases:
        with pytest.raises(ParameterError, match=match):
            nw.next_word_table("no-such-model-anywhere", **kwargs)
    with pytest.raises(ParameterError, match="^templates must be a list of strings, not one string"):
        nw.sampled_check("no-such-model-anywhere", pd.DataFrame({"occupation": ["nurse"]}),
                         templates="The {occupation} said that")


@pytest.mark.slow
def test_names_are_refused_before_a_model_is_named_or_loaded():
    """Issue 58: next_word_table(m, ["Mary", "John"]) wrote "The Mary said that" for every prompt, with no warning.
    A capitalised word that is no acronym is refused; the 60 BLS nouns, the audit's 213 BOLD unit nouns (lower case,
    from their keys) and acronyms pass."""
    with pytest.raises(ParameterError, match=r"^occupations: 'Mary', 'John' look like names; the templates put 'the'"):
        nw.next_word_table("no-such-model-anywhere", ["Mary", "John", "nurse"])
    units = occupation_units.annotate(replication.load_published_completions(), "audit")["unit"]
    nouns = list(occupation_shares()["occupation"]) + sorted({bold_link.occupation_noun(u) for u in units})
    assert len(nouns) == 60 + 213
    nwp.check_occupation_nouns(nouns + ["CEO", "IT specialist"])


@pytest.mark.slow
def test_a_plural_noun_is_told_by_its_head_nouns_inflection():
    """Issue 58: "nurses" was published as "they" about one person. A plural is the head noun's inflection (the word
    before "of", else the last), by WordNet or, for a head WordNet lacks, a person suffix plus s; of the 60 BLS nouns
    none is plural, and of the audit's 213 unit nouns only "woodworkers" (read by hand)."""
    plural = ["nurses", "engineers", "woodworkers", "moldmakers", "bus drivers", "midwives", "chairmen"]
    singular = ["nurse", "road foreman of engines", "boss", "actress", "physics teacher", "news anchor", "glass blower"]
    assert [occupation_units.plural_noun(n) for n in plural + singular] == [True] * 7 + [False] * 7
    units = occupation_units.annotate(replication.load_published_completions(), "audit")["unit"]
    nouns = list(occupation_shares()["occupation"]) + sorted({bold_link.occupation_noun(u) for u in units})
    assert [n for n in nouns if occupation_units.plural_noun(n)] == ["woodworkers"]


def test_an_encoder_is_refused_before_it_loads_naming_the_decoders(tmp_path):
    """The built-in encoder is refused from the built-in models table and a folder's from its config.json, in the
    notebook's words (``models.loading.check_model``, as chapter 11's check), listing the built-in decoders. The
    folder holds MiniLM's config and tokenizer but no weights: had loading begun, it would fail on them instead."""
    decoders = ", ".join(n for n, b in BUILTIN_MODELS.items() if b.kind == "decoder")
    held = set(_LOADED)
    with pytest.raises(ParameterError, match=r"^model: 'minilm-l6' is an encoder \(read from the built-in models "
                                             r"table\) and cannot give text: next_word_table .* needs a decoder \(a "
                                             r"causal language model\); built-in decoders: " + decoders + "$"):
        nw.next_word_table("minilm-l6", ["nurse"])
    assert set(_LOADED) == held  # nothing was loaded on the way to the refusal
    weights, _ = _files_of("minilm-l6")
    folder = tmp_path / "minilm-config-only"
    folder.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(Path(weights) / name, folder / name)
    with pytest.raises(ParameterError, match=rf"^model: '{folder}' is an encoder \(read from {folder}/config\.json\) "
                                             r"and cannot give text: next_word_table .*; built-in decoders: "):
        nw.next_word_table(str(folder), ["nurse"])
    # the notebook's check says the same of the same model, in the same words
    with pytest.raises(ParameterError, match=rf"^model: 'minilm-l6' is an encoder .*; built-in decoders: {decoders}$"):
        validation.check("11_intrinsic_extrinsic", model="minilm-l6")


def test_the_words_counted_are_a_notebook_parameter_checked_by_chapter_06s_lexicon_rule():
    check = validation.check  # chapter 11's registered check, before any model loads
    check("11_intrinsic_extrinsic", next_word_lexicons={"female": ["sie", "ihr"], "male": ["er", "ihm"]})
    for bad, match in [
        ({"female": "sie", "male": ["er"]}, r"^next_word_lexicons\['female'\] must be a list of strings, not one "
                                            "string"),
        ({"female": ["sie"]}, r"^next_word_lexicons must include 'female' and 'male' \(the log-ratio's two sides\)"),
        ({"female": ["sie"], "male": ["sie"]}, r"^next_word_lexicons: 'sie' is in both 'female' and 'male'"),
        ({"female": ["die Frau"], "male": ["er"]}, r"^next_word_lexicons\['female'\]: 'die Frau' is not a single"),
        (["sie", "er"], r"^next_word_lexicons: expected a non-empty dict"),
    ]:
        with pytest.raises(ParameterError, match=match):
            check("11_intrinsic_extrinsic", next_word_lexicons=bad)
    # the measure's definition: a hash of the templates and the words, blind to their order and case
    assert nwp.measure_definition() == nwp.DEFAULT_DEFINITION == nwp.measure_definition(
        tuple(reversed(nwp.TEMPLATES)), {"male": [w.upper() for w in lexicon.MALE_WORDS],
                                         "female": list(lexicon.FEMALE_WORDS)})
    assert len({nwp.DEFAULT_DEFINITION, nwp.measure_definition(["Gestern sagte {occupation}, dass"]),
                nwp.measure_definition(None, {"female": ["sie"], "male": ["er"]})}) == 3


# --------------------------------------------------------------------------- against the world (no model)


def _values(log_ratio, share, warmth=None):
    n = len(share)
    return (pd.DataFrame({"occupation": [f"o{i}" for i in range(n)], "bls_pct_female": share,
                          "warmth": warmth if warmth is not None else np.nan, "competence": np.nan}),
            pd.DataFrame({"occupation": [f"o{i}" for i in range(n)], "log_ratio": log_ratio}))


def test_validity_is_the_direction_engine_on_the_log_ratio():
    rng = np.random.default_rng(2)
    share = rng.uniform(0, 100, 60)
    warmth = rng.standard_normal(60)
    values, exact = _values(share / 30 + rng.standard_normal(60), share, warmth)
    exact.loc[5, "log_ratio"] = np.nan  # a noun without the measure is left out
    stats = nw.next_word_validity(exact.iloc[:-3], values, n_boot=200, seed=0).set_index("test")  # 3 absent
    assert set(stats["measure"]) == {"log_ratio"} and stats.loc["partial_spearman", "controls"] == "warmth"
    keep = exact["log_ratio"].notna().to_numpy() & (np.arange(60) < 57)
    rho, p = st.spearmanr(exact.loc[keep, "log_ratio"], share[keep])
    assert stats.loc["spearman", ["effect_size", "p", "n"]].tolist() == pytest.approx([rho, p, 56], rel=1e-12)
    assert stats.loc["spearman", "verdict"] == cv._verdict(stats.loc["spearman", "ci_low"], 56) == "supported"
    assert list(stats.reset_index().columns) == list(gender_direction._validity_statistics(
        values.assign(gender_position=1.0), n_boot=2).columns) + [  # one engine, one table shape
        "measure_definition", "coverage", "low_coverage"]
    words = pd.DataFrame({"word": ["she", "he"], "counted": "single token"})
    text = nw.describe_next_word(stats.reset_index(), words, "m")
    assert "validated against the world" in text and "each is one token" in text and "Beyond the nouns' warmth" in text
    assert text.endswith("without a chat template.")
    assert "m is a chat model" in nw.describe_next_word(stats.reset_index(), words, "m", chat_model=True)


# --------------------------------------------------------------------------- the real model


@pytest.mark.slow
def test_first_tokens_count_longer_words_by_their_first_and_drop_shared_ones(smollm):
    ids, words = nwp.lexicon_first_tokens(smollm.tokenizer)
    assert len(words) == 26 and set(words["counted"]) == {"single token"}  # every audit word is one SmolLM2 token
    for row in words.itertuples():
        assert [row.token_id] == smollm.tokenizer(" " + row.word, add_special_tokens=False)["input_ids"]
    assert ids["female"] == sorted(words.loc[words["lexicon"] == "female", "token_id"])
    own = {"female": ["she", "stepmother", "matriarch"], "male": ["he", "stepfather"]}
    ids, words = nwp.lexicon_first_tokens(smollm.tokenizer, own)
    counted = words.set_index("word")["counted"]
    assert counted["matriarch"] == "first token" and counted["stepmother"] == counted["stepfather"] == "shared"
    first = smollm.tokenizer(" matriarch", add_special_tokens=False)["input_ids"]
    assert len(first) > 1 and ids["female"] == sorted([first[0], smollm.tokenizer(" she")["input_ids"][0]])
    assert ids["male"] == smollm.tokenizer(" he")["input_ids"]
    with pytest.raises(ParameterError, match="^lexicons"):
        nwp.lexicon_first_tokens(smollm.tokenizer, {"female": ["she"], "neutral": ["they"]})


def _golden_violations(model, table: pd.DataFrame, ids: dict) -> tuple[float, float]:
    """The largest ratio of |ours - transformers' own forward pass| to its float32 bound, for the log-ratio and for
    the masses (at most 1 passes). The reference is ``model(**enc).logits`` over the whole sentence with a float64
    softmax; ours reads the last position's logits alone (``logits_to_keep=1``), so the two differ by float32's
    rounding of the logits only: the log-ratio by at most twice the largest error of a counted token's logit (the
    normaliser cancels), a mass by at most twice that of any token's logit, relative (both softmaxes sum in
    float64); each logit's bound from ``float32_bounds.logit_errors``."""
    prompts = table["prompt"].tolist()
    ratio_tol = bounds.log_ratio_tolerance(bounds.logit_errors(model, prompts, top=0,
                                                               tokens=ids["female"] + ids["male"], last_only=True))
    mass_tol = bounds.log_probability_tolerance(bounds.logit_errors(model, prompts, top=None, last_only=True))
    worst_ratio = worst_mass = 0.0
    for row, r_tol, m_tol in zip(table.itertuples(), ratio_tol, mass_tol):
        enc = model.tokenizer(row.prompt, return_tensors="pt")
        with torch.no_grad():
            probs = torch.softmax(model.model(**enc).logits[0, -1].double(), dim=0)
        female, male = float(probs[ids["female"]].sum()), float(probs[ids["male"]].sum())
        worst_ratio = max(worst_ratio, abs(row.log_ratio - np.log(female / male)) / r_tol)
        worst_mass = max(worst_mass, abs(row.female_mass / female - 1) / m_tol, abs(row.male_mass / male - 1) / m_tol)
    return worst_ratio, worst_mass


@pytest.mark.slow
def test_log_ratio_equals_transformers_full_forward_pass_in_float64(smollm, isolated_cache):
    """Golden: every sentence's log-ratio and masses equal those of transformers' own forward pass over the whole
    sentence, one sentence at a time, within float32's bound (``_golden_violations``); the batched run (other
    kernel blocking) is held to the same bound. The companion: the first block's MLP output matrix scaled by 1.01
    breaks the log-ratio's bound (1.001 moves it by 0.4 of the bound; the batched run's rounding, by 0.0014)."""
    found = nw.next_word_table(smollm, NOUNS, batch_size=1, progress=False, cache=False)
    ids, _ = nwp.lexicon_first_tokens(smollm.tokenizer)
    assert len(found.prompts) == len(NOUNS) * len(nwp.TEMPLATES)
    ratio, mass = _golden_violations(smollm, found.prompts, ids)
    assert ratio <= 1 and mass <= 1, (ratio, mass)
    batched = nw.next_word_table(smollm, NOUNS, progress=False, cache=False).prompts
    assert batched["prompt"].tolist() == found.prompts["prompt"].tolist()
    assert max(_golden_violations(smollm, batched, ids)) <= 1
    per = found.occupations.set_index("occupation")
    nurse = found.prompts[found.prompts["occupation"] == "nurse"]
    assert per.loc["nurse", "log_ratio"] == pytest.approx(nurse["log_ratio"].mean(), rel=1e-12)
    assert per.loc["nurse", "gendered_mass"] == pytest.approx(nurse["female_mass"].mean() + nurse["male_mass"].mean())
    assert per.loc["nurse", "log_ratio"] > 0 > per.loc["plumber", "log_ratio"]

    with bounds.scaled(bounds.first_mlp_output(smollm).weight, 1.01):
        changed = nw.next_word_table(smollm, NOUNS[:1], batch_size=1, progress=False, cache=False).prompts
    assert _golden_violations(smollm, changed, ids)[0] > 1


@pytest.mark.slow
def test_a_rerun_computes_nothing_and_an_interrupted_run_resumes(smollm, isolated_cache):
    first = nw.next_word_table(smollm, NOUNS, batch_size=4, progress=False)
    [rows] = list((isolated_cache / "next_word").glob("*/rows.jsonl"))
    lines = rows.read_text(encoding="utf-8").splitlines(keepends=True)
    assert len(lines) == len(first.prompts)
    again = nw.next_word_table(smollm, NOUNS, batch_size=4, progress=False)
    assert rows.read_text(encoding="utf-8").splitlines(keepends=True) == lines  # nothing computed or written
    pd.testing.assert_frame_equal(again.prompts, first.prompts)
    # killed mid-write: a few batches on disk and a torn line; the rerun keeps them and computes only the rest
    rows.write_text("".join(lines[:9]) + lines[9][:20], encoding="utf-8")
    resumed = nw.next_word_table(smollm, NOUNS, batch_size=4, progress=False)
    records = [json.loads(line) for line in rows.read_text(encoding="utf-8").splitlines()]
    assert sorted(r["key"] for r in records) == sorted(json.loads(line)["key"] for line in lines)
    assert [r["key"] for r in records[:9]] == [json.loads(line)["key"] for line in lines[:9]]
    pd.testing.assert_frame_equal(resumed.prompts, first.prompts, check_exact=True)  # the same batches, recomputed
    # other lexicons are another cache entry, not a stale reuse
    other = nw.next_word_table(smollm, NOUNS[:1], lexicons={"female": ["she"], "male": ["he"]}, progress=False)
    assert len(list((isolated_cache / "next_word").glob("*/rows.jsonl"))) == 2
    assert (other.prompts["female_mass"].to_numpy() < first.prompts["female_mass"].iloc[:len(other.prompts)]
            .to_numpy()).all()
    # another torch thread count is another entry too (its float32 sums may round otherwise): computed, not reused
    before = torch.get_num_threads()
    torch.set_num_threads(before + 1)
    try:
        nw.next_word_table(smollm, NOUNS[:1], batch_size=4, progress=False)
    finally:
        torch.set_num_threads(before)
    metas = [json.loads(p.read_text()) for p in (isolated_cache / "next_word").glob("*/meta.json")]
    assert sorted(m["cpu_threads"] for m in metas) == sorted([before, before, before + 1])


@pytest.mark.slow
def test_sampled_check_counts_the_audit_words_in_sampled_continuations(smollm, isolated_cache):
    exact = nw.next_word_table(smollm, NOUNS, progress=False).occupations
    templates = nwp.TEMPLATES[:2]
    per, stats = nw.sampled_check(smollm, exact, templates=templates, max_new_tokens=12, n_boot=100, progress=False)
    prompts = [t.replace("{occupation}", n) for n in NOUNS for t in templates]
    done = generate(smollm, prompts, max_new_tokens=12, temperature=0.7, top_p=0.9, top_k=50, progress=False)
    for i, noun in enumerate(NOUNS):  # independent: the audit's tokens of the noun's completions, by hand
        tokens = [w for c in done["completion"][2 * i:2 * i + 2] for w in lexicon.tokenize(c)]
        f, m = sum(w in lexicon.FEMALE_WORDS for w in tokens), sum(w in lexicon.MALE_WORDS for w in tokens)
        row = per.set_index("occupation").loc[noun]
        assert (row.female_words, row.male_words, row.n_completions) == (f, m, 2)
        assert row.log_odds == pytest.approx(np.log((f + 0.5) / (m + 0.5)))
    rho = stats.set_index("test").loc["spearman"]
    assert rho["n"] == 3 and rho["group_a"] == "log_ratio" and rho["group_b"] == "log_odds"
    with pytest.raises(ParameterError, match="^sampling"):
        nw.sampled_check(smollm, exact, beam_width=2)


@pytest.mark.slow
def test_exact_measure_of_the_60_bls_occupations_against_the_world(smollm):
    """The default build's check on the real table: every BLS noun carries the measure (10 templates), and the
    verdict is the engine's rule on the Spearman interval."""
    shares = occupation_shares()
    found = nw.next_word_table(smollm, shares["occupation"], progress=False)
    assert (found.occupations["n_templates"] == len(nwp.TEMPLATES)).all() and len(found.occupations) == 60
    stats = nw.next_word_validity(found.occupations, shares[["occupation", "bls_pct_female"]], n_boot=300, seed=0)
    rho = stats.set_index("test").loc["spearman"]
    expected, _ = st.spearmanr(found.occupations["log_ratio"], shares["bls_pct_female"])
    assert rho["effect_size"] == pytest.approx(expected, rel=1e-12) and rho["n"] == 60
    assert cv.measure_verdict(stats, "log_ratio") == cv._verdict(rho["ci_low"], 60)
    assert cv._discriminant_verdict(stats, "log_ratio") == "untestable"  # no warmth and competence given


def test_chapter_11_states_the_rules_the_code_applies():
    """The chapter's method section gives the verdict's threshold, the power and the lexicon sizes as the code has
    them, and states the primary analysis before the first code cell that computes a result."""
    cells = nbformat.read(paths.ROOT / "notebooks" / "11_intrinsic_extrinsic.ipynb", as_version=4).cells
    text = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    text = " ".join(text.split())  # the cells wrap their lines anywhere
    assert f"fewer than {cv.MIN_ITEMS} occupations" in text and f"found {int(cv.POWER * 100)}% of the time" in text
    assert (f"the audit's {len(lexicon.FEMALE_WORDS)} female words and one of its {len(lexicon.MALE_WORDS)} male"
            in text)
    first_code = next(i for i, c in enumerate(cells) if c.cell_type == "code")
    assert "**The primary analysis, stated before the results.**" in cells[0].source and first_code > 0


GERMAN = ["Gestern sagte {occupation}, dass"]


@pytest.mark.slow
def test_a_template_in_another_language_is_flagged_and_its_verdicts_read_low_coverage(
        smollm, smollm_quick_bases):
    """Issue 46: the English words after a German clause take 3% of SmolLM2's next word (24% with the built-in
    templates); the ordering still follows the BLS share (supported), and the link with the direction falls to 0.12.
    The tables flag it (``low_coverage``, ``coverage``), the chapter's readings say so in bold, and every table names
    the measure's definition, not the built-in one."""
    shares = occupation_shares()
    exact = nw.next_word_table(smollm, shares["occupation"], templates=GERMAN, progress=False)
    assert (exact.occupations["gendered_mass"] < 2 * nw.MIN_COVERAGE).all()
    definition = nwp.measure_definition(GERMAN)
    for table in (exact.prompts, exact.occupations, exact.words):
        assert set(table["measure_definition"]) == {definition} != {nwp.DEFAULT_DEFINITION}
    stats = nw.next_word_validity(exact.occupations, shares[["occupation", "bls_pct_female"]], n_boot=300, seed=0)
    coverage = exact.occupations["gendered_mass"].median()
    assert stats["coverage"].tolist() == [coverage] * len(stats) and coverage < nw.MIN_COVERAGE
    # issue 58: the ordering's interval lies above 0, but a verdict the book does not read is not "supported"
    rho = stats[(stats["measure"] == "log_ratio") & (stats["test"] == "spearman")].iloc[0]
    assert rho["ci_low"] > 0 and stats["low_coverage"].all()
    assert cv.measure_verdict(stats, "log_ratio") == cv.LOW_COVERAGE and not stats["verdict"].isin(
        ["supported", "not shown"]).any()
    text = nw.describe_next_word(stats, exact.words, smollm.model_id, exact.occupations)
    assert "is measured (Spearman ρ" in text and "and not read (verdict: low coverage)." in text
    assert "**Low coverage: the counted words take only 3% of the next word's probability" in text
    assert "supported" not in text
    # the "they" paragraph of the same run says that its share rests on little of the next word
    neutral = exact.neutral_share(shares[["occupation", "bls_pct_female"]], n_boot=200, seed=0)
    assert "**Low coverage" in neutral.describe() and "rests on a small part" in neutral.describe()
    assert set(neutral.statistics["templates"]) == {'"Gestern sagte …, dass"'}
    # chapter 09 sets it beside a default run's share only with a note naming both measures in words
    default = nw.next_word_table(smollm, shares["occupation"], progress=False).neutral_share(
        shares[["occupation", "bls_pct_female"]], n_boot=200, seed=0)
    assert "Low coverage" not in default.describe() and set(default.statistics["templates"]) == {
        "the book's 10 templates"}
    stacked = pd.concat([neutral.statistics.assign(model_id="german"), default.statistics.assign(model_id="english")])
    gaps = pd.DataFrame(columns=["model_id", "population", "dimension", "gap"])
    side = crossmodel.intrinsic_extrinsic(gaps, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), stacked)
    note = crossmodel.describe_neutral_definitions(side)
    assert note.startswith("**The \"they\" shares above are 2 different measures**")
    assert "german (\"Gestern sagte …, dass\", definition" in note and "english (the book's 10 templates" in note
    assert crossmodel.describe_neutral_definitions(side[side["model_id"] == "english"]) == ""
    assert "validated against the world" not in text and f"definition is `{definition}`" in text
    # the link on the same occupations: flagged in its table and in its reading, its measure named by definition
    check = gender_direction.occupation_validity(smollm, smollm_quick_bases["warmth_competence"], n_boot=100, seed=0)
    world = link.next_word_link(check.values, exact.occupations, direction_verdict="supported", n_boot=200, seed=0)
    primary = world.statistics.set_index(["analysis", "test"]).loc[("primary", "spearman")]
    assert primary["low_coverage"] and primary["note"].startswith("low coverage: the counted words take 3%")
    assert primary["measure_definition"] == definition and definition in primary["extrinsic_measure"]
    assert "**Low coverage" in link.describe_next_word_link(world.statistics, smollm.model_id)
    # beyond warmth and competence too: the discriminant rows ran and are not read
    beyond = nw.next_word_validity(exact.occupations, check.values, n_boot=200, seed=0)
    assert set(beyond.loc[beyond["test"].str.startswith("partial"), "verdict"]) == {cv.LOW_COVERAGE}
    assert "is not read, as the criterion is not (discriminant verdict: low coverage)" in nw.describe_next_word(
        beyond, exact.words, smollm.model_id)


@pytest.mark.slow
def test_the_words_counted_can_be_the_users_own(smollm):
    """``next_word_lexicons`` reaches the measure: German pronouns after the German clause are the words counted
    (their tokens listed), a measure of its own definition, and more of the next word than the English ones."""
    nouns = occupation_shares()["occupation"].iloc[::5].tolist()  # 12 nouns
    own = {"female": ["sie"], "male": ["er"]}
    german = nw.next_word_table(smollm, nouns, templates=GERMAN, lexicons=own, progress=False)
    english = nw.next_word_table(smollm, nouns, templates=GERMAN, progress=False)
    assert german.words[["lexicon", "word", "counted"]].values.tolist() == [["female", "sie", "single token"],
                                                                           ["male", "er", "single token"]]
    assert set(german.occupations["measure_definition"]) == {nwp.measure_definition(GERMAN, own)}
    assert german.occupations["gendered_mass"].median() > english.occupations["gendered_mass"].median()


@pytest.mark.slow
def test_the_built_in_templates_clear_the_coverage_threshold_by_far(smollm):
    """The threshold's reason, recomputed: under the ten built-in templates the audit's words take
    ``_REFERENCE_COVERAGE`` of SmolLM2's next word for the median BLS occupation, the threshold is at most a fifth of
    it, and no occupation comes near it, so the default build reads as before."""
    shares = occupation_shares()
    found = nw.next_word_table(smollm, shares["occupation"], progress=False)
    mass = found.occupations["gendered_mass"]
    assert mass.median() == pytest.approx(nw._REFERENCE_COVERAGE, abs=5e-4)
    assert nw.MIN_COVERAGE <= nw._REFERENCE_COVERAGE / 4.5 and mass.min() > 2 * nw.MIN_COVERAGE
    assert set(found.occupations["measure_definition"]) == {nwp.DEFAULT_DEFINITION}
    stats = nw.next_word_validity(found.occupations, shares[["occupation", "bls_pct_female"]], n_boot=300, seed=0)
    assert not stats["low_coverage"].any()
    text = nw.describe_next_word(stats, found.words, smollm.model_id, found.occupations)
    assert "validated against the world" in text and "Low coverage" not in text and "definition is" not in text


def test_chapter_11_states_the_coverage_threshold_the_code_applies():
    cells = nbformat.read(paths.ROOT / "notebooks" / "11_intrinsic_extrinsic.ipynb", as_version=4).cells
    text = " ".join("\n".join(c.source for c in cells if c.cell_type == "markdown").split())
    assert f"less than {nwp.percent(nw.MIN_COVERAGE)} of its probability for the median occupation" in text
    assert f"(the ten templates give SmolLM2 about {nwp.percent(nw._REFERENCE_COVERAGE)})" in text
