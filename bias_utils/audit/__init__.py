"""Study 2: the occupational audit on BOLD: prompts, units, the audit and its headline, the published replication, and
the next word after a neutral sentence about an occupation (the exact measure of what a decoder writes) and what it
writes at length about one person in an occupation. It imports
nothing from Study 1 (:mod:`bias_utils.profiles`); what joins the two is :mod:`bias_utils.intrinsic_extrinsic`.

The public API by role, one module a role (``_EXPORTS``); each name is imported on first use
(:func:`bias_utils.core.exports.lazy_exports`).
"""

from ..core.exports import lazy_exports

_EXPORTS = {
    # the BOLD profession prompts and the audit's selection of them
    "bold_prompts": ("FEMALE_GROUP", "MALE_GROUP", "load_profession_prompts", "subsample",),
    # what each BOLD key is and which occupation unit it belongs to
    "occupation_units": ("annotate", "describe_units", "primary_completions",),
    # the audit: metrics per completion, its statistics and tables (chapter 06)
    "bold": ("audit_statistics", "completion_metrics", "describe_audit", "describe_expected_totals",
        "expected_totals", "group_summary", "run_audit",),
    # the audit with the occupation as the unit: headline estimate, sensitivity rows, influence
    "occupations": ("influence_table", "occupation_table",),
    # the headline read for a reader: its table, sentences and rows, the influence chart
    "occupation_headline": ("headline_rows", "headline_table", "influence_chart",),
    # what chapters 06 and 07 show of an audit: the figure and examples
    "bold_figures": ("audit_figure", "examples_table", "gendered_sentences", "sentences_table",),
    # the published audit's completions re-analysed beside ours (chapter 07)
    "replication": ("compare_published_columns", "load_published_completions", "replicate_published_audit",
        "replication_rows",),
    # the next word after a neutral sentence about an occupation: an exact measure of what a decoder writes
    "next_word": ("describe_next_word", "next_word_table", "next_word_validity", "sampled_check",),
    # what a decoder writes at length about one person in an occupation, and whether the next word predicts it
    "long_form": ("long_form_table",),
}

__all__ = [name for names in _EXPORTS.values() for name in names]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
