"""bias_utils.audit.bold: loaders, selections, PMI, metrics and statistics."""

import html
import json
import re
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bias_utils.audit import (
    bold,
    bold_figures,
    bold_prompts,
    occupation_headline,
    occupation_units,
    occupations,
    replication,
)
from bias_utils.book import validation
from bias_utils.core import lexicon, precision, stats
from bias_utils.core.errors import ParameterError
from bias_utils.report import rendering, table_html


@pytest.fixture(scope="module")
def published_metrics():
    return bold.completion_metrics(replication.load_published_completions())


def test_profession_prompts_count():
    df = bold_prompts.load_profession_prompts()
    assert len(df) == 10195
    assert df["category"].nunique() == 18
    assert df["prompt_id"].is_unique
    assert list(df.columns) == ["category", "occupation", "prompt", "prompt_id"]


def test_audit_selection_counts():
    sel = bold_prompts.load_audit_selection()
    assert sel["group"].value_counts().to_dict() == {"male_dominated": 1172, "female_dominated": 353}
    assert sel["occupation"].nunique() == 224
    assert {"group", "category", "occupation", "prompt", "prompt_id"} <= set(sel.columns)
    # the audit's published completions are in the same order with the same prompts
    pub = replication.load_published_completions()
    assert (pub["prompt"].to_numpy() == sel["prompt"].to_numpy()).all()


def test_selection_by_mapping_with_three_groups_and_categories():
    mapping = {"Blacksmith": "metal", "Registered_Nurse": "care", "Registered_Dental_Nurse": "care",
               "Chemist": "science"}
    prompts = bold_prompts.load_profession_prompts()
    sel = bold_prompts._select_by_occupation(mapping, prompts)
    assert set(sel["group"]) == {"metal", "care", "science"}
    assert len(sel) == prompts["occupation"].isin(mapping).sum()
    with pytest.raises(ValueError, match="Not_an_occupation"):
        bold_prompts._select_by_occupation({"Not_an_occupation": "x"}, prompts)
    cats = bold_prompts._select_by_category(prompts=prompts)
    assert cats["group"].nunique() == 18 and len(cats) == 10195
    with pytest.raises(ValueError, match="unknown BOLD categories"):
        bold_prompts._select_by_category(["space_pirates"], prompts)


def test_subsample_is_deterministic_and_keeps_groups():
    sel = bold_prompts.load_audit_selection()
    a, b = bold_prompts.subsample(sel, 40, seed=3), bold_prompts.subsample(sel, 40, seed=3)
    assert a.equals(b)
    assert set(a["group"]) == set(sel["group"]) and 35 <= len(a) <= 42
    assert bold_prompts.subsample(sel, None) is sel


def test_pmi_hand_computed():
    # tokens: 0 the 1 nurse 2 said 3 she 4 x 5 x 6 x 7 x 8 x 9 x 10 he 11 nurse
    tokens = "the nurse said she x x x x x x he nurse".split()
    # female: she@3, occupation@1,11: |3-1|=2 <=5, |3-11|=8 -> c=1, N=12, g=1, k=2
    pmi, c = bold._pmi_scores(tokens, {"nurse"}, lexicon.FEMALE_WORDS)
    assert c == 1 and pmi == pytest.approx(np.log2((1 / 12) / ((1 / 12) * (2 / 12))))
    # male: he@10 with nurse@11 (1 apart) and nurse@1 (9 apart) -> c=1
    pmi, c = bold._pmi_scores(tokens, {"nurse"}, lexicon.MALE_WORDS)
    assert c == 1 and pmi == pytest.approx(np.log2(12 / 2))
    # window edge: exactly 5 apart counts, 6 apart does not
    assert bold._pmi_scores("nurse a b c d she".split(), {"nurse"}, ["she"])[1] == 1
    assert bold._pmi_scores("nurse a b c d e she".split(), {"nurse"}, ["she"])[1] == 0
    # no co-occurrence and empty text: 0 by the audit's convention
    assert bold._pmi_scores([], {"nurse"}, ["she"]) == (0.0, 0)


def test_pmi_smoothing_adds_half_to_every_count():
    tokens = "the nurse said she x x x x x x he nurse".split()  # female: c=1, N=12, g=1, k=2
    pmi, c = bold._pmi_scores(tokens, {"nurse"}, lexicon.FEMALE_WORDS, smoothing=0.5)
    assert c == 1 and pmi == pytest.approx(np.log2((1.5 / 12) / ((1.5 / 12) * (2.5 / 12))))
    # never meeting is no longer scored 0 but as avoidance: c=0, g=1, k=1, N=8
    far = "nurse a b c d e f she".split()
    pmi, c = bold._pmi_scores(far, {"nurse"}, ["she"], smoothing=0.5)
    assert c == 0 and pmi == pytest.approx(np.log2(0.5 * 8 / (1.5 * 1.5)))
    assert bold._pmi_scores([], {"nurse"}, ["she"], smoothing=0.5) == (0.0, 0)


def test_empty_and_missing_completions():
    df = pd.DataFrame({"group": ["a", "b"], "occupation": ["Nurse", "Nurse"], "completion": ["", "The nurse: she"]})
    m = bold.completion_metrics(df)
    assert m["empty_completion"].tolist() == [True, False]
    assert m.loc[0, ["n_words", "male_words", "female_words", "male_pmi"]].tolist() == [0, 0, 0, 0.0]
    assert np.isnan(m.loc[0, "male_share"])
    df.loc[0, "completion"] = None
    with pytest.raises(ValueError, match="missing"):
        bold.completion_metrics(df)
    with pytest.raises(ValueError, match="'male' and 'female'"):
        bold.completion_metrics(df.fillna(""), lexicons={"m": ["he"], "f": ["she"]})


@pytest.mark.slow
def test_audit_statistics_two_and_more_groups(published_metrics):
    table, skipped = bold.audit_statistics(published_metrics, n_boot=40, nested=False)
    assert skipped.empty
    assert {"test", "statistic", "df", "p", "p_adj", "adj_method", "effect", "effect_size",
            "ci_low", "ci_high", "n", "measure", "role"} <= set(table.columns)
    assert set(table["role"]) == {"primary", "sensitivity", "audit", "alternative", "extension"}
    assert (table["p_adj"].dropna() >= table.loc[table["p_adj"].notna(), "p"]).all()
    # three groups: split male-dominated by category
    m = published_metrics.copy()
    m.loc[(m["group"] == "male_dominated") & (m["category"] == "metalworking_occupations"), "group"] = "metal"
    t3, _ = bold.audit_statistics(m, n_boot=40, nested=False)
    assert set(t3["test"]) >= {"chi2_pearson", "chi2_pearson_completions", "welch_anova"}
    words = m.groupby("group")[["male_words", "female_words"]].sum()
    from scipy.stats import chi2_contingency
    chi = t3[(t3["test"] == "chi2_pearson")]["statistic"].iloc[0]
    assert chi == pytest.approx(chi2_contingency(words.to_numpy(), correction=False).statistic)


def test_small_sample_records_skips_not_errors(published_metrics):
    tiny = published_metrics.groupby("group").head(5)  # no gendered completions at all
    table, skipped = bold.audit_statistics(tiny, n_boot=40, nested=False)
    assert not skipped.empty and skipped["reason"].str.len().gt(0).all()
    assert "welch_t" in set(table["test"])


@pytest.mark.slow
def test_describe_audit_reads_the_published_completions(published_metrics):
    """The reading states the primary estimand first, then its sensitivity rows, then the audit's own odds ratio
    (24.65, Wald 95% CI 10.07 to 60.37; recomputed in test_replication) labelled as its method, and leaves out
    what a small run could not compute. The published completions find their units from their own prompts."""
    table, _ = bold.audit_statistics(published_metrics, n_boot=40, nested=False)
    m = occupation_units.annotate(published_metrics)
    units = occupations.occupation_table(m[m["in_primary"]], by="unit")
    influence = occupations.influence_table(units, bold_prompts.MALE_GROUP, bold_prompts.FEMALE_GROUP)
    head = occupation_headline.headline_table(table, units, influence, n_boot=40)
    lines = bold.describe_audit(table, head, influence)
    assert lines[0] == occupation_headline.headline_sentence(head)
    assert lines[0].startswith("Primary analysis, over the 88 deduplicated person-noun occupations")
    assert "95% CI resampling whole keys " in lines[0] and ", permutation p = " in lines[0]
    assert "(40 replicates" in lines[0]
    assert lines[1] == occupation_headline.describe_influence(influence)
    assert lines[2].startswith("Other sensitivity rows (odds ratios, not the primary shares): counting each "
                               "completion at most once per gender (a talkative completion weighs as one), odds ratio ")
    assert "Holm-adjusted likelihood-ratio p" in lines[2] and "Holm-adjusted permutation p" in lines[2]
    # the pooled-word odds ratio's bootstrap interval as the statistics table's row prints it, one interval
    pooled = table[(table["test"] == "cluster_bootstrap_occupation") & (table["unit"] == occupations.UNIT_OCCUPATIONS)
                   & (table["measure"] == "odds_ratio (words)")]
    rows = [tr for tr in re.findall(r"<tr>.*?</tr>", table_html.table_html(table), flags=re.S)
            if "odds ratio (words)" in tr and html.escape(occupations.UNIT_OCCUPATIONS) in tr]
    cell = re.findall(r'<td[^>]*data-role="interval">([^<]*)<', "".join(rows))
    assert pooled[["ci_low_mc_se", "ci_high_mc_se"]].notna().all(axis=None) and len(cell) == 1
    assert f"95% CI resampling whole occupations {cell[0]}" in lines[2]
    primary = m[m["in_primary"]]
    any_word = (primary["male_words"] + primary["female_words"]) > 0  # independent of the metrics' any_gendered
    by_unit = any_word.groupby([primary["group"], primary["unit"]]).agg(["sum", "size"]).groupby("group").sum()
    diff = (by_unit.loc["male_dominated", "sum"] / by_unit.loc["male_dominated", "size"]
            - by_unit.loc["female_dominated", "sum"] / by_unit.loc["female_dominated", "size"])
    assert lines[3].startswith("Share of completions with any gendered word, male-dominated minus female-dominated, "
                               "with the occupation as the unit")
    assert f"risk difference {precision.number_text(diff)}" in lines[3] and "Holm-adjusted permutation p" in lines[3]
    # at the estimate's two decimals, as the table prints it
    assert "with every completion independent, the audit's unit, the CI would be −0.11 to −0.04" in lines[3]
    assert lines[4].startswith("The audit's own odds-ratio test, every gendered word independent")
    assert "odds ratio 24.65, 95% CI every word independent 10.07 to 60.37, Holm-adjusted p < 0.001" in lines[4]
    assert lines[5].startswith("PMI of male minus female words")
    assert bold.describe_audit(table.iloc[0:0]) == []


@pytest.mark.slow
def test_statistics_label_their_unit_and_keep_the_audit_family(published_metrics):
    """The primary row comes first and is its own family (p_adj = p); every row says what it treats as
    independent; Holm over the other rows is what stats.adjust_pvalues gives on their p values."""
    table, _ = bold.audit_statistics(published_metrics, n_boot=40, nested=False)
    first, second = table.iloc[0], table.iloc[1]
    assert (first["role"], first["test"], first["effect"]) == ("primary", "cluster_bootstrap_occupation",
                                                               "share_difference")
    assert (second["role"], second["effect"], second["measure"]) == ("primary", "odds_ratio", occupations.MARGINAL)
    assert (table["role"] == "primary").sum() == 2
    for row in (first, second):
        assert row["p_adj"] == row["p"] and row["unit"] == occupations.UNIT_OCCUPATIONS
        assert row["n_informative"] == 15 and row["n_occupations"] == 88
    assert set(table.loc[table["test"] == "mixed_logit_occupation", "unit"]) == {occupations.UNIT_MIXED}
    assert table["unit"].notna().all()
    assert set(table.loc[table["role"] == "audit", "unit"]) == {
        "independent words, the published audit's method", "independent completions, the published audit's method"}
    rest = table.iloc[2:]
    assert np.allclose(rest["p_adj"], stats.adjust_pvalues(rest["p"].to_numpy()), equal_nan=True)
    clustered = table[table["test"] == "cluster_bootstrap_occupation"]
    assert clustered["unit"].tolist().count(occupations.UNIT_OCCUPATIONS) == 5
    assert clustered["unit"].tolist().count(occupations.UNIT_PUBLISHED) == 1
    assert (clustered["ci_low_mc_se"] > 0).all() and (clustered["n_boot"] == 40).all()
    sensitivity = table[table["role"] == "sensitivity"]
    assert set(sensitivity["measure"]) == {"odds_ratio (words)", "odds_ratio (completions, at most once per gender)"}


@pytest.mark.slow
def test_run_audit_with_real_model(tmp_path):
    # ~20 prompts with smollm2, short completions (the QUICK book runs the full 100 tokens);
    # completions are cached, so the rerun below only redoes the analysis.
    res = bold.run_audit("smollm2-135m-instruct", limit=20, max_new_tokens=24, n_boot=50)
    files = res.write(tmp_path)
    assert len(res.metrics) == res.settings["n_prompts"]
    assert set(res.metrics["group"]) == set(bold_prompts.AUDIT_GROUPS)
    assert res.metrics["completion"].map(type).eq(str).all()
    for name in ("bold_metrics", "bold_statistics", "bold_group_summary", "bold_skipped", "bold_occupations",
                 "bold_influence", "bold_headline", "bold_units", "bold_unit_counts", "bold_excluded"):
        assert {tmp_path / f"{name}.parquet", tmp_path / f"{name}.csv"} <= set(files)
        assert (tmp_path / f"{name}.parquet").exists() and (tmp_path / f"{name}.csv").exists()
    stats_cols = {"test", "statistic", "p", "p_adj", "effect_size", "ci_low", "ci_high", "n"}
    assert stats_cols <= set(pd.read_csv(tmp_path / "bold_statistics.csv").columns)
    assert res.metrics["n_tokens"].between(0, 24).all()
    assert res.occupations["n_completions"].sum() == int(res.metrics["in_primary"].sum())
    assert set(res.occupations["occupation"]) == set(res.units.loc[res.units["primary"], "unit"])
    assert list(pd.read_csv(tmp_path / "bold_headline.csv").columns) == occupation_headline.HEADLINE_COLUMNS
    assert list(res.influence.columns) == occupations.INFLUENCE_COLUMNS
    left_out = res.metrics[~res.metrics["in_primary"]]
    assert res.excluded["n_completions"].sum() == len(left_out)
    assert res.excluded["male_words"].sum() == left_out["male_words"].sum()
    expected = res.metrics[["expected_male", "expected_female"]]
    assert expected.notna().all().all() and (expected >= 0).all().all()
    again = bold.run_audit("smollm2-135m-instruct", limit=20, max_new_tokens=24, n_boot=50)
    assert again.metrics["completion"].equals(res.metrics["completion"])
    pd.testing.assert_frame_equal(again.metrics[expected.columns], expected)  # the cache keeps them


def test_expected_totals_sum_the_completions_that_have_them(published_metrics):
    m = published_metrics.head(40).copy()
    has = np.arange(40) < 30  # the last ten as from a server or an older cache
    m["expected_male"] = np.where(has, 0.5, np.nan)
    m["expected_female"] = np.where(has, 0.25, np.nan)
    coverage = pd.DataFrame({
        "lexicon": ["male"] * 4 + ["female"] * 4, "word": ["he", "he", "guy", "guy", "she", "she", "gal", "gal"],
        "variant": ["he", " he", "guy", " guy", "she", " she", "gal", " gal"],
        "n_tokens": [1, 1, 2, 2, 1, 2, 2, 2], "single_token": [True, True, False, False, True, False, False, False]})
    t = bold.expected_totals(m, coverage).set_index("lexicon")
    male = t.loc["male", ["words", "words_single_token", "variants_single_token", "completions"]]
    assert male.tolist() == [2, 1, 2, 30]
    assert t.loc["female", ["words_single_token", "variants_single_token"]].tolist() == [1, 1]
    assert t.loc["male", "expected"] == 15.0 and t.loc["female", "expected"] == 7.5
    assert t.loc["male", "sampled_words"] == m["male_words"][:30].sum() > 0
    assert t.loc["female", "sampled_minus_expected"] == m["female_words"][:30].sum() - 7.5
    k = int(m["any_gendered"][:30].sum())
    assert k > 0 and t.loc["male", "gendered_completions"] == k
    assert t.loc["male", "share_in_gendered_completions"] == pytest.approx(0.5 * k / 15.0)
    older = bold.expected_totals(published_metrics.head(40), coverage)
    assert older["completions"].eq(0).all() and older["expected"].isna().all()


def test_selection_from_a_mapping_file(tmp_path):
    csv = tmp_path / "groups.csv"
    csv.write_text("occupation,group\nRegistered_nurse,care\nFlight_nurse,care\nElectrical_engineering,trade\n")
    sel = bold_prompts.resolve_selection(str(csv))
    prompts = bold_prompts.load_profession_prompts()
    expected = prompts["occupation"].isin(["Registered_nurse", "Flight_nurse", "Electrical_engineering"]).sum()
    assert len(sel) == expected and set(sel["group"]) == {"care", "trade"}
    js = tmp_path / "groups.json"
    js.write_text('{"Registered_nurse": "care", "Flight_nurse": "care", "Electrical_engineering": "trade"}')
    assert bold_prompts.resolve_selection(js).equals(sel)
    csv.write_text("occupation,group\nCarpenter,trade\nCarpenter,care\n")
    with pytest.raises(ValueError, match="line 3: occupation 'Carpenter' is already in group 'trade'"):
        bold_prompts.resolve_selection(csv)
    csv.write_text("occupation,team\nCarpenter,trade\n")
    with pytest.raises(ValueError, match="missing column"):
        bold_prompts.resolve_selection(csv)


def test_a_selection_file_of_plain_names_is_read_as_bold_keys_with_a_note(tmp_path):
    # the notebook's check of its selection file: a name that is one BOLD key once case and spaces are set aside
    # is that key, and the reader is told which key each name became, with its line
    csv = tmp_path / "plain.csv"
    csv.write_text("occupation,group\nsoftware engineer,tech\nRegistered nurse,care\nPlumber,trade\n")
    with pytest.warns(UserWarning, match=re.escape(
            f"{csv}: read 2 plain occupation name(s) as BOLD keys: line 2: 'software engineer' as "
            "'Software_engineer'; line 3: 'Registered nurse' as 'Registered_nurse'")):
        validation.check("06_bold_audit", model="smollm2-135m-instruct", selection=str(csv))
    with pytest.warns(UserWarning, match="plain occupation name"):
        sel = bold_prompts.resolve_selection(csv)
    prompts = bold_prompts.load_profession_prompts()
    keys = ["Software_engineer", "Registered_nurse", "Plumber"]
    assert set(sel["occupation"]) == set(keys) and len(sel) == prompts["occupation"].isin(keys).sum()
    assert sel.groupby("occupation")["group"].first().to_dict() == {
        "Software_engineer": "tech", "Registered_nurse": "care", "Plumber": "trade"}
    js = tmp_path / "plain.json"
    js.write_text('{\n "software engineer": "tech",\n "Registered nurse": "care",\n "Plumber": "trade"\n}')
    with pytest.warns(UserWarning, match=re.escape(f"{js}: read 2 plain occupation name(s) as BOLD keys: line 2: ")):
        assert bold_prompts.resolve_selection(js).equals(sel)


def test_a_selection_file_with_names_that_are_no_key_says_the_file_line_key_form_and_close_keys(tmp_path):
    csv = tmp_path / "names.csv"
    csv.write_text("occupation,group\nregistered nurse,care\nPlumber,trade\nSoftware enginer,tech\n"
                   "Software_engineer,care\n")
    with pytest.raises(ParameterError) as err:
        validation.check("06_bold_audit", model="smollm2-135m-instruct", selection=str(csv))
    message = str(err.value)
    assert message.startswith(f"selection: {csv}: 2 occupation(s) are not BOLD profession keys (a BOLD key is the "
                              "profession's name with its words joined by underscores, as in 'Registered_nurse'):")
    # BOLD has both spellings, each with its own prompts: the plain name cannot choose between them
    assert "line 2: 'registered nurse' names 2 BOLD keys that differ only in case ('Registered_Nurse', " \
        "'Registered_nurse')" in message
    assert "line 4: 'Software enginer' is not a BOLD profession key; close keys: 'Software_engineer'" in message
    csv.write_text("occupation,group\nsoftware engineer,tech\nSoftware_engineer,care\nPlumber,trade\n")
    with pytest.raises(ParameterError, match=re.escape(
            "line 3: 'Software_engineer' is the BOLD key 'Software_engineer', already in group 'tech'")):
        validation.check("06_bold_audit", model="smollm2-135m-instruct", selection=str(csv))


def test_highlight_gendered_marks_whole_words_in_any_case_and_escapes_the_rest():
    out = bold_figures._highlight_gendered("He & his manager <b>", {"male": ["he", "his", "man"]})
    assert out == ('<mark class="lex-male">He</mark> &amp; <mark class="lex-male">his</mark> manager &lt;b&gt;')
    table = bold_figures.examples_table(pd.DataFrame({
        "any_gendered": [True, False], "group": ["a", "b"], "occupation": ["x", "y"], "prompt": ["P ", "Q "],
        "completion": ["she said", "nothing"], "male_words": [0, 0], "female_words": [1, 0]}), {"female": ["she"]})
    assert '<mark class="lex-female">she</mark>' in table and "nothing" not in table
    # what the model wrote is marked as its words (the book's program-text check leaves them alone)
    assert '<span class="model-text"><mark class="lex-female">she</mark> said</span>' in table


def test_gendered_sentences_show_every_gendered_word_of_the_leading_occupations_in_its_sentence(published_metrics):
    lexicons = dict(lexicon.GENDER_LEXICONS)
    found = bold_figures.gendered_sentences(published_metrics, lexicons, top=3, per_occupation=10_000)
    totals = (published_metrics.assign(t=published_metrics.male_words + published_metrics.female_words)
              .groupby("occupation", sort=False).t.sum().sort_values(ascending=False, kind="stable"))
    assert list(dict.fromkeys(found.occupation)) == list(totals.index[:3])  # Midwife first in the published audit
    # every sentence holds a word, and a completion's sentences hold exactly its counted words
    assert (found.male + found.female > 0).all()
    per_completion = found.groupby("completion_id")[["male", "female"]].sum()
    counted = published_metrics.iloc[per_completion.index][["male_words", "female_words"]].to_numpy()
    assert (per_completion.to_numpy() == counted).all()
    assert set(per_completion.index) == set(np.flatnonzero(
        published_metrics.occupation.isin(totals.index[:3]) & published_metrics.any_gendered))
    page = bold_figures.sentences_table(found.head(2), lexicons)
    assert page.count("<tr><td>") == 2 and '<mark class="lex-' in page
    assert bold_figures.gendered_sentences(published_metrics, lexicons, per_occupation=2).groupby(
        "occupation").size().max() == 2


def test_audit_figure_gives_each_effect_measure_its_own_axis_and_readable_rows():
    """Real BOLD tables (60 completions of SmolLM2's audit, its 18 statistics): one forest panel per effect
    measure, a difference of means split by what its measure counts (PMI bits, words, shares: one axis mixed them,
    issue 47); rows named by measure and test, each coloured by the unit its interval assumes (the occupation in
    black, independent words or completions in grey); readable groups; the model's display name in the title;
    alt text and caption."""
    tables = Path(__file__).parent / "fixtures" / "tables"
    metrics = pd.read_csv(tables / "bold_metrics_slice.csv")
    statistics = pd.read_csv(tables / "bold_statistics.csv")
    chart = bold_figures.audit_figure(metrics, statistics,
                                      title="BOLD audit: smollm2-135m-instruct--b179c9523d0e--fp32")
    spec = json.loads(chart.to_json())
    assert spec["title"] == "BOLD audit: smollm2-135m-instruct"
    forest = spec["vconcat"][2:]
    x_titles = [panel["layer"][0]["encoding"]["x"]["title"] for panel in forest]
    effects = list(dict.fromkeys(statistics.dropna(subset=["effect_size"])["effect"]))
    assert len(effects) == 8 and x_titles[0] == "odds ratio (log scale)"
    assert "Cramér's V" in x_titles and "rank-biserial correlation" in x_titles
    # the fixture's five mean differences: two of PMI, one of words per completion, two of shares
    assert len(x_titles) == len(effects) + 2
    assert {"mean difference (PMI, bits)", "mean difference (words per completion)",
            "mean difference (share, 0 to 1)"} <= set(x_titles)
    for panel in forest:
        measures = {r["measure"] for r in spec["datasets"][panel["data"]["name"]]}
        assert len({"pmi" in m for m in measures}) == 1, measures  # PMI and shares never on one axis
    rows = [r for d in spec["datasets"].values() for r in d if "label" in r]
    labels = [r["label"] for r in rows]
    # the measure, then its test, in lines short enough for the share of a phone's width labels get
    width = bold_figures._LABEL_WIDTH
    assert all(0 < len(line) <= width for label in labels for line in label.split("\n"))

    def label(measure, test):
        return "\n".join(textwrap.wrap(measure, width) + textwrap.wrap(test, width))

    primary = label("odds ratio (words)", "occupation bootstrap (primary)")
    yates = label("gendered words (group x male/female)", "χ² with Yates' correction")
    assert primary in labels and yates in labels
    assert not any("_" in label for label in labels)
    assert len({(r["effect"], r["label"]) for r in rows}) == len(rows)  # one row per label within a panel
    kind = {r["label"]: r["unit_kind"] for r in rows}
    assert kind[primary] == "occupations (clustered)" and kind[yates] == "independent words or completions"
    # every row whose interval clusters (occupations, or the published selection's keys) is drawn as clustered
    drawn = statistics.dropna(subset=["effect_size"])
    assert sum(k == "occupations (clustered)" for k in kind.values()) == \
        drawn["unit"].isin(occupations.OCCUPATION_UNITS).sum() >= 3
    groups = {r["group"] for d in spec["datasets"].values() for r in d if "group" in r}
    assert groups == {"male-dominated", "female-dominated"}
    alt_text, caption = rendering._figure_text(spec)
    assert alt_text.startswith("Four panels of the BOLD audit")
    assert "95% confidence interval" in caption and "male-dominated minus female-dominated" in caption
    assert "Black rows take the occupation as the unit" in caption and "grey rows treat every word" in caption

