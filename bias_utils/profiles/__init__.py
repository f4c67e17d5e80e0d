"""Study 1: stereotype profiles (Schuster et al. 2024): dictionaries, contexts, the POLAR space, its axis checks,
population profiles, the gender direction, layers, robustness.

The public API by role, one module a role (``_EXPORTS``); each name is imported on first use
(:func:`bias_utils.core.exports.lazy_exports`).
"""

from ..core.exports import lazy_exports

_EXPORTS = {
    # the SCM seed and full dictionaries and a user's own
    "dictionaries": ("PUBLISHED_FULL_COUNTS", "PUBLISHED_SEED_COUNTS", "add_terms", "context_sources",
        "describe_counts", "limit_terms", "load_dictionary", "load_full_dictionary_terms", "load_seed_dictionary",
        "pole_counts",),
    # context sentences per sense from a registry of sources
    "contexts": ("build_contexts", "source_names", "context_report", "describe_generation", "describe_report",
        "generation_report",),
    # the extra terms' generated-contexts files and their two rounds
    "extra_contexts": ("describe_coverage", "extra_coverage", "merged_extra_contexts", "read_model_choice",),
    # a model's stereotype space and the direction-prediction task (Table 2)
    "space": ("accuracy_by_term_contexts", "build_space", "describe_direction_skipped", "describe_dropped",
        "describe_space", "describe_table2", "describe_untestable", "direction_prediction", "dropped_by_reason",
        "dropped_senses", "pole_table", "table2_by_term_contexts",),
    # does an axis carry its meaning: rank AUC against a permutation null
    "axis_validity": ("MIN_POLE_TERMS", "describe_verdicts", "axis_validity", "unreadable_axes",
        "validity_by_source", "validity_layer", "verdict_table",),
    # populations projected through templates, standardised and tested
    "population_profiles": ("DEFAULT_TEMPLATES", "describe_profile", "describe_share_below", "paper_finding",
        "paper_finding_sentence", "run_profiles", "share_below_group_means", "word_summary",),
    # the female - male direction and its check against workforce shares
    "gender_direction": ("describe_validity", "occupation_validity", "validity_chart",),
    # accuracy and the gender difference on every layer and context source
    "layers": ("describe_layers", "layers_by_context",),
    # the tokenisation confound: subword tokens per word by group
    "tokenisation": ("token_regression", "token_shares", "token_table",),
    # the specification curve and the per-model robustness summary
    "robustness": ("TESTS", "collect_curve_inputs", "default_cell_values", "headline_source", "name_gap_verdict",
        "robustness_summary", "specification_curve", "template_gap", "timing_table",),
}

__all__ = [name for names in _EXPORTS.values() for name in names]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
