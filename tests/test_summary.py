"""The front page's findings: read from results tables, worded and drawn without hand-typed numbers."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pandas as pd
import pytest
import vl_convert as vlc

from bias_utils.audit import bold, bold_prompts, occupation_headline, occupation_units, occupations, replication
from bias_utils.book import findings, summary
from bias_utils.core import paths, precision, stats, tables
from bias_utils.core.results import write_table
from bias_utils.models.builtin_models import BUILTIN_MODELS
from bias_utils.report import rendering

A, B = bold_prompts.MALE_GROUP, bold_prompts.FEMALE_GROUP
N_BOOT, N_PERM = 100, 199


def _profile_rows(warmth_g, competence_g, competence_p, layer="mean"):
    """profile_stats rows for names and terms; the CIs are g ± 0.8 (a hand-made table)."""
    rows = []
    for population in ("names", "terms"):
        for dim, g, p in (("warmth", warmth_g, 0.01), ("competence", competence_g, competence_p)):
            rows.append({"population": population, "layer": layer, "dimension": dim, "group_a": "female",
                         "group_b": "male", "mean_a": g / 2, "mean_b": -g / 2, "g": g, "g_ci_low": g - 0.8,
                         "g_ci_high": g + 0.8, "p_holm": p, "test": "welch_t"})
    return pd.DataFrame(rows)


def _validity(dimensions, verdicts, layers, sources=None):
    """axis_validity rows (a hand-made table with the columns verdict_phrase reads)."""
    n = len(dimensions)
    return pd.DataFrame({"dimension": dimensions, "layer": layers, "verdict": verdicts,
                         "context_source": sources or ["generated"] * n, "auc": [0.86, 0.58, 0.8, 0.5][:n],
                         "null_low": 0.31, "null_high": 0.71, "p": [0.005, 0.21, 0.01, 0.5][:n],
                         "n_permutations": 199, "n_high": 40, "n_low": 12, "detectable_auc": 0.71})


@pytest.fixture(scope="module")
def published():
    """The published audit's completions (with their units), its headline table from the audit's own statistics,
    and its unit table."""
    units = occupation_units.unit_table("audit")
    metrics = bold.completion_metrics(occupation_units.annotate(replication.load_published_completions(), "audit",
                                                                units))
    table, _ = bold.audit_statistics(metrics, n_boot=N_BOOT, n_permutations=N_PERM, nested=False)
    occ = occupations.occupation_table(metrics[metrics["in_primary"]], by="unit")
    head = occupation_headline.headline_table(table, occ, occupations.influence_table(occ, A, B), n_boot=N_BOOT)
    return metrics, head, units


@pytest.fixture(scope="module")
def results(tmp_path_factory, published):
    """A decoder with the audit's real headline on the published completions, and an encoder."""
    root = tmp_path_factory.mktemp("results")
    # the primary layer (mean) beside a single layer whose gaps the front page must not read
    write_table(pd.concat([_profile_rows(1.0, -0.5, 0.3), _profile_rows(-2.0, 2.0, 0.001, layer="3")]),
                root / "dec--1--fp32" / tables.NAMES.PROFILE_STATS)
    write_table(published[1], root / "dec--1--fp32" / tables.NAMES.BOLD_HEADLINE)
    write_table(published[2], root / "dec--1--fp32" / tables.NAMES.BOLD_UNITS)
    # both decoder axes are supported with the primary contexts; another context source's verdict is not read
    write_table(_validity(["warmth", "competence", "warmth"], ["supported", "supported", "not shown"],
                          ["mean", "mean", "mean"], ["generated", "generated", "dictionary"]),
                root / "dec--1--fp32" / tables.NAMES.AXIS_VALIDITY)
    write_table(_profile_rows(-0.9, 1.2, 0.001), root / "enc--2--fp32" / tables.NAMES.PROFILE_STATS)
    # the encoder's competence axis is not shown to beat its null at the headline layer (it is at layer 3)
    write_table(_validity(["warmth", "competence", "competence"], ["supported", "not shown", "supported"],
                          ["mean", "mean", "3"]), root / "enc--2--fp32" / tables.NAMES.AXIS_VALIDITY)
    # the decoder ran the robustness chapter: 12 of 96 warmth specifications agree and are significant
    robust = pd.DataFrame({"population": ["names"], "dimension": ["warmth"], "expected_sign": [1], "n_specs": [96],
                           "share_agree_significant": [12 / 96], "share_positive_significant": [12 / 96],
                           "share_negative_significant": [0.0], "median_g": [0.4], "n_agree_significant_p": [0.0199],
                           "n_permutations": [200], "axis_auc": [0.7], "axis_p": [0.01], "axis_verdict": ["supported"],
                           "axis_reading": ["supported (AUC 0.70, null 95% band 0.31–0.69, p = 0.01, n 40/12)"]})
    write_table(robust, root / "dec--1--fp32" / tables.NAMES.ROBUSTNESS_SUMMARY)
    # a model whose profile has no axis verdict (chapter 03 did not run): its gaps are not read
    write_table(_profile_rows(0.7, 0.6, 0.01), root / "new--4--fp32" / tables.NAMES.PROFILE_STATS)
    return root


def test_a_models_reading_carries_each_studys_primary_estimate_in_at_most_80_words(published):
    """A decoder's reading is each registered finding's primary estimate with its interval, in the chapter's
    printing: the audit's difference in male share (percentage points, its occupation interval) and how many
    completions carry a gendered word; the published selection's pooled odds ratio, whose interval is the occupation
    cluster bootstrap over BOLD keys recomputed on the completions (stats.cluster_bootstrap_ci, independent of the
    vectorised one), stays in its chapter."""
    metrics, head, _ = published

    def log_or(d):
        words = [[d.loc[d["group"] == g, w].sum() for w in ("male_words", "female_words")] for g in (A, B)]
        return np.log(stats.odds_ratio(words)["effect_size"])

    _, low, high = (np.exp(x) for x in stats.cluster_bootstrap_ci(metrics, log_or, cluster="occupation",
                                                                   strata="group", n_boot=N_BOOT, seed=0))
    h = head.iloc[0]
    assert (h.published_ci_low, h.published_ci_high) == pytest.approx((low, high))
    page = findings.Page(["dec"], {"dec": "dec"}, {}, pd.DataFrame(columns=["model_id", "population"]),
                         head.assign(model_id="dec"), pd.DataFrame(columns=["model_id"]))
    reading = findings.model_reading(page, "dec")
    h = occupation_headline.headline(head)
    primary = metrics[metrics["in_primary"]]
    assert reading == (
        "Writing: male share of gendered words, male- minus female-dominated occupations: "
        f"{occupation_headline.percentage_points(h['share_difference'])} points, 95% CI "
        f"{occupation_headline.mc_interval(h, 'share_difference', 100)}; {int(primary.any_gendered.sum())} of "
        f"{len(primary):,} completions carry a gendered word.")
    assert "odds ratio" not in reading and len(reading.split()) <= findings.READING_WORDS
    # the difference is the groups' male shares recomputed here with pandas
    words = primary.groupby(["group", "unit"])[["male_words", "female_words"]].sum()
    total = words["male_words"] + words["female_words"]
    share = (words["male_words"] / total)[total > 0].groupby(level="group").mean()
    want = precision.percent_text(share[A] - share[B])[:-1]
    assert occupation_headline.percentage_points(h["share_difference"]) == want


def test_summary_table_reads_every_model(results, published):
    table = summary.summary_table(["dec--1--fp32", "enc--2--fp32", "gone--3--fp32", "new--4--fp32"], results,
                                  can_generate={"enc--2--fp32": False})
    assert list(table.columns) == summary._SUMMARY_COLUMNS
    assert table["model_id"].tolist() == ["dec", "enc", "gone", "new"]
    dec, enc, gone, new = table.itertuples(index=False)
    # the primary layer's gap, not layer 3's
    assert (dec.names_warmth_g, dec.names_warmth_ci_low, dec.names_warmth_ci_high) == pytest.approx((1.0, 0.2, 1.8))
    assert dec.names_warmth_verdict == "supported" and enc.names_competence_verdict == "not shown"
    h = published[1].iloc[0]
    assert [getattr(dec, c) for c in summary._AUDIT_COLUMNS] == [h[c] for c in summary._AUDIT_COLUMNS]
    assert summary._AUDIT_COLUMNS[:3] == ["male_share_a", "male_share_b", "share_difference"]
    assert dec.sentence.startswith(
        "Warmth: female names nearer the warm end, g = 1.00, 95% CI 0.20 to 1.80. Competence: no gap shown, "
        "g = −0.50, 95% CI −1.30 to 0.30. Writing: male share of gendered words")
    assert enc.sentence == ("Warmth: male names nearer the warm end, g = −0.90, 95% CI −1.70 to −0.10. Competence: "
                            "not read (its axis is not validated). Writing: none (an encoder).")
    assert gone.sentence == "No results of this build's chapters."
    assert new.sentence == ("Warmth: not read (its axis is not validated). Competence: not read (its axis is not "
                            "validated).")
    assert all(len(t.split()) <= findings.READING_WORDS for t in table["sentence"])
    assert pd.isna(enc.share_difference) and pd.isna(enc.marginal_odds_ratio)


def test_one_registration_adds_a_finding_and_its_clause_of_every_reading(results):
    """A chapter's finding is one _register call: its bullet joins the findings and its clause each reading."""
    models = ["dec--1--fp32", "enc--2--fp32"]
    gaps, head = summary.read_summary(models, results)
    extra = findings.Finding("extra", "profile", "An extra finding.", lambda page: "It says so.",
                             lambda page, model: "Extra: 1 (95% CI 0 to 2)" if model.startswith("dec") else None)
    before = list(findings.FINDINGS)
    findings.register(extra)
    try:
        bullets = summary._findings_bullets(gaps, head, models, {"enc--2--fp32": False}, results_dir=results)
        assert "**An extra finding.** It says so." in bullets
        table = summary.summary_table(models, results, {"enc--2--fp32": False})
        assert table["sentence"].iloc[0].endswith(" Extra: 1 (95% CI 0 to 2).")
        assert "Extra" not in table["sentence"].iloc[1]
        with pytest.raises(ValueError, match="registered already"):
            findings.register(extra)
    finally:
        findings.FINDINGS[:] = before


def test_findings_bullets_say_which_model_shows_what_with_its_number(results, published):
    """The findings list says in plain words which model shows what, each model linked to its chapter, with the
    number behind it from the table the readings read (the planted gaps: g 1.0 ± 0.8 and −0.9 ± 0.8), in the gap's
    own words (standard deviations, from the group the sentence names; female − male where it names none), and a term
    a reader may not know linked to its definition on the page."""
    models = ["dec--1--fp32", "enc--2--fp32", "new--4--fp32"]
    gaps, head = summary.read_summary(models, results)
    warmth, competence, writing, caveat = summary._findings_bullets(gaps, head, models, {"enc--2--fp32": False},
                                                                   results_dir=results)
    assert warmth == (
        "**Warmth of first names.** Female first names sit nearer the warm end than male names in "
        "{doc}`dec </models/dec--1--fp32/04_profiles>` (1.00 standard deviations, 95% CI 0.20 to 1.80), as Schuster "
        "et al. 2024 found. Male first names sit nearer the warm end than female names in "
        "{doc}`enc </models/enc--2--fp32/04_profiles>` (0.90 standard deviations, 95% CI 0.10 to 1.70), the opposite "
        "of Schuster et al. 2024. Not read in {doc}`new </models/new--4--fp32/03_projection_accuracy>`: its warmth "
        "axis is not validated.")
    assert competence.startswith(
        "**Competence of first names.** No gap is shown in {doc}`dec </models/dec--1--fp32/04_profiles>` (female − "
        "male −0.50 standard deviations, 95% CI −1.30 to 0.30). Not read in {doc}`enc </models/enc--2--fp32/"
        "03_projection_accuracy>`")
    h = occupation_headline.headline(published[1])
    points = occupation_headline.percentage_points(h["share_difference"])
    assert writing == (
        "**Writing about occupations.** {doc}`dec </models/dec--1--fp32/06_bold_audit>` shows "
        f"{occupation_headline.difference_reading(h)}: {precision.percent_text(h['male_share_a'])} of its gendered "
        "words about a typical male-dominated occupation are male and "
        f"{precision.percent_text(h['male_share_b'])} about a typical female-dominated one, {points} points apart "
        f"(95% CI {occupation_headline.mc_interval(h, 'share_difference', 100)}), though only "
        f"{int(h['n_gendered_completions'])} of {int(h['n_completions'])} completions carry a gendered word; enc "
        "writes no text (an encoder); new has no audit results.")
    # a difference not shown is said so, not "shown ... is not shown"
    unclear = head.assign(share_difference_ci_low=-0.2, share_difference_ci_high=0.9)
    assert summary._findings_bullets(gaps, unclear, models, {"enc--2--fp32": False}, results_dir=results)[2].startswith(
        "**Writing about occupations.** In {doc}`dec </models/dec--1--fp32/06_bold_audit>`, a difference between "
        "male-dominated and female-dominated occupations in the share of male words is not shown: ")
    # the numbers are the readings' numbers, printed alike
    table = summary.summary_table(models, results, {"enc--2--fp32": False})
    assert "g = 1.00, 95% CI 0.20 to 1.80" in table["sentence"].iloc[0]
    assert f"{points} points, 95% CI {occupation_headline.mc_interval(h, 'share_difference', 100)}" in \
        table["sentence"].iloc[0]
    assert caveat.startswith("**Not shown is not absent.**")
    linked = summary._with_terms(warmth)
    assert "{term}`warm end <warm end>`" in linked and linked.count("{term}`warm end") == 1
    assert "{term}`not validated <validated>`" in linked
    assert "{term}`standard deviations <standard deviations>`" in linked
    # a term inside a link's text is left alone, and a term inside another term's span is not linked again
    assert summary._with_terms("{doc}`not shown </x>` not shown") == ("{doc}`not shown </x>` "
                                                                      "{term}`not shown <not shown>`")
    assert summary._with_terms("partial ρ = 0.39 and ρ = 0.53") == (
        "{term}`partial ρ <partial ρ>` = 0.39 and {term}`ρ <Spearman's ρ>` = 0.53")


def test_a_gap_not_shown_after_holms_correction_names_what_decides_it():
    """A gap whose unadjusted interval excludes 0 but whose Holm-adjusted p is 0.05 or more is "not shown", and its
    sentence says that the printed interval is unadjusted and gives the adjusted p that decides it."""
    row = pd.Series({"g": -0.61, "g_ci_low": -1.18, "g_ci_high": -0.06, "p_holm": 0.097})
    row = next(pd.DataFrame([row]).itertuples(index=False))
    assert findings._gap_numbers(row, "none") == ("female − male −0.61 standard deviations, 95% CI −1.18 to −0.06 "
                                                  "unadjusted; Holm-adjusted p = 0.097")
    inside = row._replace(g_ci_high=0.05)
    assert findings._gap_numbers(inside, "none") == "female − male −0.61 standard deviations, 95% CI −1.18 to 0.05"


def test_running_text_names_models_by_their_names_unless_two_would_share_one(results):
    smol, mini = "smollm2-135m-instruct--b179c9523d0e--fp32", "minilm-l6--53aa51172d14--fp32"
    assert findings.model_names([smol, mini]) == {smol: BUILTIN_MODELS["smollm2-135m-instruct"].title,
                                            mini: BUILTIN_MODELS["minilm-l6"].title}
    # the same model in two precisions keeps its dtype; two revisions of one model fall back to their short ids
    bf16 = smol.replace("fp32", "bf16")
    assert findings.model_names([smol, bf16])[bf16] == BUILTIN_MODELS["smollm2-135m-instruct"].title + " (bf16)"
    other = smol.replace("b179c9523d0e", "0123456789ab")
    assert findings.model_names([smol, other]) == {smol: smol, other: other}
    # the page's table of readings names its rows as the findings do
    table = summary.summary_table(["dec--1--fp32"], results).assign(model_id="smollm2-135m-instruct")
    assert summary._markdown_table(table).splitlines()[2].startswith("| SmolLM2-135M-Instruct | ")


def test_units_are_method_a_generated_paragraph_the_methods_include(results, published, tmp_path):
    """What counts as an occupation is written for the methods chapter (which includes it under the target the
    front page links), from the build's own unit table, not a finding of the front page."""
    page = summary.write_units_page(tmp_path / "units.md", ["dec--1--fp32", "enc--2--fp32"], results)
    assert page.read_text() == "In this build: " + occupation_units.describe_units(published[2]) + "\n"
    none = summary.write_units_page(tmp_path / "none.md", ["enc--2--fp32"], results).read_text()
    assert none.startswith("No model of this build wrote an audit")
    methods = (paths.ROOT / "book" / "methods_bold.md").read_text(encoding="utf-8")
    target = "(what-an-occupation-is)=\n## What an occupation is\n"
    assert target in methods and f"```{{include}} _generated/{summary.UNITS_PAGE}\n```" in methods
    section = methods.index(target)
    assert section < methods.index(f"_generated/{summary.UNITS_PAGE}") < methods.index("\n## ", section + len(target))


def test_summary_chart_draws_gaps_and_the_occupation_interval(results):
    gaps, head = summary.read_summary(["dec--1--fp32", "enc--2--fp32"], results)
    assert len(gaps) == 2 * 2 * 2  # models × populations × (warmth, competence), at the primary layer only
    valid = gaps.set_index(["model_id", "population", "dimension"])["axis_valid"]
    assert not valid[("enc--2--fp32", "terms", "competence")]  # False, not NA (``not NA`` raises)
    assert bool(valid[("enc--2--fp32", "names", "warmth")]) and bool(valid[("dec--1--fp32", "names", "warmth")])
    spec = summary.summary_chart(gaps, head).to_dict()
    titles = [panel["title"] for panel in spec["hconcat"]]
    assert titles == ["names: female − male", "terms: female − male", "BOLD audit: male share of gendered words"]
    share_panel = spec["hconcat"][2]["layer"][1]["encoding"]
    assert (share_panel["x"]["field"], share_panel["x2"]["field"]) == ("share_difference_ci_low_points",
                                                                       "share_difference_ci_high_points")
    drawn = pd.DataFrame(spec["datasets"][spec["hconcat"][2]["layer"][1]["data"]["name"]])
    h = head.dropna(subset=["share_difference"]).iloc[0]
    assert drawn["share_difference_points"].tolist() == pytest.approx([100 * h["share_difference"]])
    svg = vlc.vegalite_to_svg(spec)
    assert all(label in svg for label in ("dec", "enc", "male share, difference (points)"))
    axis = spec["hconcat"][2]["layer"][0]["encoding"]["x"]["axis"]
    assert axis["values"] == [-100, -50, 0, 50, 100]  # the whole range a difference in shares can take
    alt_text, caption = rendering._figure_text(spec)
    assert alt_text == ("Dot plots of the female − male gaps on warmth and competence for names and terms per model, "
                        "beside the BOLD audit's difference in male share per model that writes, with 95% confidence "
                        "intervals.")
    assert caption.startswith("A row per model, named in every panel. In the names and terms panels, a dot is the "
                              "female − male gap")
    assert "In the last panel" in caption and "A faint gap" in caption
    assert "In the last panel" not in rendering._figure_text(summary.summary_chart(gaps, head.iloc[0:0]).to_dict())[1]
    with pytest.raises(ValueError, match="no profile gaps"):
        summary.summary_chart(gaps.iloc[0:0], head)


def test_summary_page_written_once(results, tmp_path):
    page = tmp_path / "_generated" / "summary.md"
    summary.write_summary_page(page, ["dec--1--fp32", "enc--2--fp32"], results, note="*QUICK build.*")
    text = page.read_text()
    assert text.startswith("## Findings\n\n- **Warmth of first names.**")
    primary = summary._with_terms(summary._primary_sentence())
    assert text.index("- **Writing about occupations.**") < text.index(primary)
    assert text.index(primary) < text.index("| model | reading |") < text.index(
        'id="bias-summary-chart"')
    assert "*QUICK build.*" in text and "What this build found" not in text
    assert "| dec | Warmth: female names nearer the {term}`warm end <warm end>`" in text
    assert "| enc | Warmth: male names nearer the {term}`warm end <warm end>`" in text
    # the figure is numbered and captioned as a chapter's, with a static image the front page reaches
    assert '<figure class="bias-figure" id="figure-1"' in text and "<figcaption>" in text
    image = text.split('<noscript><img class="bias-figure-image" src="')[1].split('"')[0]
    assert image.startswith("_generated/figures/") and (tmp_path / image).read_text().startswith("<svg")
    stamp = page.stat().st_mtime_ns
    summary.write_summary_page(page, ["dec--1--fp32", "enc--2--fp32"], results, note="*QUICK build.*")
    assert page.stat().st_mtime_ns == stamp
    assert "No model was built" in summary._summary_markdown([], results)
    assert summary._findings_bullets(*summary.read_summary([], results), []) == []


def test_link_bullet_gives_each_models_next_word_rho_and_says_when_its_interval_includes_zero(results, tmp_path):
    """The front page's link is chapter 11's primary: the next-word ρ across the BLS occupations, then the partial
    ρ beyond their share of women; the BOLD-based slope (a robustness row) is not the finding."""
    models = ["dec--1--fp32", "enc--2--fp32", "new--4--fp32"]
    gaps, head = summary.read_summary(models, results)
    rows = pd.DataFrame({
        "model_id": ["dec--1--fp32"] * 3 + ["new--4--fp32"] * 2,
        "test": ["spearman", "partial_spearman", "spearman", "spearman", "partial_spearman"],
        "analysis": ["primary", "beyond the BLS share", "BOLD primary units", "primary", "beyond the BLS share"],
        "intrinsic": "gender_position", "primary": [True, False, False, True, False], "readable": True,
        "direction_verdict": "supported", "effect_size": [0.53, 0.39, 0.58, 0.05, 0.02],
        "ci_low": [0.32, 0.13, 0.41, -0.2, -0.25], "ci_high": [0.72, 0.62, 0.73, 0.3, 0.28],
        "p": [1e-5, 0.002, 1e-9, 0.7, 0.9], "n": [60, 60, 88, 60, 60], "note": "",
        "extrinsic_measure": "next-word log-ratio (exact)"})
    bullets = summary._findings_bullets(gaps, head, models, {"enc--2--fp32": False}, rows, results_dir=results)
    assert len(bullets) == 5 and bullets[-1].startswith("**Not shown is not absent.**")
    assert bullets[3] == (
        "**Does the bias inside predict the bias it writes?** In {doc}`dec </models/dec--1--fp32/"
        "11_intrinsic_extrinsic>`, the occupations it places nearer its female terms are continued more often with "
        "a female word (ρ = 0.53, 95% CI 0.32 to 0.72, over 60 occupations), and it holds beyond their share of women "
        "in the workforce (partial ρ = 0.39, 95% CI 0.13 to 0.62); in {doc}`new </models/new--4--fp32/"
        "11_intrinsic_extrinsic>`, where the model places an occupation inside does not show in how it continues a "
        "sentence about it (ρ = 0.05, 95% CI −0.20 to 0.30, over 60 occupations: not shown); enc writes no text (an "
        "encoder).")
    # a partial ρ whose interval includes 0 is said to be not shown
    weaker = rows.assign(ci_low=np.where(rows["test"] == "partial_spearman", -0.05, rows["ci_low"]))
    assert ("but that it holds beyond their share of women in the workforce is not shown (partial ρ = 0.39, 95% CI "
            "−0.05 to 0.62)") in summary._findings_bullets(gaps, head, models, {"enc--2--fp32": False}, weaker)[3]
    page = findings.read_page(models, results, {"enc--2--fp32": False}, gaps, head, rows)
    assert findings._link_reading(page, "dec--1--fp32") == ("Inside and writing: ρ = 0.53, 95% CI 0.32 to 0.72, "
                                                            "60 occupations")
    assert findings._link_reading(page, "new--4--fp32").endswith("60 occupations, not shown")
    assert findings._link_reading(page, "enc--2--fp32") is None
    # a direction that failed the check against the BLS share is named as such, with no number
    unread = rows.assign(readable=rows["model_id"] == "dec--1--fp32",
                         direction_verdict=np.where(rows["model_id"] == "dec--1--fp32", "supported", "not shown"))
    clause = summary._findings_bullets(gaps, head, models, {"enc--2--fp32": False}, unread)[3]
    assert ("in {doc}`new </models/new--4--fp32/11_intrinsic_extrinsic>` it is not read: its female − male "
            "direction is not validated") in clause
    assert findings._link_reading(findings.read_page(models, results, None, gaps, head, unread), "new--4--fp32") == (
        "Inside and writing: not read (its female − male direction is not validated)")
    # no decoder with the chapter's results: no bullet; a decoder without the chapter says so
    enc = gaps[gaps["model_id"] == "enc--2--fp32"]
    assert len(summary._findings_bullets(enc, head.iloc[:0], ["enc--2--fp32"], {"enc--2--fp32": False}, rows)) == 3
    assert summary._findings_bullets(gaps, head, models, {"enc--2--fp32": False}, rows.iloc[:3])[3].endswith(
        "; enc writes no text (an encoder); new has no results of this chapter.")
    # the page reads the chapter's table from each model's folder
    root = tmp_path / "results"
    shutil.copytree(results, root)
    write_table(rows.iloc[:3].drop(columns="model_id"), root / "dec--1--fp32" / tables.NAMES.LINK_NEXT_WORD)
    page = summary._summary_markdown(models, root, {"enc--2--fp32": False})
    assert "- **Does the bias inside predict the bias it writes?** In {doc}`dec </models/dec--1--fp32/" in page
    assert page.index("- **Writing about occupations.**") < page.index("- **Does the bias inside")
    assert "{term}`ρ <Spearman's ρ>` = 0.53, 95% CI 0.32 to 0.72, 60 occupations. |" in page
    assert "| dec | " in page and "0.53, 95% CI 0.32 to 0.72, 60 occupations. |" in page


#: The words issue 57 found undefined on the front page, as a reader would search for them (any inflection).
ISSUE_TERMS = {"build": r"\bbuild\b", "completions": r"\bcompletions?\b", "encoder": r"\bencoders?\b",
               "female terms": r"\bfemale terms\b", "gender concept": r"\bgender concept\b",
               "erasing": r"\beras(?:ing|ed|ure)\b", "layer": r"\blayers?\b|\bhidden states?\b",
               "next word": r"\bnext[ -]word\b", "templates": r"\btemplates?\b",
               "primary specification": r"\bprimary specification\b", "Welch's t-test": r"\bWelch's t-test\b",
               "Holm's correction": r"\bHolm's correction\b|\bHolm-adjusted\b", "little cost": r"\blittle cost\b"}


def _unlinked_first_uses(markdown: str) -> dict[str, str]:
    """Each term of :data:`ISSUE_TERMS` whose first use in ``markdown`` (outside a role's target) is not the text of
    a ``{term}`` role, with what surrounds it; a term the page does not use is left out."""
    roles = list(re.finditer(r"\{(\w+)\}`([^`<]*?)(?:\s*<[^`]*>)?`", markdown))
    shown, inside = [], []
    last = 0
    for m in roles:  # the page's text as a reader sees it, each character marked inside a term's link or not
        shown.append(markdown[last:m.start()])
        inside += [False] * (m.start() - last)
        shown.append(m.group(2))
        inside += [m.group(1) == "term"] * len(m.group(2))
        last = m.end()
    shown.append(markdown[last:])
    inside += [False] * (len(markdown) - last)
    text = "".join(shown)
    found = {}
    for term, pattern in ISSUE_TERMS.items():
        m = re.search(pattern, text, re.I)
        if m and not all(inside[m.start():m.end()]):
            found[term] = text[max(0, m.start() - 40):m.end() + 20]
    return {t: found[t] for t in found} | {"(terms used)": sorted(
        t for t, p in ISSUE_TERMS.items() if re.search(p, text, re.I))}


def test_every_term_the_issue_lists_is_linked_at_its_first_use_on_the_page(results, tmp_path):
    """The front page's generated findings link each term issue 57 listed (build, completions, encoder, female
    terms, ...) to its glossary entry at its first use; the planted build uses at least nine of them."""
    root = tmp_path / "results"
    shutil.copytree(results, root)
    rows = pd.DataFrame({"test": ["spearman", "partial_spearman"], "analysis": ["primary", "beyond the BLS share"],
                         "intrinsic": "gender_position", "primary": [True, False], "readable": True,
                         "direction_verdict": "supported", "effect_size": [0.53, 0.39], "ci_low": [0.32, 0.13],
                         "ci_high": [0.72, 0.62], "p": [1e-5, 0.002], "n": [60, 60], "note": "",
                         "extrinsic_measure": "next-word log-ratio (exact)"})
    write_table(rows, root / "dec--1--fp32" / tables.NAMES.LINK_NEXT_WORD)
    page = summary._summary_markdown(["dec--1--fp32", "enc--2--fp32"], root, {"enc--2--fp32": False})
    found = _unlinked_first_uses(page)
    used = found.pop("(terms used)")
    assert found == {}
    assert len(used) >= 9, used
    # the check fails on a page whose first use of a term is plain text
    assert "templates" in _unlinked_first_uses("Seven templates, then {term}`templates <templates>`.")
    assert "templates" not in _unlinked_first_uses("Seven {term}`templates <templates>`, then templates.")


def test_every_term_the_page_links_is_an_entry_of_the_glossary():
    """Each glossary term the front page links (summary._TERMS) is an entry of the glossary in book/index.md, so no
    link of the page lands nowhere; and each entry of the glossary is a term the page can link, or is linked by hand
    in index.md (the second name of a two-name entry aside)."""
    index = (paths.ROOT / "book" / "index.md").read_text(encoding="utf-8")
    block = index.split("```{glossary}\n", 1)[1].split("```", 1)[0]
    entries = {line for line in block.splitlines() if line.strip() and not line.startswith(" ")}
    linked = {term for _, term in summary._TERMS}
    assert linked <= entries, linked - entries
    by_hand = set(re.findall(r"\{term\}`([^`<]+)`", index.split("```{glossary}")[0]))
    assert by_hand == {"build"}
    # the second name of an entry with two ("completion", "completions") is reached through the first
    assert entries - linked - by_hand <= {"completions", "male terms"}
