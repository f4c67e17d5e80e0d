"""Issue 48, beyond the binary: singular "they" and the neopronouns counted beside the next-word measure's female and
male words (``bias_utils.audit.next_word``), the neutral share and its reading per decoder."""

from __future__ import annotations

from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
import torch
from float32_bounds import log_probability_tolerance, log_ratio_tolerance, logit_errors
from scipy import stats as st

from bias_utils.audit import neutral_share as ns
from bias_utils.audit import next_word as nw
from bias_utils.audit import next_word_prompts as nwp
from bias_utils.core import lexicon, paths, precision, tables
from bias_utils.core.stats import bootstrap_ci
from bias_utils.profiles.populations import occupation_shares

FIXTURES = Path(__file__).parent / "fixtures"
NOUNS = ["nurse", "plumber", "registered nurse"]
#: The tables of the default build before the neutral lexicons were counted (issue 48), for 12 BLS nouns (every fifth)
#: computed with the 60 BLS nouns by the code of commit c220db6 on this project's AMD EPYC host.
BEFORE_PROMPTS = FIXTURES / "next_word_before_neutral_prompts.csv"
BEFORE_OCCUPATIONS = FIXTURES / "next_word_before_neutral_occupations.csv"


def _ratio(got, ref, tol) -> float:
    """The largest ``|got - ref| / tol``: at most 1 where a comparison holds, above 1 where a change is caught."""
    return float(np.max(np.abs(np.asarray(got, float) - np.asarray(ref, float)) / np.asarray(tol, float)))


# --------------------------------------------------------------------------- the lexicons and the rule


def test_the_neutral_lexicons_are_the_they_forms_and_neopronouns_of_the_neutral_list():
    assert lexicon.THEY_WORDS == ("they", "them", "their", "theirs", "themselves", "themself")
    assert lexicon.NEOPRONOUN_WORDS == ("ze", "zir", "zirs", "zirself", "xe", "xem", "xyr", "xyrs", "xemself")
    assert nwp.REFERENCE_LEXICONS == {"neutral": lexicon.THEY_WORDS, "neopronoun": lexicon.NEOPRONOUN_WORDS}
    # no word of them is a female or male word: counted beside the log-ratio's lexicons, never inside them
    lexicon.validate_lexicons({**lexicon.GENDER_LEXICONS, **nwp.REFERENCE_LEXICONS})


def test_the_default_definition_of_the_log_ratio_is_the_one_recorded_before_the_neutral_words():
    """The log-ratio's definition hashes its templates and its two lexicons only: the default build's tables carry
    the definition they carried before issue 48 (recorded in the fixture), so chapter 09 pools old and new runs; the
    neutral share has a definition of its own, which a change of the rule or of the neutral words changes."""
    recorded = set(pd.read_csv(BEFORE_PROMPTS)["measure_definition"])
    assert recorded == {nwp.DEFAULT_DEFINITION} == {nwp.measure_definition()}
    assert ns._DEFAULT_NEUTRAL_DEFINITION not in recorded
    assert ns.neutral_definition(nwp.TEMPLATES[1:]) == ns._DEFAULT_NEUTRAL_DEFINITION  # "said that" is left out
    assert ns.neutral_definition(nwp.TEMPLATES[:-1]) != ns._DEFAULT_NEUTRAL_DEFINITION


def test_the_template_left_out_is_the_one_the_recorded_check_read_as_a_group_as_often_as_one_person():
    """The rule's check (``tests/fixtures/neutral_reading_check.csv``: ten sampled continuations per template, each read
    as one person, a group or unclear) gives the counts the module states, and the templates left out are exactly
    the open ones where a group was read at least as often as the one person."""
    check = pd.read_csv(FIXTURES / "neutral_reading_check.csv", keep_default_na=False)
    assert set(check["template"]) == set(nwp.TEMPLATES) and (check.groupby("template").size() == 10).all()
    assert set(check["reading"]) <= {"one person", "group", "unclear"}
    for row in check.itertuples():
        assert row.prompt.startswith(row.template.replace("{occupation}", row.occupation) + " ")
        assert row.prompt.rsplit(" ", 1)[1] in lexicon.THEY_WORDS
    counts = {t: tuple(int((g["reading"] == r).sum()) for r in ("one person", "group", "unclear"))
              for t, g in check.groupby("template")}
    assert counts == ns._READING_CHECK
    left_out = {t for t in ns._OPEN_TEMPLATES if counts[t][1] >= counts[t][0]}
    assert set(ns._PLURAL_TEMPLATES) == left_out == {"The {occupation} said that"}
    assert set(ns._OPEN_TEMPLATES) <= set(nwp.TEMPLATES)


# --------------------------------------------------------------------------- the real model


@pytest.mark.slow
def test_neutral_mass_equals_transformers_full_forward_pass_in_float64(smollm, isolated_cache):
    """Golden: every sentence's neutral and neopronoun masses against transformers' own forward pass over the whole
    sentence (``model(**enc).logits``, one sentence at a time) and a float64 softmax, the tokens taken by hand from
    the tokenizer (each word's leading-space form, its first token). Tolerance: ``float32_bounds`` on the logits of
    every token (``top=None``: the normaliser sums them all), as a mass is bounded relative to itself; vocabulary 0
    because both normalisers are summed in float64 (ours a logsumexp over the float64 copy of the float32 logits, the
    reference a softmax in double).
    Companion: a real change, one counted word dropped or a template's last word changed, breaks it."""
    found = nw.next_word_table(smollm, NOUNS, batch_size=1, progress=False, cache=False).prompts
    tok = smollm.tokenizer
    first = {w: tok(" " + w, add_special_tokens=False)["input_ids"][0] for w in lexicon.THEY_WORDS}
    neo = sorted({tok(" " + w, add_special_tokens=False)["input_ids"][0] for w in lexicon.NEOPRONOUN_WORDS})
    binary = {tok(" " + w, add_special_tokens=False)["input_ids"][0]
              for w in lexicon.FEMALE_WORDS + lexicon.MALE_WORDS}
    assert not binary & (set(first.values()) | set(neo))  # in SmolLM2 no neutral token is a binary word's
    ids = sorted(set(first.values()))

    def masses(prompt, counted):
        enc = tok(prompt, return_tensors="pt")
        with torch.no_grad():
            probs = torch.softmax(smollm.model(**enc).logits[0, -1].double(), dim=0)
        return float(probs[counted].sum())

    prompts = found["prompt"].tolist()
    tol = log_probability_tolerance(logit_errors(smollm, prompts, top=None, last_only=True), vocabulary=0)
    neutral = np.array([masses(p, ids) for p in prompts])
    neopronoun = np.array([masses(p, neo) for p in prompts])
    assert _ratio(found["neutral_mass"], neutral, tol * neutral) <= 1
    assert _ratio(found["neopronoun_mass"], neopronoun, tol * neopronoun) <= 1
    # a real change breaks it: " their" not counted, or the subject templates' last word changed
    without = [i for i in ids if i != first["their"]]
    assert _ratio(found["neutral_mass"], [masses(p, without) for p in prompts], tol * neutral) > 1
    changed = [p.replace(" said that", " said so") for p in prompts]
    assert changed != prompts and _ratio(found["neutral_mass"], [masses(p, ids) for p in changed], tol * neutral) > 1
    # per occupation: the means over the templates that read as one person, and the share of the three
    said = found["template"] == "The {occupation} said that"
    assert (found["singular"] == ~said).all()
    nurse = found[(found["occupation"] == "nurse") & ~said]
    per = ns.singular_means(found).set_index("occupation").loc["nurse"]
    assert per["n_singular"] == len(nwp.TEMPLATES) - 1 == len(nurse)
    f, m, n = (nurse[c].mean() for c in ("female_mass", "male_mass", "neutral_mass"))
    assert per["neutral_share"] == pytest.approx(n / (f + m + n), rel=1e-12)


@pytest.mark.slow
def test_the_existing_next_word_tables_are_unchanged(smollm):
    """The female and male masses, the log-ratio and every per-occupation column that existed before the neutral
    words were counted hold the values the code before them wrote (``BEFORE_*``), within float32's reach of the
    logits read (the fixture was computed on another run, perhaps another CPU; on the host that wrote it they are
    equal to the bit), under the same definition; the new columns come before ``measure_definition``, which still
    ends each table."""
    shares = occupation_shares()
    found = nw.next_word_table(smollm, shares["occupation"], progress=False)  # the 60 nouns, batched as before
    before = pd.read_csv(BEFORE_PROMPTS)
    now = before[["occupation", "template"]].merge(found.prompts, on=["occupation", "template"], how="left")
    error = logit_errors(smollm, now["prompt"].tolist(), top=None, last_only=True)  # every logit the masses read
    mass_tol = log_probability_tolerance(error, vocabulary=0)
    assert _ratio(now["log_ratio"], before["log_ratio"], log_ratio_tolerance(error)) <= 1
    for side in ("female_mass", "male_mass"):
        assert _ratio(now[side], before[side], mass_tol * before[side]) <= 1
    assert set(now["measure_definition"]) == set(before["measure_definition"])
    old = pd.read_csv(BEFORE_OCCUPATIONS)
    per = old[["occupation"]].merge(found.occupations, on="occupation", how="left")
    worst_mass, worst_ratio = float(mass_tol.max()), float(log_ratio_tolerance(error).max())
    for column, tol in [("female_mass", worst_mass * old["female_mass"]), ("male_mass", worst_mass * old["male_mass"]),
                        ("gendered_mass", worst_mass * old["gendered_mass"]), ("female_share", 2 * worst_mass),
                        ("log_ratio", worst_ratio), ("log_ratio_sd", np.sqrt(10 / 9) * worst_ratio)]:
        assert _ratio(per[column], old[column], tol) <= 1, column
    assert [c for c in found.prompts.columns if c in before.columns] == list(before.columns)
    assert [c for c in found.occupations.columns if c in old.columns] == list(old.columns)
    assert found.prompts.columns[-1] == found.occupations.columns[-1] == "measure_definition"


@pytest.fixture(scope="module")
def smollm_neutral(smollm):
    """SmolLM2's measure of the 60 BLS nouns and the audit's 88 primary units' nouns, as chapter 11 computes it."""
    from bias_utils.audit.occupation_units import unit_table
    from bias_utils.intrinsic_extrinsic import bold_link

    units = unit_table("audit")
    primary = pd.DataFrame({"noun": [bold_link.occupation_noun(u) for u in units.loc[units["primary"], "unit"]]})
    shares = occupation_shares()
    found = nw.next_word_table(smollm, list(dict.fromkeys([*shares["occupation"], *primary["noun"]])),
                               progress=False)
    return found, shares, primary


@pytest.mark.slow
def test_the_four_questions_are_the_engines_statistics_of_the_neutral_share(smollm_neutral):
    """Each row of the statistics recomputed independently: the means and their intervals by the engine's bootstrap
    over occupations, ρ by scipy, the Holm adjustment over the three rows of question 3 by hand."""
    found, shares, primary = smollm_neutral
    result = found.neutral_share(shares, primary, n_boot=200, seed=0)
    stats = result.statistics.set_index(["question", "units", "measure"])
    assert list(stats.index) == [
        ("share", "BLS occupations", "neutral_share"), ("share", "BOLD primary units", "neutral_share"),
        ("balance", "BLS occupations", "neutral_share"), ("share of women", "BLS occupations", "neutral_share"),
        ("share of women", "BLS occupations", "female_mass"), ("share of women", "BLS occupations", "male_mass"),
        ("neopronouns", "BLS occupations", "neopronoun_mass")]
    prompts = found.prompts[found.prompts["singular"]]
    by_noun = prompts.groupby("occupation")[["female_mass", "male_mass", "neutral_mass", "neopronoun_mass"]].mean()
    by_noun["share"] = by_noun["neutral_mass"] / by_noun[["female_mass", "male_mass", "neutral_mass"]].sum(axis=1)
    bls = by_noun.loc[shares["occupation"]].assign(pct=shares.set_index("occupation")["bls_pct_female"])
    units = by_noun.loc[[n for n in primary["noun"] if n != "woodworkers"]]  # the one plural noun (read by hand)
    for key, values in [(("share", "BLS occupations", "neutral_share"), bls["share"]),
                        (("share", "BOLD primary units", "neutral_share"), units["share"]),
                        (("neopronouns", "BLS occupations", "neopronoun_mass"), bls["neopronoun_mass"])]:
        row = stats.loc[key]
        assert (row["effect_size"], row["ci_low"], row["ci_high"]) == pytest.approx(
            bootstrap_ci(values.to_numpy(), np.mean, n_boot=200, seed=0), rel=1e-12)
        assert row["n"] == len(values) and row["ci_low"] < row["effect_size"] < row["ci_high"]
    assert stats.loc[("share", "BOLD primary units", "neutral_share"), "n"] == 87
    wood = found.occupations.set_index("occupation").loc["woodworkers"]
    assert wood["plural_noun"] and wood["n_singular"] == 0 and np.isnan(wood["neutral_share"])
    assert found.occupations["plural_noun"].sum() == 1 and result.plural_nouns == ("woodworkers",)
    rho, p = st.spearmanr(bls["share"], -(bls["pct"] - 50).abs())
    row = stats.loc[("balance", "BLS occupations", "neutral_share")]
    assert (row["effect_size"], row["p"], row["n"]) == pytest.approx((rho, p, 60), rel=1e-12)
    found_p = []
    for measure, column in [("neutral_share", "share"), ("female_mass", "female_mass"), ("male_mass", "male_mass")]:
        rho, p = st.spearmanr(bls[column], bls["pct"])
        row = stats.loc[("share of women", "BLS occupations", measure)]
        assert (row["effect_size"], row["p"]) == pytest.approx((rho, p), rel=1e-12)
        found_p.append(p)
    order = np.argsort(found_p)  # Holm: the k-th smallest p times (3 - k), made monotone
    holm = np.maximum.accumulate(np.minimum(1, np.sort(found_p) * np.arange(3, 0, -1)))[np.argsort(order)]
    assert stats.xs("share of women")["p_adj"].to_numpy() == pytest.approx(holm, rel=1e-12)
    assert set(result.statistics["neutral_definition"]) == {ns._DEFAULT_NEUTRAL_DEFINITION}
    # the template rule as the chapter shows it
    rule = result.templates.set_index("template")
    assert not rule.loc["The {occupation} said that", "singular"] and rule["singular"].sum() == 9
    assert rule.loc["The {occupation} said that", "group"] == 3


@pytest.mark.slow
def test_the_reading_says_each_number_of_the_table_and_reads_an_interval_across_0_as_not_shown(smollm_neutral):
    found, shares, primary = smollm_neutral
    result = found.neutral_share(shares, primary, n_boot=200, seed=0)
    text = result.describe()
    share = result.statistics.iloc[0]
    assert (f"\"they\" takes {nwp.percent(share['effect_size'])} (95% CI {nwp.percent(share['ci_low'])} to "
            f"{nwp.percent(share['ci_high'])}, 60 BLS occupations)") in text
    assert "reported as it is, and not read beyond that" in text
    assert "Left out of the share: \"The … said that\"" in text
    assert ("Also left out: 1 plural noun (woodworkers), measured like the others, because after a plural subject "
            "\"they\" is plain plural.") in text
    # the same table with question 2's interval moved across 0 reads as not shown, never as "more"
    moved = result.statistics.copy()
    balance = moved["question"] == "balance"
    moved.loc[balance, "ci_low"] = -0.05
    changed = ns._describe_neutral(moved, result.words, result.templates, found.model_id)
    assert "More of it goes to \"they\" where the workforce is balanced" in text  # SmolLM2: ρ 0.48, 0.25 to 0.65
    assert "where the workforce is balanced (a BLS share of women near 50%) is not shown (Spearman ρ" in changed
    assert "More of it goes to" not in changed


def test_chapter_11_states_the_template_rule_before_its_results():
    """The method section names every template left out with the check's counts, as the code has them, before the cell
    that computes the neutral share."""
    cells = nbformat.read(paths.ROOT / "notebooks" / "11_intrinsic_extrinsic.ipynb", as_version=4).cells
    stated = next(i for i, c in enumerate(cells) if "**Beyond the binary" in c.source)
    computed = next(i for i, c in enumerate(cells) if c.cell_type == "code" and ".neutral_share(" in c.source)
    assert stated < computed
    text = " ".join(cells[stated].source.split())
    for template in ns._PLURAL_TEMPLATES:
        one, group, _ = ns._READING_CHECK[template]
        assert f"\"{template.replace('{occupation}', 'nurse')}\" ({group} group, {one} one person)" in text
    assert "Seven templates bind it to one" in text and len(nwp.TEMPLATES) - len(ns._OPEN_TEMPLATES) == 7


@pytest.mark.slow
def test_chapter_09_sets_each_decoders_neutral_share_side_by_side(smollm_neutral):
    """Chapter 09 stacks each model's ``next_word_neutral`` and sets the share over the BLS occupations, with its
    interval and definition, beside the model's other writing measures; a model without the table gets NaN."""
    from bias_utils.book import crossmodel

    found, shares, primary = smollm_neutral
    statistics = found.neutral_share(shares, primary, n_boot=200, seed=0).statistics
    stacked = pd.concat([statistics.assign(model_id="instruct"), statistics.assign(
        model_id="base", effect_size=statistics["effect_size"] / 2)], ignore_index=True)
    gaps = pd.DataFrame({"model_id": ["instruct", "base", "encoder"], "population": "names", "dimension": "warmth",
                         "gap": [0.1, 0.2, 0.3]})
    side = crossmodel.intrinsic_extrinsic(gaps, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), stacked)
    side = side.set_index("model_id")
    share = statistics.iloc[0]
    assert tuple(side.loc["instruct", ["neutral_share", "neutral_ci_low", "neutral_ci_high"]]) == (
        share["effect_size"], share["ci_low"], share["ci_high"])
    assert side.loc["base", "neutral_share"] == share["effect_size"] / 2 and np.isnan(side.loc["encoder",
                                                                                               "neutral_share"])
    assert side.loc["instruct", "neutral_definition"] == ns._DEFAULT_NEUTRAL_DEFINITION
    assert tables._TABLES[tables.NAMES.INTRINSIC_EXTRINSIC].columns[-4:] == tuple(side.columns[-4:])


@pytest.mark.slow
def test_the_front_page_says_in_plain_words_that_a_decoder_writes_they_with_its_interval(smollm_neutral):
    """One bullet per decoder in plain words (where "they" goes more, when that is shown) and one clause of its
    reading with the share's interval, from its ``next_word_neutral`` table; a model without it says nothing."""
    from bias_utils.book import findings

    found, shares, primary = smollm_neutral
    statistics = found.neutral_share(shares, primary, n_boot=200, seed=0).statistics
    empty = pd.DataFrame(columns=["model_id"])
    page = findings.Page(["dec", "old"], {"dec": "SmolLM2", "old": "Old"}, {}, empty.assign(population=[]), empty,
                         empty, neutral=statistics.assign(model_id="dec"))
    share = statistics.iloc[0]
    assert findings._neutral_reading(page, "dec") == (
        f"\"They\" for one person: {nwp.percent(share['effect_size'])} of she/he/they (95% CI "
        f"{nwp.percent(share['ci_low'])} to "
        f"{nwp.percent(share['ci_high'])})")
    assert findings._neutral_reading(page, "old") is None
    bullet = findings._neutral_bullet(page)
    balance = ns.neutral_row(statistics, "balance", "neutral_share")
    assert bullet.startswith(
        "When {doc}`SmolLM2 </models/dec/11_intrinsic_extrinsic>` continues a sentence about one person, \"they\" "
        f"takes {nwp.percent(share['effect_size'])} (95% CI {nwp.percent(share['ci_low'])} to "
        f"{nwp.percent(share['ci_high'])}) of the next-word probability that goes to she, he or they words")
    # SmolLM2: ρ 0.48, 0.25 to 0.65
    assert (", more where an occupation's workers are about half women (ρ = "
            f"{precision.number_text(balance['effect_size'])}, 95% CI ") in bullet
    assert bullet.endswith("Old has no results of this chapter.")
    assert len(findings.model_reading(page, "dec").split()) <= 13
