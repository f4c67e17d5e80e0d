"""Replication of the published BOLD audit (notebook 07): its own 1,525 completions
re-analysed with :mod:`bias_utils.audit.bold`'s code and set beside its published numbers.

Nothing here samples a model: the inputs are the audit's published completions
(data key ``audit_published_completions``) and its statistical summary JSON
(``audit_statistical_summary``).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from ..core import data, precision, stats
from ..core.errors import ParameterError, check_seed
from . import bold, bold_prompts

__all__ = [
    "compare_published_columns", "load_published_completions", "replicate_published_audit", "replication_rows",
]

# Published values: statistical_summary JSON (full precision) and the paper (section 5): value, where it is
# published, what a reader calls it, and its kind (how it is printed: a test statistic or estimate, a p value, a count).
_PUBLISHED = {
    "chi2_yates": (62.85616579124195, "summary JSON", "χ² with Yates' correction", "estimate"),
    "chi2_df": (1, "summary JSON", "χ², degrees of freedom", "count"),
    "chi2_p": (2.2236641232908823e-15, "summary JSON", "χ², p", "p"),
    "table_male_dom_male_words": (64, "summary JSON", "male words about male-dominated occupations", "count"),
    "table_male_dom_female_words": (22, "summary JSON", "female words about male-dominated occupations", "count"),
    "table_female_dom_male_words": (7, "summary JSON", "male words about female-dominated occupations", "count"),
    "table_female_dom_female_words": (64, "summary JSON", "female words about female-dominated occupations",
                                      "count"),
    "welch_t_male_proportion": (1.865340534586087, "summary JSON", "male proportion: Welch t", "estimate"),
    "welch_p_male_proportion": (0.0624496419933482, "summary JSON", "male proportion: Welch p", "p"),
    "mean_male_proportion_male_dom": (0.020904436858834613, "summary JSON",
                                      "male proportion: mean, male-dominated", "estimate"),
    "mean_male_proportion_female_dom": (0.009206798866306657, "summary JSON",
                                        "male proportion: mean, female-dominated", "estimate"),
    "cohens_d_average": (0.09930832379450576, "summary JSON", "male proportion: Cohen's d (average SD)",
                         "estimate"),
    "odds_ratio": (24.653333333333332, "summary JSON", "odds ratio, male over female words", "estimate"),
    "odds_ratio_ci_low": (10.067659283255608, "summary JSON", "odds ratio, 95% CI low", "estimate"),
    "odds_ratio_ci_high": (60.370223836965444, "summary JSON", "odds ratio, 95% CI high", "estimate"),
    "mean_pmi_difference_male_dom": (0.009656523138477799, "summary JSON",
                                     "PMI difference: mean, male-dominated", "estimate"),
    "mean_pmi_difference_female_dom": (-0.0543866253946023, "summary JSON",
                                       "PMI difference: mean, female-dominated", "estimate"),
    "welch_t_pmi_difference": (2.3809246999273883, "summary JSON", "PMI difference: Welch t", "estimate"),
    "welch_p_pmi_difference": (0.017687625245918277, "summary JSON", "PMI difference: Welch p", "p"),
    "n_completions": (1525, "paper 5.1", "completions", "count"),
    "n_gendered_completions": (66, "paper 5.1", "completions with a gendered word", "count"),
    "n_gendered_completions_male_dom": (31, "paper 5.1", "completions with a gendered word, male-dominated",
                                        "count"),
    "n_gendered_completions_female_dom": (35, "paper 5.1", "completions with a gendered word, female-dominated",
                                          "count"),
    "n_occupations": (224, "paper 5.1", "occupations (BOLD keys)", "count"),
}
#: How each kind of quantity is printed (:mod:`bias_utils.core.precision`, the rule of every page).
_PRINT = {"estimate": precision.number_text, "p": precision.p_text, "count": precision.count_text}


def load_published_completions() -> pd.DataFrame:
    """The audit's 1,525 published Llama-3.1-8B-Instruct completions (``audit_published_completions``).

    Their columns are kept, with ``profession_category`` renamed ``group`` and
    their count/PMI columns prefixed ``published_`` so our recomputation never
    reads them by accident; ``prompt_id`` is the BOLD id of the selection row each follows.
    """
    df = pd.read_csv(data.resolve("audit_published_completions"), keep_default_na=False)
    theirs = ["male_words", "female_words", "total_gendered_words", "male_words_list", "female_words_list",
              "male_pmi", "female_pmi", "male_cooccur", "female_cooccur", "male_proportion"]
    df = df.rename(columns={"profession_category": "group", "occupation_category": "category",
                            **{c: f"published_{c}" for c in theirs}})
    # the completions follow the audit's selection row by row (checked), which gives each its BOLD prompt id
    selection = bold_prompts.load_audit_selection()
    same = ["group", "category", "occupation", "prompt"]
    if len(df) != len(selection) or not (df[same].to_numpy() == selection[same].to_numpy()).all():
        raise ParameterError(
            "audit_published_completions: the rows do not follow the audit's prompt selection")
    return df.assign(prompt_id=selection["prompt_id"].to_numpy())


def _published_summary() -> dict:
    """The audit's statistical summary JSON (``audit_statistical_summary``)."""
    return json.loads(data.resolve("audit_statistical_summary").read_text(encoding="utf-8"))


def replicate_published_audit(n_boot: int = 200, seed: int = 0) -> pd.DataFrame:
    """Recompute the audit's published numbers from its completion texts with our code.

    Returns columns ``quantity, ours, published, source, rel_diff``. The
    published values come from :data:`PUBLISHED` (their summary JSON at full
    precision, and paper section 5 for counts); the JSON values are also checked
    against the JSON file itself so a changed data file cannot pass silently.
    """
    stats.check_n_boot(n_boot)
    check_seed(seed)
    summary = _published_summary()
    assert_json = {
        "chi2_yates": summary["chi_square"]["statistic"], "odds_ratio": summary["odds_ratio"]["odds_ratio"],
        "welch_t_male_proportion": summary["t_test"]["statistic"],
        "cohens_d_average": summary["effect_size"]["cohens_d"],
        "welch_t_pmi_difference": summary["pmi_test"]["t_statistic"],
    }
    for k, v in assert_json.items():
        if not np.isclose(v, _PUBLISHED[k][0], rtol=1e-12):
            raise ParameterError(f"audit_statistical_summary: {k} is {v}, expected {_PUBLISHED[k][0]}")
    metrics = bold.completion_metrics(load_published_completions())
    # the published numbers need no nested model (about a minute on these completions)
    table, _ = bold.audit_statistics(metrics, groups=bold_prompts.AUDIT_GROUPS, n_boot=n_boot, seed=seed,
                                     nested=False)
    t = table.set_index(["test", "measure"])
    words = bold.word_table(metrics, bold_prompts.AUDIT_GROUPS)
    g = metrics.groupby("group")
    mp = "male_proportion (0 if no gendered word)"
    ours = {
        "chi2_yates": t.loc[("chi2_yates", "gendered words (group x male/female)"), "statistic"],
        "chi2_df": t.loc[("chi2_yates", "gendered words (group x male/female)"), "df"],
        "chi2_p": t.loc[("chi2_yates", "gendered words (group x male/female)"), "p"],
        "table_male_dom_male_words": words[0, 0], "table_male_dom_female_words": words[0, 1],
        "table_female_dom_male_words": words[1, 0], "table_female_dom_female_words": words[1, 1],
        "welch_t_male_proportion": t.loc[("welch_t", mp), "statistic"],
        "welch_p_male_proportion": t.loc[("welch_t", mp), "p"],
        "mean_male_proportion_male_dom": g["male_proportion"].mean()["male_dominated"],
        "mean_male_proportion_female_dom": g["male_proportion"].mean()["female_dominated"],
        "cohens_d_average": t.loc[("cohens_d_average", mp), "effect_size"],
        "odds_ratio": t.loc[("odds_ratio_wald", "gendered words (group x male/female)"), "effect_size"],
        "odds_ratio_ci_low": t.loc[("odds_ratio_wald", "gendered words (group x male/female)"), "ci_low"],
        "odds_ratio_ci_high": t.loc[("odds_ratio_wald", "gendered words (group x male/female)"), "ci_high"],
        "mean_pmi_difference_male_dom": g["pmi_difference"].mean()["male_dominated"],
        "mean_pmi_difference_female_dom": g["pmi_difference"].mean()["female_dominated"],
        "welch_t_pmi_difference": t.loc[("welch_t", "pmi_difference"), "statistic"],
        "welch_p_pmi_difference": t.loc[("welch_t", "pmi_difference"), "p"],
        "n_completions": len(metrics),
        "n_gendered_completions": int(metrics["any_gendered"].sum()),
        "n_gendered_completions_male_dom": int(g["any_gendered"].sum()["male_dominated"]),
        "n_gendered_completions_female_dom": int(g["any_gendered"].sum()["female_dominated"]),
        "n_occupations": metrics["occupation"].nunique(),
    }
    rows = [{"quantity": k, "ours": float(ours[k]), "published": float(v), "source": src}
            for k, (v, src, _, _) in _PUBLISHED.items()]
    out = pd.DataFrame(rows)
    out["rel_diff"] = (out["ours"] - out["published"]).abs() / out["published"].abs()
    return out


def replication_rows(comparison: pd.DataFrame) -> pd.DataFrame:
    """:func:`replicate_published_audit`'s table as chapter 07 shows it: each quantity by its name, ours and the
    published value printed by its kind (a p value by :func:`~bias_utils.core.precision.p_text`, a count as an
    integer, an estimate by :func:`~bias_utils.core.precision.number_text`), and the relative difference by
    :func:`~bias_utils.core.precision.relative_difference_text` (below float64's reach, "< 10⁻¹²"). Text columns
    ``quantity, ours, published, source, rel_diff``; the table on disk keeps every digit and the keys."""
    unknown = sorted(set(comparison["quantity"]) - set(_PUBLISHED))
    if unknown:
        raise ValueError(f"comparison: quantities without a name or kind: {unknown}")
    rows = []
    for r in comparison.itertuples(index=False):
        _, _, label, kind = _PUBLISHED[r.quantity]
        value = _PRINT[kind]
        rows.append({"quantity": label, "ours": value(r.ours), "published": value(r.published), "source": r.source,
                     "rel_diff": precision.relative_difference_text(r.rel_diff)})
    return pd.DataFrame(rows, columns=["quantity", "ours", "published", "source", "rel_diff"])


def compare_published_columns(metrics: pd.DataFrame) -> pd.DataFrame:
    """Rows where our recomputed counts/PMI differ from the audit's own per-completion columns (empty = all agree)."""
    pairs = [("male_words", "published_male_words"), ("female_words", "published_female_words"),
             ("male_cooccur", "published_male_cooccur"), ("female_cooccur", "published_female_cooccur"),
             ("male_pmi", "published_male_pmi"), ("female_pmi", "published_female_pmi"),
             ("male_proportion", "published_male_proportion")]
    bad = np.zeros(len(metrics), dtype=bool)
    for ours, theirs in pairs:
        bad |= ~np.isclose(metrics[ours].astype(float), metrics[theirs].astype(float), rtol=1e-6, atol=1e-8)
    bad |= metrics["male_words_list"] != metrics["published_male_words_list"]
    bad |= metrics["female_words_list"] != metrics["published_female_words_list"]
    return metrics.loc[bad]
