"""Shared: what both studies stand on: paths, errors and value rules, caches, verified data, results folders, the
results-table registry, the statistics engine, the mixed model, printed precision, the gendered lexicons.

The public API by role, one module a role (``_EXPORTS``); each name is imported on first use
(:func:`bias_utils.core.exports.lazy_exports`).
"""

from .exports import lazy_exports

_EXPORTS = {
    # ParameterError, ModelError and the value rules every layer shares
    "errors": ("LAYER_NAMES", "ModelError", "ParameterError", "check_count", "check_generation", "check_layer",
        "check_max_new_tokens", "check_positive_int", "check_sampling", "check_seed", "is_number",),
    # where things live (environment-overridable folders)
    "paths": ("ROOT", "InputPathError", "cache_dir", "data_dir", "nltk_data_dir", "raw_dir", "resolve_input",
        "results_dir",),
    # named registries of extension functions (one rule for registering)
    "registry": ("Registry",),
    # a subpackage's public API, imported on first use
    "exports": ("lazy_exports",),
    # crash-safe, content-keyed storage; no pickle
    "cache": ("append_jsonl", "atomic_write_bytes", "atomic_write_json", "atomic_write_text", "file_lock",
        "read_jsonl", "read_npz", "sha256_file", "stable_hash", "write_npz",),
    # verified external files (manifest, cache, mirror, download)
    "data": ("DataError", "entry", "manifest", "resolve",),
    # WordNet 3.0 through nltk 3.9.1
    "wordnet": ("wordnet",),
    # where results land: a folder per model, tables as parquet + CSV
    "results": ("CROSS_MODEL_FOLDER", "REPLICATION_FOLDER", "check_folder_model", "check_writable", "display_name",
        "folder_model", "model_slug", "output_folder", "write_table",),
    # every results table declared once: name, producer, notebooks, columns
    "tables": ("NAMES",),
    # the gendered and neutral word lexicons and their counts
    "lexicon": ("FEMALE_WORDS", "GENDER_LEXICONS", "MALE_WORDS", "NEUTRAL_LEXICONS", "count_table",
        "male_proportion", "tokenize", "validate_lexicons",),
    # the digits every number is printed with, one function per quantity
    "precision": ("bound_text", "count_text", "interval_text", "mc_interval_text", "mc_round", "number_text",
        "p_text", "percent_text", "percentile_bounds", "relative_difference_text",),
    # tests with effect sizes, intervals and corrections; the one two-group engine
    "stats": ("STAT_COLUMNS", "TWO_GROUP_TESTS", "adjust_pvalues", "bootstrap_ci", "check_n_boot", "chi2_table",
        "cluster_bootstrap_ci", "cohens_d", "column_test", "correlation_rows", "group_tests", "hedges_g", "holm",
        "hurdle_tests", "mann_whitney", "odds_ratio", "ols", "partial_correlation_rows", "permutation_p",
        "permutation_p_text", "permutation_reference", "results_table", "student_t", "welch_anova", "welch_t",),
    # a measure checked against the world: one engine for every side
    "criterion_validity": ("MIN_ITEMS", "POWER", "VALIDITY_VERDICTS", "correlation_text", "describe_discriminant",
        "discriminant_verdict", "measure_verdict", "statistic_row", "validity_statistics",),
    # the random-intercept binomial logistic model, its profile interval and LR test
    "mixed": ("check_permutations", "drifted", "fit_mixed_logit", "mixed_row",),
    # the binomial logistic model with random intercepts per cluster and per item within it
    "nested": ("fit_nested_logit", "nested_row",),
}

__all__ = [name for names in _EXPORTS.values() for name in names]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
