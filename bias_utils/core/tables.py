"""Every results table in one place: its name, the function that produces it, the notebooks that write it, its columns.

Notebooks write ``out / tables.NAMES.POLES`` instead of typing ``'poles'``; readers of other models' results
(``crossmodel``, ``summary``) look names up here; README's list of the tables each notebook writes is
:func:`readme_cell` of that notebook, and a test checks README, the notebooks and this registry against
each other both ways. A name with a ``{field}`` (``contexts_{source}``) is a family of tables, one per value;
write one with ``NAMES.CONTEXTS_OF_SOURCE.format(source=...)``.

The producing function is a dotted string, not an import: this module sits in the lowest layer so that
every layer can read it, and a test resolves every string. ``columns`` lists the columns in order; the
producing function's docstring says what they mean.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "NAMES",
]


@dataclass(frozen=True)
class _Table:
    """One results table: ``name`` (the file stem), ``producer`` (``bias_utils.module.function``), the
    ``notebooks`` that write it (stems), what it holds (``about``) and its ``columns`` in order."""

    name: str
    producer: str
    notebooks: tuple[str, ...]
    about: str
    columns: tuple[str, ...]

    def matches(self, stem: str) -> bool:
        """Whether a file stem is this table (any value of a ``{field}`` in the name)."""
        return re.fullmatch(re.sub(r"\\\{\w+\\\}", r"\\w+", re.escape(self.name)), stem) is not None


#: name -> :class:`Table`, in the order README lists them.
_TABLES: dict[str, _Table] = {}


def _declare(name: str, producer: str, notebooks: tuple[str, ...], about: str, columns: tuple[str, ...]) -> str:
    if name in _TABLES:
        raise ValueError(f"table {name!r} is declared twice")
    _TABLES[name] = _Table(name, producer, notebooks, about, columns)
    return name


def table(stem: str) -> _Table:
    """The declaration of a table by its file stem (``contexts_generated`` finds ``contexts_{source}``)."""
    if stem in _TABLES:
        return _TABLES[stem]
    found = [t for t in _TABLES.values() if t.matches(stem)]
    if not found:
        raise KeyError(f"no results table {stem!r} is declared in bias_utils.core.tables")
    return found[0]


def _notebook_tables(notebook: str) -> list[str]:
    """Names of the tables a notebook (stem, e.g. ``03_projection_accuracy``) writes, in declaration order."""
    return [t.name for t in _TABLES.values() if notebook in t.notebooks]


def _readme_cell(notebook: str) -> str:
    """README's "tables written" cell for a notebook: its table names in backticks, ``{field}`` as ``<field>``."""
    return ", ".join("`" + re.sub(r"{(\w+)}", r"<\1>", name) + "`" for name in _notebook_tables(notebook))


class NAMES:
    """Every results table's file name as an attribute (``out / tables.NAMES.POLES``), declared in the
    order README lists them: a typo is an AttributeError, not a table nobody reads."""

    DICTIONARY_COUNTS = _declare(
        "dictionary_counts", "bias_utils.profiles.dictionaries.pole_counts", ("01_dictionaries",),
        "senses per dimension and pole of the dictionary, against the paper's Table 1",
        ("dimension", "direction", "found", "published", "difference"))
    FULL_DICTIONARY_COUNTS = _declare(
        "full_dictionary_counts", "bias_utils.profiles.dictionaries.pole_counts", ("01_dictionaries",),
        "extra terms of the full dictionary per dimension and pole, against the counts the paper reports",
        ("dimension", "direction", "found", "published", "difference"))
    CONTEXT_REPORT = _declare(
        "context_report", "bias_utils.profiles.contexts.context_report", ("02_contexts",),
        "properties of each context source (the paper's Figure 2)",
        ("source", "n_senses", "n_contexts", "senses_without", "contexts_per_sense", "mean_words", "median_words",
         "mean_term_position", "mean_relative_position", "share_gendered"))
    CONTEXTS_OF_SOURCE = _declare(
        "contexts_{source}", "bias_utils.profiles.contexts.build_contexts", ("02_contexts",),
        "the contexts of the selected source, one row per sense and context",
        ("sense_id", "dimension", "term", "direction", "context", "context_source", "context_index", "source"))
    CONTEXTS_SKIPPED = _declare(
        "contexts_skipped", "bias_utils.profiles.contexts.build_contexts", ("02_contexts",),
        "senses without contexts, per source",
        ("sense_id", "dimension", "term", "direction", "source", "reason"))
    CONTEXTS_DROPPED = _declare(
        "contexts_dropped", "bias_utils.profiles.contexts.build_contexts", ("02_contexts",),
        "generated contexts the quality filters removed",
        ("sense_id", "term", "context", "context_source", "reason"))
    POLES = _declare(
        "poles", "bias_utils.profiles.space.pole_table", ("03_projection_accuracy",),
        "senses per pole that entered the basis; the poles of an untestable axis (too few terms kept a context)",
        ("dimension", "direction", "n_senses", "space", "testable", "reason"))
    GENERATED_CONTEXTS = _declare(
        "generated_contexts", "bias_utils.profiles.contexts.generation_report",
        ("03_projection_accuracy", "04_profiles"),
        "senses without published contexts: contexts generated now and kept by the filters",
        ("sense_id", "dimension", "term", "direction", "generator", "n_generated", "n_kept"))
    DROPPED_SENSES = _declare(
        "dropped_senses", "bias_utils.profiles.space.dropped_senses",
        ("03_projection_accuracy", "04_profiles", "08_completion_profiles"),
        "senses and contexts that did not reach an axis, with stage and reason",
        ("sense_id", "term", "context", "stage", "reason"))
    DIRECTION_ACCURACY = _declare(
        "direction_accuracy", "bias_utils.profiles.space.direction_prediction", ("03_projection_accuracy",),
        "direction-prediction accuracy of the extra terms with bootstrap CIs (Table 2)",
        ("model_id", "context_source", "term_contexts", "evaluation", "layer", "dimension", "cutoff", "accuracy",
         "ci_low", "ci_high", "n", "n_high", "n_low"))
    DIRECTION_ACCURACY_TERM_CONTEXTS = _declare(
        "direction_accuracy_term_contexts", "bias_utils.profiles.space.accuracy_by_term_contexts",
        ("03_projection_accuracy",),
        "direction accuracy with the extra terms in generated and in WordNet contexts",
        ("model_id", "context_source", "term_contexts", "evaluation", "layer", "dimension", "cutoff", "accuracy",
         "ci_low", "ci_high", "n", "n_high", "n_low"))
    DIRECTION_VALUES = _declare(
        "direction_values", "bias_utils.profiles.space.direction_prediction", ("03_projection_accuracy",),
        "each extra term's projected value per layer",
        ("term", "dimension", "term_dimension", "direction", "layer", "value", "evaluation"))
    DIRECTION_SKIPPED = _declare(
        "direction_skipped", "bias_utils.profiles.space.direction_prediction", ("03_projection_accuracy",),
        "extra terms or contexts without an embedding",
        ("sense_id", "term", "context", "reason"))
    AXIS_VALIDITY = _declare(
        "axis_validity", "bias_utils.profiles.axis_validity.axis_validity", ("03_projection_accuracy",),
        "each axis's rank AUC against a pole-label permutation null, and its verdict",
        ("model_id", "context_source", "term_contexts", "space", "dimension", "layer", "auc", "null_mean",
         "null_low", "null_high", "p", "p_floor", "n_high", "n_low", "n_terms", "n_permutations", "detectable_auc",
         "verdict", "raw_accuracy", "majority_share", "raw_p", "raw_verdict"))
    EXTRA_TERMS_COVERAGE = _declare(
        "extra_terms_coverage", "bias_utils.profiles.extra_contexts.extra_coverage", ("03_projection_accuracy",),
        "extra terms covered by the generated contexts per dimension and pole",
        ("dimension", "direction", "n_terms", "n_generated", "n_covered_round1", "n_round2", "n_covered_round2",
         "n_covered", "coverage", "mean_contexts"))
    PROFILE_STATS = _declare(
        "profile_stats", "bias_utils.profiles.population_profiles.profile_stats", ("04_profiles",),
        "female vs male per population and dimension: Welch and Student t, Hedges' g with CI, Holm",
        ("population", "space", "layer", "dimension", "group_a", "group_b", "n_a", "n_b", "mean_a", "mean_b",
         "sd_a", "sd_b", "diff", "t", "df", "p", "p_holm", "t_student", "df_student", "p_student", "p_student_holm",
         "g", "g_ci_low", "g_ci_high", "significant", "test", "statistic", "p_adj", "adj_method", "effect",
         "effect_size", "ci_low", "ci_high", "n"))
    PROFILE_STATS_BY_LAYER = _declare(
        "profile_stats_by_layer", "bias_utils.profiles.population_profiles.profile_stats", ("04_profiles",),
        "profile_stats at every layer",
        ("population", "space", "layer", "dimension", "group_a", "group_b", "n_a", "n_b", "mean_a", "mean_b",
         "sd_a", "sd_b", "diff", "t", "df", "p", "p_holm", "t_student", "df_student", "p_student", "p_student_holm",
         "g", "g_ci_low", "g_ci_high", "significant", "test", "statistic", "p_adj", "adj_method", "effect",
         "effect_size", "ci_low", "ci_high", "n"))
    PROFILE_VALUES = _declare(
        "profile_values", "bias_utils.profiles.population_profiles.profile_table", ("04_profiles",),
        "each word's projected and standardised value per dimension",
        ("population", "group", "word", "kind", "space", "layer", "dimension", "value", "z"))
    PROFILE_VALUES_BY_LAYER = _declare(
        "profile_values_by_layer", "bias_utils.profiles.population_profiles.profile_table", ("04_profiles",),
        "profile_values at every layer",
        ("population", "group", "word", "kind", "space", "layer", "dimension", "value", "z"))
    PROFILE_GROUP_MEANS = _declare(
        "profile_group_means", "bias_utils.profiles.population_profiles._group_means", ("04_profiles",),
        "group means of the standardised values with t intervals",
        ("population", "space", "layer", "dimension", "group", "n", "mean", "sd", "ci_low", "ci_high"))
    PROFILE_ANOVA = _declare(
        "profile_anova", "bias_utils.profiles.population_profiles._profile_anova", ("04_profiles",),
        "Welch ANOVA across the groups of a population",
        ("population", "space", "layer", "dimension", "test", "group_a", "group_b", "statistic", "df", "p", "p_adj",
         "adj_method", "effect", "effect_size", "ci_low", "ci_high", "n"))
    PROFILE_NONBINARY = _declare(
        "profile_nonbinary", "bias_utils.profiles.population_profiles._nonbinary_table", ("04_profiles",),
        "non-binary terms on the binary terms' scale",
        ("series", "population", "group", "word", "space", "layer", "dimension", "z", "ci_low", "ci_high", "n"))
    PROFILE_WORDS = _declare(
        "profile_words", "bias_utils.profiles.population_profiles.population_embeddings", ("04_profiles",),
        "each population word: kind, article, templates embedded",
        ("population", "group", "word", "kind", "article", "n_templates", "warning"))
    PROFILE_SKIPPED = _declare(
        "profile_skipped", "bias_utils.profiles.population_profiles.population_embeddings", ("04_profiles",),
        "(word, template) pairs that could not be embedded",
        ("population", "group", "word", "context", "reason"))
    OCCUPATION_VALIDITY = _declare(
        "occupation_validity", "bias_utils.profiles.gender_direction._validity_statistics", ("04_profiles",),
        "the female-male direction, warmth and competence of 60 occupation nouns against the BLS share of women: "
        "Spearman and Pearson with occupation-bootstrap CIs, the direction's verdict, and its discriminant rows "
        "(partial association beyond warmth and competence, with its verdict)",
        ("test", "group_a", "group_b", "statistic", "df", "p", "p_adj", "adj_method", "effect", "effect_size",
         "ci_low", "ci_high", "n", "measure", "controls", "detectable", "verdict"))
    OCCUPATION_VALIDITY_VALUES = _declare(
        "occupation_validity_values", "bias_utils.profiles.gender_direction.occupation_validity", ("04_profiles",),
        "each occupation noun's BLS share of women and its position on the direction, warmth and competence",
        ("occupation", "group", "bls_pct_female", "bls_year", "n_templates", "gender_position", "warmth", "competence"))
    LAYER_CURVES = _declare(
        "layer_curves", "bias_utils.profiles.layers.layers_by_context", ("05_layers",),
        "accuracy and female-male gap on every layer and context source",
        ("model_id", "context_source", "layer", "measure", "dimension", "value", "ci_low", "ci_high", "p_holm"))
    LAYER_SKIPPED = _declare(
        "layer_skipped", "bias_utils.profiles.layers.layers_by_context", ("05_layers",),
        "senses and contexts skipped per context source",
        ("context_source", "sense_id", "term", "context", "stage", "reason"))
    BOLD_METRICS = _declare(
        "bold_metrics", "bias_utils.audit.bold.completion_metrics", ("06_bold_audit",),
        "one row per completion: gendered words, PMI",
        ("prompt_id", "sample", "completion", "n_tokens", "finish_reason", "group", "category", "occupation",
         "prompt", "n_words", "male_words", "male_words_list", "female_words", "female_words_list", "neutral_words",
         "neutral_words_list", "gendered_words", "any_gendered", "male_proportion", "male_share",
         "n_occupation_terms", "male_cooccur", "female_cooccur", "male_pmi", "female_pmi",
         "pmi_difference_smoothed", "pmi_difference", "empty_completion"))
    BOLD_LEXICON_COVERAGE = _declare(
        "bold_lexicon_coverage", "bias_utils.models.decoding.lexicon_token_ids", ("06_bold_audit",),
        "which lexicon words are one token of the model (the expected counts use those)",
        ("lexicon", "word", "variant", "n_tokens", "single_token", "token_id", "first_token_id"))
    BOLD_STATISTICS = _declare(
        "bold_statistics", "bias_utils.audit.bold.audit_statistics", ("06_bold_audit",),
        "the audit's tests, the pre-stated primary estimand first",
        ("test", "group_a", "group_b", "statistic", "df", "p", "p_adj", "adj_method", "effect", "effect_size",
         "ci_low", "ci_high", "n", "role", "measure", "unit", "n_occupations", "n_informative", "n_permutations"))
    BOLD_GROUP_SUMMARY = _declare(
        "bold_group_summary", "bias_utils.audit.bold.group_summary", ("06_bold_audit",),
        "per occupation group: completions, gendered shares, word counts",
        ("group", "n_completions", "n_occupations", "n_gendered_completions", "share_gendered", "share_ci_low",
         "share_ci_high", "male_words", "female_words", "male_words_mean", "male_words_sd", "female_words_mean",
         "female_words_sd", "mean_male_proportion", "mean_male_share_gendered", "mean_pmi_difference",
         "n_empty_completions", "neutral_words_total"))
    BOLD_OCCUPATIONS = _declare(
        "bold_occupations", "bias_utils.audit.occupations.occupation_table", ("06_bold_audit",),
        "per primary unit (deduplicated person-noun occupation): completions, gendered word counts and its male share",
        ("group", "occupation", "keys", "category", "n_prompts", "n_completions", "male_words", "female_words",
         "gendered_words", "n_gendered_completions", "male_completions", "female_completions", "share_gendered",
         "male_share_gendered", "sum_male_share", "share_of_group_male_words", "share_of_group_female_words",
         "male_word_share", "informative"))
    BOLD_INFLUENCE = _declare(
        "bold_influence", "bias_utils.audit.occupations.influence_table", ("06_bold_audit",),
        "the primary difference in male share, the conditional and the pooled odds ratio without each occupation",
        ("rank", "group", "occupation", "category", "n_completions", "male_words", "female_words", "male_word_share",
         "share_difference", "share_difference_without", "share_change", "influential", "estimate", "odds_ratio",
         "odds_ratio_without", "log_or_change", "relative_change", "odds_ratio_influential", "pooled_odds_ratio",
         "pooled_odds_ratio_without", "pooled_log_or_change"))
    BOLD_HEADLINE = _declare(
        "bold_headline", "bias_utils.audit.occupation_headline.headline_table", ("06_bold_audit",),
        "the pre-stated primary estimand in one row (the male shares, their difference, the marginal odds ratio), "
        "its sensitivity rows and the published selection's figure beside it",
        ("group_a", "group_b", "estimand", "share_difference", "share_difference_ci_low", "share_difference_ci_high",
         "share_difference_ci_low_mc_se", "share_difference_ci_high_mc_se", "share_difference_p", "male_share_a",
         "male_share_a_ci_low", "male_share_a_ci_high", "male_share_b", "male_share_b_ci_low", "male_share_b_ci_high",
         "marginal_odds_ratio", "marginal_ci_low", "marginal_ci_high", "marginal_ci_low_mc_se",
         "marginal_ci_high_mc_se", "marginal_p", "n_units_a", "n_units_b", "n_informative_a", "n_informative_b",
         "n_units_informative", "n_completions", "n_gendered_completions", "conditional_odds_ratio",
         "conditional_ci_low", "conditional_ci_high", "conditional_p", "sigma", "typical_male_share_a",
         "typical_male_share_b", "nested_odds_ratio", "nested_ci_low", "nested_ci_high", "nested_p",
         "nested_sigma_occupation", "nested_sigma_completion", "nested_n_completions", "nested_note",
         "completion_odds_ratio",
         "completion_ci_low", "completion_ci_high", "completion_p", "pooled_odds_ratio", "pooled_ci_low",
         "pooled_ci_high", "pooled_ci_low_mc_se", "pooled_ci_high_mc_se", "pooled_p", "published_odds_ratio",
         "published_ci_low", "published_ci_high", "published_ci_low_mc_se", "published_ci_high_mc_se", "published_p",
         "n_keys_a", "n_keys_b", "independent_ci_low", "independent_ci_high", "independent_p", "n_permutations",
         "n_boot", "top_occupation", "top_group", "share_difference_without_top", "n_influential"))
    BOLD_UNITS = _declare(
        "bold_units", "bias_utils.audit.occupation_units.unit_table", ("06_bold_audit",),
        "what each BOLD key of the selection is: its kind, its unit, duplicates, group conflicts, primary",
        ("group", "key", "categories", "n_prompts", "n_distinct_prompts", "noun", "head", "kind", "kind_rule", "unit",
         "unit_kind", "duplicate_of", "conflict", "primary"))
    BOLD_UNIT_COUNTS = _declare(
        "bold_unit_counts", "bias_utils.audit.occupation_units.unit_counts", ("06_bold_audit",),
        "per group and kind: BOLD keys, units, primary units, duplicates, conflicts",
        ("group", "kind", "keys", "units", "primary_units", "duplicate_keys", "conflict_units"))
    BOLD_EXCLUDED = _declare(
        "bold_excluded", "bias_utils.audit.occupation_units.excluded_completions", ("06_bold_audit",),
        "the completions the primary analysis leaves out, by group and reason, with their gendered words",
        ("group", "reason", "why", "keys", "n_keys", "n_completions", "n_gendered_completions", "male_words",
         "female_words"))
    BOLD_SKIPPED = _declare(
        "bold_skipped", "bias_utils.audit.bold.run_audit", ("06_bold_audit",),
        "tests or completions the audit skipped",
        ("test", "reason", "prompt_id", "sample"))
    NEXT_WORD_TOKENS = _declare(
        "next_word_tokens", "bias_utils.audit.next_word_prompts.lexicon_first_tokens", ("11_intrinsic_extrinsic",),
        "the token each lexicon word counts by after a template (one token, or its first; shared ones not counted)",
        ("lexicon", "word", "variant", "n_tokens", "token_id", "token", "counted", "measure_definition"))
    NEXT_WORD_PROMPTS = _declare(
        "next_word_prompts", "bias_utils.audit.next_word.next_word_table", ("11_intrinsic_extrinsic",),
        "per occupation noun and neutral template: the next word's probability of a female and of a male word, and "
        "their log-ratio; of singular 'they' and of a neopronoun; whether the next word reads as one person",
        ("occupation", "template", "reference", "prompt", "n_tokens", "female_mass", "male_mass", "log_ratio",
         "neutral_mass", "neopronoun_mass", "singular", "measure_definition"))
    NEXT_WORD_OCCUPATIONS = _declare(
        "next_word_occupations", "bias_utils.audit.next_word.next_word_table", ("11_intrinsic_extrinsic",),
        "per occupation noun: the exact next-word measure (mean log-ratio over the templates, gendered mass); over the "
        "templates that read as one person, the 'they' and neopronoun masses and the neutral share (none for a plural "
        "noun, whose 'they' is plain plural)",
        ("occupation", "n_templates", "female_mass", "male_mass", "gendered_mass", "female_share", "log_ratio",
         "log_ratio_sd", "plural_noun", "n_singular", "neutral_mass", "neopronoun_mass", "neutral_share",
         "measure_definition"))
    NEXT_WORD_NEUTRAL_TOKENS = _declare(
        "next_word_neutral_tokens", "bias_utils.audit.next_word.next_word_table", ("11_intrinsic_extrinsic",),
        "the token each singular-'they' and neopronoun word counts by after a template (one token, or its first; "
        "one the log-ratio's words count, or both lexicons share, not counted)",
        ("lexicon", "word", "variant", "n_tokens", "token_id", "token", "counted", "neutral_definition"))
    NEXT_WORD_NEUTRAL = _declare(
        "next_word_neutral", "bias_utils.audit.neutral_share.neutral_statistics", ("11_intrinsic_extrinsic",),
        "beyond the binary: the mean neutral share (BLS occupations, BOLD primary units), its Spearman rho with the "
        "workforce's balance, it and the female and male masses against the BLS share of women, the neopronouns' mass",
        ("test", "group_a", "group_b", "statistic", "df", "p", "p_adj", "adj_method", "effect", "effect_size",
         "ci_low", "ci_high", "n", "question", "units", "measure", "against", "neutral_definition", "templates"))
    NEXT_WORD_VALIDITY = _declare(
        "next_word_validity", "bias_utils.audit.next_word.next_word_validity", ("11_intrinsic_extrinsic",),
        "the next-word log-ratio of the 60 BLS occupations against their share of women (the gender direction's "
        "engine and verdict) and its discriminant rows beyond warmth and competence",
        ("test", "group_a", "group_b", "statistic", "df", "p", "p_adj", "adj_method", "effect", "effect_size",
         "ci_low", "ci_high", "n", "measure", "controls", "detectable", "verdict", "measure_definition", "coverage",
         "low_coverage"))
    NEXT_WORD_SAMPLED_CHECK = _declare(
        "next_word_sampled_check", "bias_utils.audit.next_word.sampled_check", ("11_intrinsic_extrinsic",),
        "(with sampled_check) Spearman and Pearson between the exact next-word log-ratio and the log-odds of the "
        "audit's words in sampled continuations of the same sentences, for the 60 BLS occupations",
        ("test", "group_a", "group_b", "statistic", "df", "p", "p_adj", "adj_method", "effect", "effect_size",
         "ci_low", "ci_high", "n", "n_gendered", "measure_definition"))
    LINK_NEXT_WORD = _declare(
        "link_next_word", "bias_utils.intrinsic_extrinsic.link._next_word_link_statistics", ("11_intrinsic_extrinsic",),
        "the link on the same occupations: the gender position against the next-word log-ratio across the 60 BLS "
        "occupations (primary), beyond the BLS share, over the BOLD primary units, and the BOLD-based link as a "
        "robustness row",
        ("test", "group_a", "group_b", "statistic", "df", "p", "p_adj", "adj_method", "effect", "effect_size",
         "ci_low", "ci_high", "n", "analysis", "role", "units", "intrinsic", "extrinsic_measure", "controls",
         "direction_verdict", "readable", "primary", "note", "measure_definition", "coverage", "low_coverage"))
    LINK_NEXT_WORD_OCCUPATIONS = _declare(
        "link_next_word_occupations", "bias_utils.intrinsic_extrinsic.link.next_word_link", ("11_intrinsic_extrinsic",),
        "per occupation of each set (BLS occupations, BOLD primary units): its gender position and next-word measure",
        ("units", "occupation", "noun", "group", "bls_pct_female", "gender_position", "log_ratio", "gendered_mass",
         "measure_definition"))
    LINK_OCCUPATIONS = _declare(
        "link_occupations", "bias_utils.intrinsic_extrinsic.bold_link.run_link", ("11_intrinsic_extrinsic",),
        "per occupation: the noun on the female-male direction and on warmth/competence, and the log-odds of female vs"
        " male words in the completions",
        ("occupation", "noun", "group", "category", "n_completions", "n_templates", "gender_position", "warmth",
         "competence", "male_words", "female_words", "expected_male", "expected_female", "extrinsic_measure",
         "male_count", "female_count", "log_odds"))
    LINK_STATISTICS = _declare(
        "link_statistics", "bias_utils.intrinsic_extrinsic.bold_link._link_statistics", ("11_intrinsic_extrinsic",),
        "Pearson, Spearman and the slopes (alone, within BOLD category) of the extrinsic on each intrinsic measure",
        ("test", "group_a", "group_b", "statistic", "df", "p", "p_adj", "adj_method", "effect", "effect_size",
         "ci_low", "ci_high", "n", "intrinsic", "extrinsic_measure", "se", "primary", "note"))
    LINK_SKIPPED = _declare(
        "link_skipped", "bias_utils.intrinsic_extrinsic.bold_link._intrinsic_table", ("11_intrinsic_extrinsic",),
        "occupation nouns or gendered terms the model could not embed",
        ("population", "group", "word", "context", "reason"))
    LONG_FORM_TEXTS = _declare(
        "long_form_texts", "bias_utils.audit.long_form.long_form_table", ("11_intrinsic_extrinsic",),
        "per text the model wrote at length about one person in an occupation: its instruction, sample and counts of "
        "the audit's female, male and neutral words, the 'they' forms and the neopronouns",
        ("occupation", "instruction", "sample", "prompt", "completion", "n_tokens", "finish_reason", "n_words",
         "female_words", "male_words", "neutral_words", "they_words", "neopronoun_words", "female_words_list",
         "male_words_list", "neutral_words_list", "any_gendered", "long_form_definition"))
    LONG_FORM_OCCUPATIONS = _declare(
        "long_form_occupations", "bias_utils.audit.long_form.long_form_table", ("11_intrinsic_extrinsic",),
        "per occupation: the long form's female share, 'they' share and share of texts with a gendered word, each with "
        "an interval resampling its texts",
        ("occupation", "n_texts", "n_tokens", "female_words", "male_words", "they_words", "neopronoun_words",
         "neutral_words", "female_share", "female_share_ci_low", "female_share_ci_high", "they_share",
         "they_share_ci_low", "they_share_ci_high", "any_gendered_share", "any_gendered_share_ci_low",
         "any_gendered_share_ci_high", "long_form_definition"))
    LONG_FORM_LINK = _declare(
        "long_form_link", "bias_utils.audit.long_form._link_statistics", ("11_intrinsic_extrinsic",),
        "does the next word predict the long form: Spearman and Pearson of the long-form female share with the "
        "next-word log-ratio (primary), each with the BLS share, the 'they' share with the next word's neutral share; "
        "the mean shares; intervals resampling occupations",
        ("test", "group_a", "group_b", "statistic", "df", "p", "p_adj", "adj_method", "effect", "effect_size",
         "ci_low", "ci_high", "n", "analysis", "x", "y", "units", "primary", "long_form_definition"))
    LONG_FORM_LINK_OCCUPATIONS = _declare(
        "long_form_link_occupations", "bias_utils.audit.long_form._link_occupations", ("11_intrinsic_extrinsic",),
        "per BLS occupation: its share of women, next-word log-ratio and neutral share beside its long-form shares",
        ("occupation", "group", "bls_pct_female", "log_ratio", "neutral_share", "female_share", "female_share_ci_low",
         "female_share_ci_high", "they_share", "any_gendered_share", "n_texts", "long_form_definition"))
    ERASURE_WORDS = _declare(
        "erasure_words", "bias_utils.intrinsic_extrinsic.erasure.erasure_tradeoff", ("12_erasure",),
        "the words of the gender concept's erasure: the fit set, the held-out names, the facts' gendered nouns",
        ("population", "group", "word", "role"))
    ERASURE_TRADEOFF = _declare(
        "erasure_tradeoff", "bias_utils.intrinsic_extrinsic.erasure_statistics.tradeoff_table", ("12_erasure",),
        "per erasure (LEACE, random subspace, shuffled labels; one hidden state or all) and measure: its value, the "
        "change from the unhooked model with a paired resampling interval, the stereotype and the fact removed, and "
        "the best trade-off",
        ("model_id", "erasure", "layer", "depth", "rank", "measure", "value", "baseline", "change", "ci_low", "ci_high",
         "resampled", "n", "best"))
    ERASURE_PROBE = _declare(
        "erasure_probe", "bias_utils.intrinsic_extrinsic.erasure_statistics.probe_table", ("12_erasure",),
        "per erasure and hidden state: a ridge probe's cross-validated accuracy on the held-out names' gender",
        ("model_id", "erasure", "layer", "state", "accuracy"))
    ERASURE_LONG_FORM = _declare(
        "erasure_long_form", "bias_utils.intrinsic_extrinsic.erasure_long_form.long_form_erasure_table",
        ("12_erasure",),
        "the long form under LEACE and its random control at the states chapter 12 reads: per condition and measure "
        "(its female share's rho with the BLS share and the next word, the majority gap, texts with a gendered "
        "word) the value, the change from the unhooked model and LEACE's beyond its control, intervals resampling "
        "occupations paired",
        ("model_id", "erasure", "layer", "role", "measure", "value", "value_ci_low", "value_ci_high", "baseline",
         "change", "ci_low", "ci_high", "beyond_control", "beyond_control_ci_low", "beyond_control_ci_high", "n",
         "n_texts", "resampled", "long_form_definition"))
    ERASURE_LONG_FORM_TEXTS = _declare(
        "erasure_long_form_texts", "bias_utils.intrinsic_extrinsic.erasure_long_form.long_form_under_erasure",
        ("12_erasure",),
        "per condition (erasure, hidden state) and text: the long form's text and counts, as long_form_texts",
        ("erasure", "layer", "occupation", "instruction", "sample", "prompt", "completion", "n_tokens",
         "finish_reason", "n_words", "female_words", "male_words", "neutral_words", "they_words", "neopronoun_words",
         "female_words_list", "male_words_list", "neutral_words_list", "any_gendered", "long_form_definition"))
    REPLICATION = _declare(
        "replication", "bias_utils.audit.replication.replicate_published_audit", ("07_bold_replication",),
        "the published audit's quantities, ours beside theirs",
        ("quantity", "ours", "published", "source", "rel_diff"))
    COMPLETION_PROJECTION = _declare(
        "completion_projection", "bias_utils.intrinsic_extrinsic.completions.completion_projection",
        ("08_completion_profiles",),
        "each completion's projection per dimension, with the prompt alone as baseline",
        ("prompt_id", "sample", "completion", "n_tokens", "finish_reason", "group", "category", "occupation",
         "prompt", "n_words", "male_words", "male_words_list", "female_words", "female_words_list", "neutral_words",
         "neutral_words_list", "gendered_words", "any_gendered", "male_proportion", "male_share",
         "n_occupation_terms", "male_cooccur", "female_cooccur", "male_pmi", "female_pmi",
         "pmi_difference_smoothed", "pmi_difference", "empty_completion", "completion_index", "space", "layer",
         "dimension", "value", "prompt_value", "beyond_prompt_value", "z", "prompt_z", "beyond_prompt_z"))
    COMPLETION_PROJECTION_STATS = _declare(
        "completion_projection_stats", "bias_utils.intrinsic_extrinsic.completions.completion_projection_stats",
        ("08_completion_profiles",),
        "female- vs male-dominated occupations on each axis",
        ("test", "group_a", "group_b", "statistic", "df", "p", "p_adj", "adj_method", "effect", "effect_size",
         "ci_low", "ci_high", "n", "dimension", "n_a", "n_b", "mean_a", "mean_b", "analysis", "measure", "unit",
         "p_floor", "n_permutations", "n_categories", "n_categories_total", "categories", "primary", "axis_readable"))
    COMPLETION_PROJECTION_OCCUPATIONS = _declare(
        "completion_projection_occupations", "bias_utils.intrinsic_extrinsic.completions.occupation_means",
        ("08_completion_profiles",),
        "occupation means of the projections",
        ("space", "layer", "dimension", "group", "category", "occupation", "n_completions", "z", "prompt_z",
         "beyond_prompt_z"))
    COMPLETION_PROJECTION_BY_CATEGORY = _declare(
        "completion_projection_by_category", "bias_utils.intrinsic_extrinsic.completions.category_contrasts",
        ("08_completion_profiles",),
        "female vs male within BOLD category",
        ("measure", "dimension", "category", "n_a", "n_b", "mean_a", "mean_b", "difference", "both_groups", "weight"))
    COMPLETION_PROJECTION_SKIPPED = _declare(
        "completion_projection_skipped", "bias_utils.intrinsic_extrinsic.completions.completion_embeddings",
        ("08_completion_profiles",),
        "completions that could not be embedded",
        ("prompt_id", "sample", "completion", "n_tokens", "finish_reason", "group", "category", "occupation",
         "prompt", "n_words", "male_words", "male_words_list", "female_words", "female_words_list", "neutral_words",
         "neutral_words_list", "gendered_words", "any_gendered", "male_proportion", "male_share",
         "n_occupation_terms", "male_cooccur", "female_cooccur", "male_pmi", "female_pmi",
         "pmi_difference_smoothed", "pmi_difference", "empty_completion", "part", "reason"))
    MODEL_FOLDERS = _declare(
        "model_folders", "bias_utils.book.crossmodel.model_folders", ("09_cross_model",),
        "each results folder the chapter was asked to read: the model it holds, whether it was used, and why not",
        ("folder", "model_id", "used", "n_tables", "reason"))
    DIRECTION_ACCURACY_ALL_MODELS = _declare(
        "direction_accuracy_all_models", "bias_utils.book.crossmodel.accuracy_by_model", ("09_cross_model",),
        "direction accuracy of every model",
        ("model_id", "context_source", "term_contexts", "evaluation", "layer", "dimension", "cutoff", "accuracy",
         "ci_low", "ci_high", "n", "n_high", "n_low"))
    AXIS_VALIDITY_ALL_MODELS = _declare(
        "axis_validity_all_models", "bias_utils.book.crossmodel.read_results", ("09_cross_model",),
        "axis_validity of every model",
        ("model_id", "context_source", "term_contexts", "space", "dimension", "layer", "auc", "null_mean",
         "null_low", "null_high", "p", "p_floor", "n_high", "n_low", "n_terms", "n_permutations", "detectable_auc",
         "verdict", "raw_accuracy", "majority_share", "raw_p", "raw_verdict"))
    UNREADABLE_AXES = _declare(
        "unreadable_axes", "bias_utils.book.crossmodel.unreadable_axes_by_model", ("09_cross_model",),
        "axes whose verdict is not supported, per model",
        ("model_id", "dimension"))
    GENDER_GAPS = _declare(
        "gender_gaps", "bias_utils.book.crossmodel.gender_gaps", ("09_cross_model",),
        "female-male gap per model, population and dimension",
        ("model_id", "population", "dimension", "gap", "g", "g_ci_low", "g_ci_high", "p_holm"))
    ROBUSTNESS_ALL_MODELS = _declare(
        "robustness_all_models", "bias_utils.book.crossmodel.cross_model_summary", ("09_cross_model",),
        "robustness_summary of every model",
        ("model_id", "population", "dimension", "expected_sign", "n_specs", "share_agree_significant",
         "share_positive_significant", "share_negative_significant", "median_g", "n_agree_significant_p",
         "n_permutations", "axis_auc", "axis_p", "axis_verdict", "axis_reading"))
    BOLD_ODDS_RATIOS = _declare(
        "bold_odds_ratios", "bias_utils.book.crossmodel.bold_odds_ratios", ("09_cross_model",),
        "the audit's odds ratio per model",
        ("model_id", "method", "odds_ratio", "ci_low", "ci_high", "ci_low_mc_se", "ci_high_mc_se", "p",
         "n_occupations", "n_informative", "n", "unit"))
    LINK_POOLED = _declare(
        "link_pooled", "bias_utils.book.pooling.pooled_link", ("09_cross_model",),
        "each model's intrinsic-extrinsic link (the next-word primary; the BOLD slope) and their random-effects pool",
        ("intrinsic", "test", "model_id", "estimate", "ci_low", "ci_high", "se", "se_scale", "n", "units",
         "extrinsic_measure", "p", "tau2", "q", "q_p", "i2", "measure_definition", "kept_apart"))
    INTRINSIC_EXTRINSIC = _declare(
        "intrinsic_extrinsic", "bias_utils.book.crossmodel.intrinsic_extrinsic", ("09_cross_model",),
        "profile gaps beside the audit's odds ratio per model, and the share of a reference to one person that goes "
        "to 'they'",
        ("model_id", "names_competence_gap", "names_warmth_gap", "terms_competence_gap", "terms_warmth_gap",
         "odds_ratio", "or_ci_low", "or_ci_high", "or_ci_low_mc_se", "or_ci_high_mc_se",
         "share_gendered_female_dominated",
         "share_gendered_male_dominated", "completion_competence_gap", "completion_warmth_gap",
         "completion_competence_p_holm", "completion_warmth_p_holm", "neutral_share", "neutral_ci_low",
         "neutral_ci_high", "neutral_definition", "neutral_templates"))
    ERASURE_CURVES = _declare(
        "erasure_curves", "bias_utils.book.crossmodel_erasure.erasure_curves", ("09_cross_model",),
        "per model and erasure (LEACE, and the eraser meant to spare the fact where run; one hidden state, or all): "
        "its relative depth, the shares of the stereotype and "
        "of the fact removed and their difference, the change in rho, with intervals, and the change in cross-entropy",
        ("model_id", "erasure", "layer", "depth", "relative_depth", "stereotype_removed", "stereotype_ci_low",
         "stereotype_ci_high", "fact_removed", "fact_ci_low", "fact_ci_high", "selectivity", "selectivity_ci_low",
         "selectivity_ci_high", "selective", "rho_baseline", "rho_change", "rho_ci_low", "rho_ci_high",
         "cross_entropy_baseline", "cross_entropy_change", "cross_entropy_ci_low", "cross_entropy_ci_high"))
    ROBUSTNESS_SKIPPED = _declare(
        "robustness_skipped", "bias_utils.profiles.robustness.collect_curve_inputs", ("10_robustness",),
        "items the specification curve skipped, per step and source",
        ("step", "context_source", "item", "reason"))
    ROBUSTNESS_BEST_LAYERS = _declare(
        "robustness_best_layers", "bias_utils.profiles.robustness._best_layers", ("10_robustness",),
        "the layer chosen per source and dimension on half the extra terms, its accuracy on the other half",
        ("context_source", "dimension", "layer", "accuracy_selection", "n_selection", "accuracy_held_out",
         "n_held_out"))
    ROBUSTNESS_SPECS = _declare(
        "robustness_specs", "bias_utils.profiles.robustness.specification_curve", ("10_robustness",),
        "one row per specification: the gap's test, effect size and CI",
        ("population", "context_source", "template_set", "layer_choice", "layer", "test_choice", "space",
         "dimension", "group_a", "group_b", "diff", "expected_sign", "agrees", "significant", "test", "statistic",
         "df", "p", "p_adj", "adj_method", "effect", "effect_size", "ci_low", "ci_high", "n"))
    ROBUSTNESS_JOINT_NULL = _declare(
        "robustness_joint_null", "bias_utils.profiles.robustness.specification_curve", ("10_robustness",),
        "the joint test's statistics under each relabelling",
        ("population", "dimension", "permutation", "statistic", "value"))
    ROBUSTNESS_AXIS_VALIDITY = _declare(
        "robustness_axis_validity", "bias_utils.profiles.axis_validity.validity_by_source", ("10_robustness",),
        "axis_validity of every context source's space",
        ("model_id", "context_source", "term_contexts", "space", "dimension", "layer", "auc", "null_mean",
         "null_low", "null_high", "p", "p_floor", "n_high", "n_low", "n_terms", "n_permutations", "detectable_auc",
         "verdict", "raw_accuracy", "majority_share", "raw_p", "raw_verdict"))
    ROBUSTNESS_TOKENS = _declare(
        "robustness_tokens", "bias_utils.profiles.tokenisation.token_table", ("10_robustness",),
        "each word's subword token count",
        ("population", "group", "word", "kind", "article", "n_templates", "warning", "context", "n_tokens"))
    ROBUSTNESS_TOKEN_SHARES = _declare(
        "robustness_token_shares", "bias_utils.profiles.tokenisation.token_shares", ("10_robustness",),
        "share of one-token words per group",
        ("population", "group", "n", "n_one_token", "n_multi_token", "share_one_token", "mean_tokens"))
    ROBUSTNESS_TOKEN_REGRESSION = _declare(
        "robustness_token_regression", "bias_utils.profiles.tokenisation.token_regression", ("10_robustness",),
        "the gender coefficient with and without the token count",
        ("population", "dimension", "model", "term", "coef", "se", "t", "df", "p", "ci_low", "ci_high", "n"))
    ROBUSTNESS_TEMPLATE_GAP = _declare(
        "robustness_template_gap", "bias_utils.profiles.robustness.template_gap", ("10_robustness",),
        "the gap per template set",
        ("population", "dimension", "template_set", "effect_size", "ci_low", "ci_high", "p", "p_adj"))
    ROBUSTNESS_SUMMARY = _declare(
        "robustness_summary", "bias_utils.profiles.robustness.robustness_summary", ("10_robustness",),
        "per population and dimension: shares of agreeing specifications, the joint test, the axis verdict",
        ("model_id", "population", "dimension", "space", "group_a", "group_b", "expected_sign", "n_specs",
         "share_agree_sign", "share_agree_significant", "share_positive_significant", "share_negative_significant",
         "median_g", "n_permutations", "n_agree_significant", "n_agree_significant_null_median",
         "n_agree_significant_p", "median_effect", "median_effect_null_median", "median_effect_p", "axis_auc",
         "axis_p", "axis_verdict", "axis_reading", "share_layers_supported"))
    ROBUSTNESS_TIMING = _declare(
        "robustness_timing", "bias_utils.profiles.robustness.timing_table", ("10_robustness",),
        "seconds per step",
        ("step", "seconds"))
