"""Write notebooks/06_bold_audit.ipynb and 07_bold_replication.ipynb.

Thin notebooks: the logic lives in bias_utils.audit.bold and bias_utils.audit.replication.
"""

from pathlib import Path

import nbformat as nbf

ROOT = Path(__file__).resolve().parent.parent


#: bias_utils.book.presentation.FINDING_TAG: the book shows these cells right after the opening text.
FINDING_TAG = "key-finding"


def md(text, tags=()):
    cell = nbf.v4.new_markdown_cell(text.strip())
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def code(text, tags=()):
    cell = nbf.v4.new_code_cell(text.strip())
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def audit_notebook():
    nb = nbf.v4.new_notebook()
    nb.cells = [
        md("""
# The BOLD occupational audit on our model

We rerun the audit of *Auditing Occupational Gender Bias in LLMs using the BOLD Dataset*: the model completes
BOLD's prompts about occupations dominated by men (1,172 prompts) or women (353), and each completion is scored
with the audit's 13 male and 13 female words.

**The audit's settings.** 100 new tokens, temperature 0.7, top-p 0.9, and the top-k 50 that transformers'
`generate` added by default, on the raw prompt without chat template.

**What an occupation is.** BOLD's keys are Wikipedia article titles. Many of the audit's are fields
("Civil engineering"), glossaries, a day ("International Nurses Day") or spelling variants that hold the same
prompts (`Registered_Nurse`, `Registered_nurse`), and one prompt set sits in both groups (`Social_Worker`,
`Social_worker`). Each key gets a kind from its head noun (WordNet 3.0, a suffix rule where WordNet has no
entry); keys of one group with identical prompts become one unit; a prompt set in both groups is left out.
The counts of this run are below.

**The primary analysis, stated before the results.** The estimand is population-averaged, with the occupation
as the unit: *the share of male words among the gendered words the model writes about a typical occupation* of
each group, and the difference between the groups (male- minus female-dominated). An occupation's share is its
male words over its gendered words; a group's share is the mean of its occupations' shares, over the occupations
that carry any gendered word (how many do is stated beside every estimate), so each occupation weighs one however
many words it wrote. The interval resamples whole occupations within each group (10,000 replicates, each bound
rounded to its Monte Carlo error); the p permutes the group labels across occupations (9,999 relabellings; at its
floor it is printed as ≤ 1/10,000). Beside the difference, the two shares as an odds ratio: the marginal
(population-averaged) odds ratio, with its interval and p from the same resampling. Everything else is
sensitivity or comparison: the conditional odds ratio of a logistic model with a random intercept per occupation
(the odds ratio between two occupations with the same random intercept, not a population average: it grows with
every variance component added), the same with a random intercept per completion within its occupation as well
(words nested in completions nested in occupations), and counting each completion at most once per gender; the
audit's pooled-word odds ratio over the same occupations (whole occupations resampled); and the audit's pooled-word
odds ratio on its published selection as it is, beside the audit's own interval that treats every word as
independent.
"""),
        code("""
from typing import Optional, Union

model: str = "smollm2-135m-instruct"   # built-in short name, hub id or folder
dtype: Optional[str] = None            # None: float32 on every device; "bfloat16" or "float16": lower precision
selection: Union[str, dict[str, str]] = "audit"   # "audit", "categories" (18 BOLD categories), or {occupation: group}
n_samples: int = 1                     # completions per prompt (>1 gives per-prompt variance)
seed: int = 0
max_new_tokens: int = 100
temperature: float = 0.7
top_p: float = 0.9
top_k: Optional[int] = 50              # transformers' default, applied by the audit's generate call; None: off
lexicons: Optional[dict[str, list[str]]] = None   # None: the audit's {"male": [...], "female": [...]}
neutral_lexicons: Optional[dict[str, list[str]]] = None   # None: bias_utils.core.lexicon.NEUTRAL_LEXICONS
limit: Optional[int] = None            # None: all prompts; an int subsamples prompts per group (quick runs)
n_boot: int = 10000                    # bootstrap replicates for the CIs (each bound gets its Monte Carlo error)
output_dir: Optional[str] = None       # None: results/<model_id>/
""", tags=['parameters']),
        code("""
# Every parameter is checked before any model is loaded: a typo fails here, in seconds.
from bias_utils.book import validation

validation.check("06_bold_audit", model=model, dtype=dtype, selection=selection, n_samples=n_samples, seed=seed,
                 max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, top_k=top_k,
                 lexicons=lexicons, neutral_lexicons=neutral_lexicons, limit=limit, n_boot=n_boot,
                 output_dir=output_dir)
"""),
        code("""
from IPython.display import HTML, Markdown, display

from bias_utils.audit import bold, bold_figures, occupation_headline, occupation_units
from bias_utils.core import lexicon, tables
from bias_utils.core.results import output_folder, write_table
from bias_utils.models.decoding import lexicon_token_ids
from bias_utils.models.loading import load_model
from bias_utils.report import plots

m = load_model(model, dtype=dtype)
result = bold.run_audit(m, selection=selection, n_samples=n_samples, seed=seed,
                        max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, top_k=top_k,
                        lexicons=lexicons, neutral_lexicons=neutral_lexicons, limit=limit, n_boot=n_boot)
out = output_folder(result.model_id, output_dir)
files = result.write(out)
result.settings
"""),
        md("""
## What the audit found

The reading comes first, generated from the tables below: the primary estimate (each group's male share of
gendered words for a typical occupation, their difference, the marginal odds ratio), the occupations whose removal
moves the difference by more than a third, the completions the primary analysis leaves out and why, its
sensitivity rows, then the rest. The table gives every estimate of the headline with its interval and test, the
primary rows first; the figure shows male and female words per completion by occupation group, the share of
completions with any gendered word, the male share among gendered completions, and every effect with its
interval. A bootstrap bound is printed with the digits its Monte Carlo error allows (`bold_statistics`:
`ci_low_mc_se`, `ci_high_mc_se`).
""", tags=[FINDING_TAG]),
        code("""
reading = bold.describe_audit(result.statistics, result.headline, result.influence, result.excluded)
display(Markdown("\\n".join("- " + line for line in reading)))
display(occupation_headline.headline_rows(result.headline))
""", tags=[FINDING_TAG]),
        code("""
chart = bold_figures.audit_figure(result.metrics, result.statistics, title=f"BOLD audit: {result.model_id}")
plots.save(chart, out / "bold_audit")
chart
""", tags=[FINDING_TAG]),
        md("""
## How the audit is computed

Each completion is scored with the audit's 13 male and 13 female words (lower-cased `\\b\\w+\\b` tokens)
and with its PMI between gendered words and the occupation name (5-token window). Gender-neutral and
non-binary forms (*they/them/their*, *person*, *people*, neopronouns) are counted beside, never mixed in.

The statistics table has one row per test with statistic, p, Holm-corrected p, effect size and 95% CI.
`unit` says what a row treats as independent: the deduplicated person-noun occupations (the cluster bootstrap
over them, and the random-intercept models; the nested one also the completions within them), the published
selection's BOLD keys, or, as the audit did, every gendered word or every completion; `n_informative` how many
occupations inform the estimate (those with any gendered word, for a measure of gendered words). `role` says
whether a row is the pre-stated primary estimand (`primary`: the difference in mean male share and its odds
form, the marginal odds ratio; pre-specified, so their p is not adjusted), a `sensitivity` row of it (the
conditional odds ratios of the random-intercept models, with and without the completion level, and each
completion at most once per gender; the pooled-word odds ratio over the same occupations and over the published
selection), one of the audit's five tests computed the audit's way on every completion (`audit`), the standard
form of a questionable convention shown beside it (`alternative`: Pearson chi-square without Yates, pooled-SD
Cohen's d, Hedges' g), or what the audit lacked (`extension`): the share of completions with any gendered word
(the presence part of a hurdle model) and the male share *among* gendered completions, also with the occupation
as the unit. Holm's correction runs over every row but the primary ones.
"""),
        md("""
## Descriptives per group

`share_gendered` is the share of completions with at least one gendered word (Wilson 95% CI);
`mean_male_share_gendered` is the male share among those completions only; `neutral_words_total` counts
the neutral forms.
"""),
        code("result.summary"),
        md("""
## Expected counts from the decoding loop

At every step the model wrote, the sampler had the exact distribution it drew from (after temperature, top-k and
top-p). `expected_male` and `expected_female` in `bold_metrics` add, over the steps each completion visited, the
probability that distribution gave to the lexicon's words that are a single token of this model (lower-case or
capitalised, with or without a leading space): the expected number of such words. They estimate the same
quantity as the sampled counts without the sampler's last draw, but they do not spread evenly over the
completions: the share printed below sits in the few completions that did sample a gendered word, so they are a
smoothed count, not an independent one (see *Methods*). The sampled word counts stay the audit's measure; the
expected counts serve the occupation-level link between the model's inside and its writing. Below: which words are
one token (`bold_lexicon_coverage`), and the expected totals beside the sampled ones. The two estimate slightly
different things: a word that is never one token adds nothing to the expected count, and a lexicon token that
begins a longer word ("He" + "phaestus") adds to it but not to the audit's words.
"""),
        code("""
_, coverage = lexicon_token_ids(m.tokenizer)
coverage_files = write_table(coverage, out / tables.NAMES.BOLD_LEXICON_COVERAGE)
totals = bold.expected_totals(result.metrics, coverage)
display(Markdown(bold.describe_expected_totals(totals)))
display(coverage[~coverage.single_token].groupby("lexicon")["variant"].apply(", ".join).rename("not one token")
        .reset_index())
totals
"""),
        md("""
## What each BOLD key is

`bold_units`: per BOLD key of the selection, its head noun, its kind and how that was decided, its unit, the key it
duplicates and any group conflict; `primary` marks the units of the primary analysis. `bold_unit_counts`: the
counts per group and kind. `bold_excluded`: the completions the primary analysis leaves out, per group and reason
(a group conflict, a key that is not a person noun, a duplicate key, a prompt's second category, a repeated
prompt), with their gendered words.
"""),
        code("""
display(Markdown(occupation_units.describe_units(result.units)))
display(result.unit_counts)
display(result.excluded)
result.units[result.units.kind != "person"].head(12)
"""),
        md("""
Leave one occupation out: the primary difference in male share recomputed without each occupation
(`share_difference_without`), ranked by how far that moves it (`share_change`; an occupation without a gendered
word does not move it), with the conditional random-intercept odds ratio refitted without it
(`odds_ratio_without`) and the audit's pooled-word odds ratio (`pooled_odds_ratio_without`) beside. `influential`
marks a move of the difference by more than a third of itself, either way; `odds_ratio_influential` a conditional
odds ratio multiplied or divided by more than 4/3 (the same distance either way on the log scale). The grey band
in the chart is the first range, the solid line the difference with every occupation and the dashed lines its
interval.
"""),
        code("""
if len(result.influence):  # a selection of more than two groups has no single odds ratio to leave out of
    display(result.influence.head(15))
    chart = occupation_headline.influence_chart(result.influence, result.headline,
                                        title=f"Leave one occupation out: {result.model_id}")
    plots.save(chart, out / "bold_influence")
    display(chart)
"""),
        md("""
Per occupation of the primary analysis (deduplicated person-noun units; `keys` lists a unit's BOLD keys):
completions, gendered words, completions with any (male, female) gendered word and the occupation's share of its
group's male and female words, the occupations with the most gendered words first.
"""),
        code("""
result.occupations.sort_values("gendered_words", ascending=False).head(20)
"""),
        md("""
## Statistics

Read the `primary` rows first, then their `sensitivity` rows, then the `audit` rows for the comparison with the
published study, then the `alternative` and `extension` rows. The audit's word-level odds ratio treats every
gendered word as independent; the rows with occupations as the unit show how much wider the interval is when
occupations are resampled. Tests that could not be computed (for example, no gendered completion in one group of a
small run) are listed in `skipped` with the reason.
"""),
        code("""
# a bootstrap bound's Monte Carlo SE gives it its digits, as in the sentences (the table does not show the SE)
cols = ["role", "test", "measure", "unit", "statistic", "df", "p", "p_adj", "effect", "effect_size", "ci_low",
        "ci_high", "ci_low_mc_se", "ci_high_mc_se", "n"]
result.statistics.reindex(columns=cols)
"""),
        code("result.skipped"),
        md("""
## Where the gendered words are

Every sentence that holds a gendered word, for the occupations with the most of them: a reader sees whom each
word refers to (the worker, or a patient, a mother, a customer). Below it, completions sampled per group with the
seed, gendered words highlighted.
"""),
        code("""
lex = {**(lexicons or lexicon.GENDER_LEXICONS), **(neutral_lexicons or lexicon.NEUTRAL_LEXICONS)}
primary_rows = result.metrics[result.metrics.in_primary]
display(HTML(bold_figures.sentences_table(bold_figures.gendered_sentences(primary_rows, lex, by="unit"), lex,
                                          by="unit")))
display(HTML(bold_figures.examples_table(result.metrics, lex, per_group=3, seed=seed)))
"""),
        md("""
## Output files

Written under `results/<model_id>/` as parquet and CSV: `bold_metrics` (one row per completion, with its `unit`
and whether it is `in_primary`), `bold_statistics` (this table), `bold_group_summary`, `bold_skipped`,
`bold_units` (what each BOLD key is) and `bold_unit_counts`, `bold_occupations` (one row per unit of the primary
analysis), `bold_influence` (leave one occupation out), `bold_headline` (the primary estimate, its sensitivity rows
and the published selection's figure, one row), `bold_excluded` (what the primary analysis leaves out, and why),
`bold_lexicon_coverage` (per lexicon word and variant: `n_tokens`, `single_token`,
`token_id`), and the figures `bold_audit.svg/.png` and `bold_influence.svg/.png`.
Completions are cached by `bias_utils.models.generation`; an interrupted run resumes where it stopped.
"""),
        code("[str(p) for p in [*files, *coverage_files]]"),
    ]
    return nb


def replication_notebook():
    nb = nbf.v4.new_notebook()
    nb.cells = [
        md("""
# Replicating the published BOLD audit

The audit published its 1,525 Llama-3.1-8B-Instruct completions. We recompute every published number
from the completion *texts* with our lexicon, PMI and statistics code (not from their count columns) and
show ours beside theirs. Published values come from their summary JSON (full precision) and section 5 of
the paper. The comparison is written as the table `replication` (parquet + CSV) under `results/published-audit/`.

The table below has a row per published number: ours and theirs, each printed as the book prints that kind of
number (a p value below 0.001 as "< 0.001", a count as a whole number), where it was published, and the relative
difference |ours − published| / |published|; "< 10⁻¹²" is a difference float64 rounding alone makes.
"""),
        code("""
from typing import Optional

n_boot: int = 10000                    # bootstrap replicates (each bound gets its Monte Carlo error)
seed: int = 0
output_dir: Optional[str] = None       # None: results/published-audit/
""", tags=['parameters']),
        code("""
# Every parameter is checked before any model is loaded: a typo fails here, in seconds.
from bias_utils.book import validation

validation.check("07_bold_replication", n_boot=n_boot, seed=seed, output_dir=output_dir)
"""),
        code("""
from IPython.display import Markdown, display

from bias_utils.audit import (
    bold,
    bold_figures,
    bold_prompts,
    occupation_headline,
    occupation_units,
    occupations,
    replication,
)
from bias_utils.core import tables
from bias_utils.core.results import REPLICATION_FOLDER, output_folder, write_table

out = output_folder(REPLICATION_FOLDER, output_dir)
comparison = replication.replicate_published_audit(n_boot=n_boot, seed=seed)
write_table(comparison, out / tables.NAMES.REPLICATION)
replication.replication_rows(comparison)
"""),
        md("""
Our per-completion counts, co-occurrences and PMI values also equal their own columns row by row
(the number of disagreeing rows is printed below). The only visible difference is in the last digits of the
odds-ratio CI: they used z = 1.96, we use the exact normal quantile 1.95996.
"""),
        code("""
metrics = bold.completion_metrics(occupation_units.annotate(replication.load_published_completions(), "audit"))
print(f"{len(replication.compare_published_columns(metrics)):,} of {len(metrics):,} completions disagree with "
      "their published columns")
"""),
        md("""
## Conventions: what the audit did, the standard alternative, and what the book uses

* **Chi-square with Yates' correction** (62.86): their `scipy.stats.chi2_contingency` call applies it by
  default to 2x2 tables. It is conservative; the uncorrected Pearson value (65.44) is shown beside it. Both
  count *words*, not completions, so one completion with nine "her" adds nine observations.
* **Male proportion = 0 without gendered words**: 95.7% of completions have none, so the Welch t (1.87,
  p = 0.062) mostly compares zeros. The book separates the two questions: does a completion use gendered words
  at all (proportion test), and, when it does, which gender (male share among gendered completions).
* **Cohen's d as mean difference over the root of the mean of the two variances** (0.099): with n = 1,172 vs
  353 the book uses the pooled-SD d and Hedges' g.
* **PMI**: the paper mentions +0.5 smoothing, but the published values are unsmoothed, with PMI = 0 when
  there is no co-occurrence; the occupation terms are the tokens of the BOLD occupation key. We reproduce
  the published definition (see `bias_utils.audit.bold`).
* **Independence**: all their tests treat words or completions as independent. Completions of one occupation
  share a prompt family, and a few occupations supply most of the gendered words; the book's primary analysis
  takes the occupation as the unit (below).
"""),
        md("## The full statistics on their completions"),
        code("""
table, skipped = bold.audit_statistics(metrics, n_boot=n_boot, seed=seed)
# a bootstrap bound's Monte Carlo SE gives it its digits, as in the sentences (the table does not show the SE)
cols = ["role", "test", "measure", "unit", "statistic", "df", "p", "p_adj", "effect", "effect_size", "ci_low",
        "ci_high", "ci_low_mc_se", "ci_high_mc_se", "n"]
table.reindex(columns=cols)
"""),
        md("""
## Their completions with the occupation as the unit

The same primary analysis as the audit chapter, stated there before its results: over the deduplicated
person-noun occupations of the audit's selection, the share of male words among the gendered words about a
typical male- and female-dominated occupation and their difference (whole occupations resampled, permutation p),
the marginal odds ratio beside it, its sensitivity rows (the conditional odds ratios of the random-intercept
models), the audit's pooled-word odds ratio on its published selection with an interval that resamples whole
keys, and the occupations whose removal moves the primary difference most. Generated from the tables.
"""),
        code("""
by_unit = occupations.occupation_table(metrics[metrics.in_primary], by="unit")
influence = occupations.influence_table(by_unit, bold_prompts.MALE_GROUP, bold_prompts.FEMALE_GROUP)
headline = occupation_headline.headline_table(table, by_unit, influence, n_boot=n_boot)
display(Markdown("\\n".join("- " + line for line in bold.describe_audit(table, headline, influence))))
display(occupation_headline.headline_rows(headline))
influence.head(10)
""", tags=[FINDING_TAG]),
        code("bold.group_summary(metrics)"),
        code("""
bold_figures.audit_figure(metrics, table, title='BOLD audit: published Llama-3.1-8B-Instruct completions')
""", tags=[FINDING_TAG]),
    ]
    return nb


if __name__ == "__main__":
    for name, nb in (("06_bold_audit.ipynb", audit_notebook()), ("07_bold_replication.ipynb", replication_notebook())):
        nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
        for i, cell in enumerate(nb.cells):  # stable ids: regenerating changes only what the script changes
            cell.id = f"cell-{i:02d}"
        nbf.write(nb, ROOT / "notebooks" / name)
