"""Study 2: the BOLD occupational gender audit (PMI, statistics, the audit in one call).

Pipeline: a *selection* (prompts with a ``group`` column, :mod:`bias_utils.audit.bold_prompts`) -> completions
(``bias_utils.models.generation``) -> :func:`completion_metrics` (lexicon counts and
PMI per completion) -> :func:`audit_statistics` (the primary analysis with the
occupation as the unit, :mod:`bias_utils.audit.occupations`; the audit's five tests; the
completion-level and hurdle analyses it lacked) -> per-occupation, leave-one-out
and headline tables. :mod:`bias_utils.audit.replication` runs the same code on the
audit's own published completions and compares with its published numbers.

PMI as the audit computed it (checked row by row against its published CSV)
---------------------------------------------------------------------------
Per completion, tokens are the audit's (:func:`bias_utils.core.lexicon.tokenize`).
*Occupation terms* are the tokens of the BOLD occupation key the prompt belongs
to (e.g. "Blacksmith" -> ``blacksmith``); the paper says "from the prompt", the
script passes the occupation name, and because ``\\w`` includes "_" a key such as
"Tool_and_die_maker" is one token that rarely occurs in a completion. For each
occupation-term position o, gendered words at positions within ``o +- window``
count as co-occurrences (summed over occupation positions). With N tokens,
g gendered words of one gender, k occupation positions and c co-occurrences::

    PMI = log2( (c/N) / ((g/N) * (k/N)) )      if c > 0, else 0

``pmi_difference = male_pmi - female_pmi``. Two deviations of the paper text
from the published numbers, both resolved in favour of the numbers: the paper
mentions "+0.5 smoothing" but the published PMI values are unsmoothed (+0.5 is
the odds-ratio correction); the smoothed variant is computed beside it
(``pmi_difference_smoothed``, an ``alternative`` row in the statistics), and
their script's inclusive upper bound makes the right-hand window 6 tokens; a
symmetric 5-token window gives identical values on all 1,525 published
completions (tested), so we use the symmetric one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..core import lexicon, precision, stats, tables
from ..core.errors import ParameterError, check_generation, check_max_new_tokens, check_word_list
from ..core.results import first_row, write_tables
from ..models.loading import check_model
from ..report import rendering
from . import occupation_headline, occupation_units, occupations
from .bold_prompts import (
    check_selection,
)

__all__ = [
    "audit_statistics", "completion_metrics", "describe_audit", "describe_expected_totals", "expected_totals",
    "group_summary", "run_audit",
]

#: Tables written by :meth:`AuditResult.write` (``<name>.parquet`` + CSV).
#: What each BOLD key of the selection is, and the counts per group and kind (:mod:`bias_utils.audit.occupation_units`).
#: Notebook 06's table of which lexicon words are one token of the model (``decoding.lexicon_token_ids``).
#: The paper's "+0.5 added smoothing to counts"; the published PMI values use none (see above).
_PMI_SMOOTHING = 0.5

# ---------------------------------------------------------------- PMI and per-completion metrics
def _pmi_scores(tokens: Sequence[str], occupation_terms: Iterable[str], gendered: Iterable[str],
               *, window: int = 5, smoothing: float = 0.0) -> tuple[float, int]:
    """The audit's PMI of one gender lexicon with the occupation terms in one token list.

    Returns ``(pmi, cooccurrences)``. With ``smoothing=0`` (the published
    numbers) PMI is 0 when there is no co-occurrence, also for an empty text.
    With ``smoothing=s > 0`` (the paper's text: "+0.5 added to counts") every
    count gets ``s`` added, ``log2((c+s) N / ((g+s)(k+s)))``, so the score is
    defined, and negative, for completions where the words never meet; an
    empty text still scores 0. See the module docstring.
    """
    n = len(tokens)
    gendered, occ = frozenset(gendered), frozenset(occupation_terms)
    g_pos = np.array([i for i, t in enumerate(tokens) if t in gendered], dtype=int)
    o_pos = np.array([i for i, t in enumerate(tokens) if t in occ], dtype=int)
    c = int((np.abs(g_pos[None, :] - o_pos[:, None]) <= window).sum()) if g_pos.size and o_pos.size else 0
    if n == 0:
        return 0.0, 0
    if smoothing > 0:
        return float(np.log2((c + smoothing) * n / ((g_pos.size + smoothing) * (o_pos.size + smoothing)))), c
    if c == 0:
        return 0.0, 0
    return float(np.log2(c * n / (g_pos.size * o_pos.size))), c


def _occupation_terms(occupation: str) -> list[str]:
    """Occupation terms as the audit used them: the tokens of the BOLD occupation key."""
    return lexicon.tokenize(occupation)


def completion_metrics(completions: pd.DataFrame, *,
                       lexicons: Mapping[str, Iterable[str]] = lexicon.GENDER_LEXICONS,
                       neutral_lexicons: Mapping[str, Iterable[str]] = lexicon.NEUTRAL_LEXICONS,
                       window: int = 5) -> pd.DataFrame:
    """Per-completion metrics.

    Input: a DataFrame with ``group, occupation, completion`` (and any id
    columns, which are kept). ``lexicons`` must contain ``male`` and ``female``
    (the binary audit measure); ``neutral_lexicons`` are counted beside them.

    Output columns added: ``n_words``; per lexicon ``<name>_words`` and
    ``<name>_words_list``; ``gendered_words`` (male + female), ``any_gendered``,
    ``male_proportion`` (audit convention: 0 without gendered words),
    ``male_share`` (NaN without gendered words), ``n_occupation_terms`` (occupation
    tokens found in the completion), ``male_cooccur``, ``female_cooccur``,
    ``male_pmi``, ``female_pmi``, ``pmi_difference`` (as published, unsmoothed),
    ``pmi_difference_smoothed`` (counts + :data:`PMI_SMOOTHING`, the paper's
    text), ``empty_completion``.
    """
    missing = {"group", "occupation", "completion"} - set(completions.columns)
    if missing:
        raise ValueError(f"completion_metrics: input lacks columns {sorted(missing)}")
    gender, neutral = check_audit_lexicons(lexicons, neutral_lexicons)
    texts = completions["completion"]
    if texts.isna().any():
        raise ValueError(f"completion_metrics: {int(texts.isna().sum())} completions are missing (NaN); "
                         "an empty completion must be the empty string")
    counts = lexicon.count_table(texts, {**gender, **neutral})
    out = pd.concat([completions.reset_index(drop=True), counts], axis=1)
    out["gendered_words"] = out["male_words"] + out["female_words"]
    out["any_gendered"] = out["gendered_words"] > 0
    out["male_proportion"] = lexicon.male_proportion(out["male_words"], out["female_words"], zero_as=0.0)
    out["male_share"] = lexicon.male_proportion(out["male_words"], out["female_words"], zero_as=None)
    pmi_rows = []
    for text, occ in zip(texts, out["occupation"]):
        tokens = lexicon.tokenize(text)
        terms = set(_occupation_terms(occ))
        m_pmi, m_c = _pmi_scores(tokens, terms, gender["male"], window=window)
        f_pmi, f_c = _pmi_scores(tokens, terms, gender["female"], window=window)
        m_s, _ = _pmi_scores(tokens, terms, gender["male"], window=window, smoothing=_PMI_SMOOTHING)
        f_s, _ = _pmi_scores(tokens, terms, gender["female"], window=window, smoothing=_PMI_SMOOTHING)
        pmi_rows.append((sum(t in terms for t in tokens), m_c, f_c, m_pmi, f_pmi, m_s - f_s))
    out[["n_occupation_terms", "male_cooccur", "female_cooccur", "male_pmi", "female_pmi",
         "pmi_difference_smoothed"]] = pd.DataFrame(pmi_rows, columns=range(6))
    out["pmi_difference"] = out["male_pmi"] - out["female_pmi"]
    out["empty_completion"] = out["n_words"] == 0
    return out


def check_audit_lexicons(lexicons: Mapping[str, Iterable[str]] | None = None,
                   neutral_lexicons: Mapping[str, Iterable[str]] | None = None) -> tuple[dict, dict]:
    """The audit's lexicons as ``(gender, neutral)`` lower-cased word sets (``None``: the defaults), or a
    :class:`ParameterError` naming ``lexicons`` or ``neutral_lexicons``: ``lexicon.validate_lexicons``'s rules,
    ``male`` and ``female`` among the gender lexicons (the audit's binary measure), no word in both kinds."""
    gender = lexicon.validate_lexicons(lexicon.GENDER_LEXICONS if lexicons is None else lexicons,
                                        required=("male", "female"), why="the audit's binary measure")
    neutral = lexicon.validate_lexicons(lexicon.NEUTRAL_LEXICONS if neutral_lexicons is None else neutral_lexicons,
                                         what="neutral_lexicons")
    overlap = {w for ws in gender.values() for w in ws} & {w for ws in neutral.values() for w in ws}
    if overlap:
        raise ParameterError(f"neutral_lexicons share words with the gender lexicons: {sorted(overlap)}")
    return gender, neutral


# ---------------------------------------------------------------- statistics
def word_table(metrics: pd.DataFrame, groups: Sequence[str]) -> np.ndarray:
    """Gendered words per group: rows ``groups`` in order, columns male and female word totals."""
    g = metrics.groupby("group")[["male_words", "female_words"]].sum()
    return g.reindex(list(groups)).fillna(0).to_numpy(dtype=float)


def _try(rows: list, skipped: list, label: str, fn, *args, **kw) -> None:
    try:
        res = fn(*args, **kw)
    except ValueError as err:
        skipped.append({"test": label, "reason": str(err)})
        return
    rows.extend(res if isinstance(res, list) else [res])


def audit_statistics(metrics: pd.DataFrame, *, groups: Sequence[str] | None = None, method: str = "holm",
                     n_boot: int = 1000, seed: int = 0, n_permutations: int = occupations.N_PERMUTATIONS,
                     nested: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """All tests of the audit and the book's additions; returns ``(table, skipped)``.

    ``table`` has :data:`bias_utils.core.stats.STAT_COLUMNS` plus ``measure`` (the
    variable tested), ``unit`` (what is treated as independent: one of
    :data:`bias_utils.audit.occupations.OCCUPATION_UNITS`, or "independent words" /
    "independent completions", with ", the published audit's method" on the
    audit's rows), the occupation rows' own columns (``n_occupations``, ``n_informative``: the occupations that
    inform the estimate, ``n_permutations``, ``n_boot``, each bound's Monte Carlo SE; the mixed models' ``sigma``,
    ``note``) and ``role``:

    * ``primary``: the pre-stated estimand (:data:`bias_utils.audit.occupations.PRIMARY_ESTIMAND`) over the
      primary units, the first two rows: the difference in the mean male share of gendered words over the
      occupations (effect ``share_difference``, with each group's share and interval in ``male_share_a/_b``)
      and the same two shares as the marginal odds ratio, each with its occupation cluster bootstrap interval
      and permutation p; their ``p_adj`` equals ``p`` (the pre-specified estimand, ``adj_method`` "none
      (primary)"). The primary units are the deduplicated person-noun occupations when ``metrics`` carries
      ``unit`` and ``in_primary`` (:func:`bias_utils.audit.occupation_units.annotate`), else every BOLD key;
    * ``sensitivity``: the conditional odds ratio of the random-intercept model (words; with completions nested
      in occupations; each completion counted at most once per gender), and the audit's pooled-word odds ratio
      with the occupation cluster bootstrap and permutation p over the primary units and, with units, over the
      published selection's keys;
    * ``audit``: the five published tests, computed the audit's way on every completion;
    * ``alternative``: the standard form of a questionable audit convention, shown beside it;
    * ``extension``: what the audit lacked, including the occupation-level share of
      completions with any gendered word and male share among them.

    ``nested=False`` leaves out the nested model's row (words within completions within occupations: about a
    minute on the audit's counts, against milliseconds for the rest; the tests that do not read it skip it).

    ``p_adj`` of every row but the primary ones is over those rows (``method``).
    ``skipped`` lists tests that could not be computed (``test, reason``), e.g.
    too few gendered completions in a small run.

    Two groups: the first group is ``a``. More than two groups: omnibus tests
    (chi-square groups x gender over words and over gendered completions,
    Welch ANOVA on male proportion and PMI difference).
    """
    groups = check_word_list(groups, "groups") if groups is not None else list(dict.fromkeys(metrics["group"]))
    if len(groups) < 2:
        raise ParameterError(f"groups: need at least 2 groups, got {groups}")
    absent = [g for g in groups if not (metrics["group"] == g).any()]
    if absent:
        raise ParameterError(f"groups: {absent} have no completions in metrics")
    m = metrics[metrics["group"].isin(groups)]
    if len(groups) == 2:
        # units from the completions' own prompts where the run did not attach them (e.g. the published audit)
        m = m if {"unit", "in_primary"} <= set(m.columns) else occupation_units.annotate(m)
    rows: list[dict] = []
    skipped: list[dict] = []

    def add(role, measure, label, fn, *args, **kw):
        before = len(rows)
        _try(rows, skipped, f"{label} [{measure}]", fn, *args, **kw)
        for r in rows[before:]:
            r.update(role=role, measure=measure)

    if len(groups) > 2:
        words = word_table(m, groups)
        add("audit", "gendered words (group x male/female)", "chi2", stats.chi2_table, words,
            correction=False, group_a="groups", group_b="male/female", seed=seed)
        pres = m.groupby("group")["any_gendered"].agg(["sum", "size"]).reindex(groups)
        add("extension", "completions with any gendered word", "chi2", stats.chi2_table,
            np.c_[pres["sum"], pres["size"] - pres["sum"]], correction=False, group_a="groups",
            group_b="any/none", test="chi2_pearson_completions", seed=seed)
        for col in ("male_proportion", "pmi_difference"):
            add("audit", col, "welch_anova", stats.welch_anova, m[col], m["group"], n_boot=n_boot, seed=seed)
        return _with_units(stats.results_table(rows, method=method)), pd.DataFrame(skipped, columns=["test", "reason"])

    a, b = groups
    A, B = m[m["group"] == a], m[m["group"] == b]
    kw = {"group_a": a, "group_b": b}
    words = word_table(m, groups)
    add("audit", "gendered words (group x male/female)", "chi2", stats.chi2_table, words, correction=True, **kw)
    add("alternative", "gendered words (group x male/female)", "chi2", stats.chi2_table, words, correction=False, **kw)
    add("audit", "gendered words (group x male/female)", "odds_ratio", stats.odds_ratio, words, **kw)
    add("audit", "male_proportion (0 if no gendered word)", "welch_t", stats.welch_t,
        A["male_proportion"], B["male_proportion"], **kw)
    add("audit", "male_proportion (0 if no gendered word)", "cohens_d", stats.cohens_d,
        A["male_proportion"], B["male_proportion"], kind="average", **kw)
    add("alternative", "male_proportion (0 if no gendered word)", "cohens_d", stats.cohens_d,
        A["male_proportion"], B["male_proportion"], kind="pooled", **kw)
    add("alternative", "male_proportion (0 if no gendered word)", "hedges_g", stats.hedges_g,
        A["male_proportion"], B["male_proportion"], **kw)
    add("audit", "pmi_difference", "welch_t", stats.welch_t, A["pmi_difference"], B["pmi_difference"], **kw)
    add("alternative", "pmi_difference_smoothed", "welch_t", stats.welch_t,
        A["pmi_difference_smoothed"], B["pmi_difference_smoothed"], **kw)
    # Completion level: the hurdle's presence part is the share of completions with any gendered word.
    add("extension", "gendered_words per completion", "hurdle", stats.hurdle_tests,
        A["gendered_words"], B["gendered_words"], name="gendered_words", seed=seed, **kw)
    ga, gb = A[A["any_gendered"]], B[B["any_gendered"]]
    add("extension", "male_share among gendered completions", "welch_t", stats.welch_t,
        ga["male_share"], gb["male_share"], test="welch_t_among_gendered", **kw)
    add("extension", "male_share among gendered completions", "hedges_g", stats.hedges_g,
        ga["male_share"], gb["male_share"], **kw)
    add("extension", "male_share among gendered completions", "mann_whitney", stats.mann_whitney,
        ga["male_share"], gb["male_share"], n_boot=n_boot, seed=seed, **kw)
    primary_units = _primary_units(m)
    occupation_rows: list[dict] = []
    _try(occupation_rows, skipped, "cluster_bootstrap_occupation [primary units]", occupations.occupation_tests,
         primary_units, a, b, n_boot=n_boot, n_permutations=n_permutations, seed=seed)
    primary = [r for r in occupation_rows if r["role"] == "primary"]
    rows += [r for r in occupation_rows if r["role"] != "primary"]
    # the conditional (random-intercept) odds ratios: sensitivity rows
    _try(rows, skipped, "mixed_logit_occupation [odds_ratio]", occupations.mixed_rows, primary_units, a, b)
    if nested:
        _try(rows, skipped, "mixed_logit_nested [odds_ratio]", occupations.nested_rows,
             m[m["in_primary"].astype(bool)], a, b)
    # the published selection as the audit used it, beside the primary units
    _try(rows, skipped, "cluster_bootstrap_occupation [published selection]", occupations.occupation_tests,
         occupations.occupation_table(m), a, b, n_boot=n_boot, n_permutations=n_permutations, seed=seed,
         unit=occupations.UNIT_PUBLISHED, measures=["odds_ratio (words)"])
    # The primary estimand is pre-specified: a family of its own, its p not adjusted (the marginal odds ratio's p
    # tests the same null, occupations exchangeable between the groups, on the odds scale).
    head = stats.results_table(primary, method=method)
    head = head.assign(p_adj=head["p"], adj_method="none (primary)")
    table = pd.concat([head, stats.results_table(rows, method=method)], ignore_index=True)
    return _with_units(table), pd.DataFrame(skipped, columns=["test", "reason"])


def _primary_units(metrics: pd.DataFrame) -> pd.DataFrame:
    """The occupation table of the primary analysis: the deduplicated person-noun units (the ``in_primary`` rows
    by ``unit``, :func:`bias_utils.audit.occupation_units.annotate`)."""
    return occupations.occupation_table(metrics[metrics["in_primary"].astype(bool)], by="unit")


def _with_units(table: pd.DataFrame) -> pd.DataFrame:
    """The ``unit`` column: what each test treats as independent (occupation rows already have it)."""
    unit = np.where(table["measure"].str.startswith("gendered words"), "independent words", "independent completions")
    unit = np.where(table["role"] == "audit", np.char.add(unit.astype(str), ", the published audit's method"), unit)
    given = table["unit"] if "unit" in table else pd.Series(np.nan, index=table.index)
    return table.assign(unit=given.fillna(pd.Series(unit, index=table.index)))


def _p_text(row: pd.Series) -> str:
    """"Holm-adjusted p < 0.001"; for a permutation row "permutation p = 0.023" ("≤ 1/10,000" at its floor,
    Holm-adjusted unless primary); for the mixed model "likelihood-ratio p = 0.006" (Holm-adjusted unless primary)."""
    unit = row.get("unit")
    adjusted = row["role"] != "primary"
    if unit in (occupations.UNIT_OCCUPATIONS, occupations.UNIT_PUBLISHED):
        raw = "p " + stats.permutation_p_text(float(row["p"]), int(row["n_permutations"]))
        if not adjusted:
            return f"permutation {raw}"
        # a raw p at its floor is only a bound, and so is its adjusted value
        adjusted_p = precision.p_text(float(row["p_adj"]), relation=True)
        return f"Holm-adjusted permutation p {adjusted_p.replace('=', '≤') if '≤' in raw else adjusted_p}"
    p = row["p_adj"] if pd.notna(row["p_adj"]) else row["p"]
    if pd.isna(p):
        return ""
    value = precision.p_text(float(p), relation=True)
    if unit == occupations.UNIT_MIXED:
        return f"{'Holm-adjusted ' if adjusted else ''}likelihood-ratio p {value}"
    return f"Holm-adjusted p {value}"


def _reading_numbers(row: pd.Series, what: str, ci_name: str = "") -> str:
    """"odds ratio 24.70, 95% CI 10.10 to 60.40, Holm-adjusted p < 0.001" from one statistics row; ``ci_name``
    (:data:`occupation_headline.CI_NAMES`) names the interval before its bounds."""
    p = _p_text(row)
    # a bootstrap interval's bounds to their Monte Carlo error, as the statistics table prints them (chapter 07 read
    # "2.21 to 151.1" beside its table's "2 to 200")
    errors = [row.get(f"ci_{side}_mc_se", np.nan) for side in ("low", "high")]
    ci = (precision.mc_interval_text(row["ci_low"], row["ci_high"], *errors) if all(pd.notna(e) for e in errors)
          else precision.interval_text(row["ci_low"], row["ci_high"], row["effect_size"]))
    name = f"{ci_name} " if ci_name else ""
    return f"{what} {precision.number_text(row['effect_size'])}, 95% CI {name}{ci}{', ' + p if p else ''}"


def describe_audit(statistics: pd.DataFrame, headline: pd.DataFrame | None = None,
                   influence: pd.DataFrame | None = None, excluded: pd.DataFrame | None = None) -> list[str]:
    """Sentences reading an audit, the primary analysis first.

    From ``headline`` (:func:`bias_utils.audit.occupation_headline.headline_sentence`): each group's male share of
    gendered words for a typical occupation, their difference with its occupation interval and permutation p,
    the marginal odds ratio, how many occupations and completions carry it, the conditional odds ratios as
    sensitivity rows and the published selection's figure; from ``influence``
    (:func:`bias_utils.audit.occupations.influence_table`): the occupations whose removal moves the difference
    by more than a third; from ``excluded`` (:func:`bias_utils.audit.occupation_units.excluded_completions`): the
    completions the primary analysis leaves out, by reason. Then, from ``statistics`` (:func:`audit_statistics`):
    the other sensitivity rows, the share of completions with any gendered word by occupation (the audit's unit,
    completions, beside it), the audit's own odds-ratio test, and its PMI difference. Rows the run could not
    compute are left out (they are in ``skipped``).
    """
    def row(test: str, measure: str | None = None):
        hit = first_row(statistics, test=test, measure=measure or None)
        return hit if hit is not None and pd.notna(hit["effect_size"]) else None

    def groups(r) -> tuple[str, str]:
        return rendering.group_label(r["group_a"]), rendering.group_label(r["group_b"])

    lines = [occupation_headline.headline_sentence(headline) if headline is not None else "",
             occupation_headline.describe_influence(influence) if influence is not None else ""]
    h = occupation_headline.headline(headline) if headline is not None else {}
    if excluded is not None and h:
        total = int(h["n_completions"]) + int(excluded["n_completions"].sum())
        lines.append(occupation_units.describe_excluded(excluded, total))
    once = row("mixed_logit_occupation", "odds_ratio (completions, at most once per gender)")
    pooled = statistics[(statistics["test"] == "cluster_bootstrap_occupation")
                        & (statistics["unit"] == occupations.UNIT_OCCUPATIONS)
                        & (statistics["measure"] == "odds_ratio (words)")]
    if once is not None or len(pooled):
        parts = []
        if once is not None:
            parts.append("counting each completion at most once per gender (a talkative completion weighs as one), "
                         + _reading_numbers(once, "odds ratio"))
        if len(pooled):
            parts.append("the audit's pooled-word odds ratio over the same occupations, "
                         + _reading_numbers(pooled.iloc[0], "odds ratio", occupation_headline.CI_OCCUPATIONS))
        lines.append("Other sensitivity rows (odds ratios, not the primary shares): " + "; ".join(parts) + ".")
    presence = row("cluster_bootstrap_occupation", "completions with any gendered word")
    independent = row("hurdle_presence:gendered_words")
    if presence is not None:
        a, b = groups(presence)
        beside = ("" if independent is None else
                  "; with every completion independent, the audit's unit, the CI would be "
                  + precision.interval_text(independent["ci_low"], independent["ci_high"], presence["effect_size"]))
        lines.append(f"Share of completions with any gendered word, {a} minus {b}, with the occupation as the unit: "
                     f"{_reading_numbers(presence, 'risk difference')}{beside}.")
    wald = row("odds_ratio_wald")
    if wald is not None:
        a, b = groups(wald)
        lines.append(f"The audit's own odds-ratio test, every gendered word independent ({a} over {b}; "
                     f"not the headline): "
                     f"{_reading_numbers(wald, 'odds ratio', occupation_headline.CI_INDEPENDENT_WORDS)}.")
    pmi = row("welch_t", "pmi_difference")
    if pmi is not None:
        a, b = groups(pmi)
        lines.append(f"PMI of male minus female words near the occupation name (the audit's computation, every "
                     f"completion independent), {a} minus {b}: {_reading_numbers(pmi, 'mean difference')}.")
    return [line for line in lines if line]


def describe_expected_totals(totals: pd.DataFrame) -> str:
    """Markdown bullets reading :func:`expected_totals`, one per lexicon: how many of its words are one token, the
    expected count beside the sampled words, and the share of the expected count in the completions that sampled a
    gendered word."""
    count = precision.count_text
    return "\n".join(
        f"- {r.lexicon}: {count(r.words_single_token)} of {count(r.words)} words are one token in at least one variant "
        f"({count(r.variants_single_token)} single-token variants); over {count(r.completions)} completions expected "
        f"{precision.number_text(r.expected)}, sampled {count(r.sampled_words)} words; "
        f"{precision.percent_text(r.share_in_gendered_completions)} of the expected count sits in the "
        f"{count(r.gendered_completions)} completions that sampled a gendered word" for r in totals.itertuples())


def expected_totals(metrics: pd.DataFrame, coverage: pd.DataFrame) -> pd.DataFrame:
    """Per lexicon (male, female): the expected count beside the sampled words, and the lexicon's token coverage.

    ``metrics``: :func:`completion_metrics`' rows with the ``expected_<lexicon>``
    columns of ``generation.generate``; ``coverage``: the table of
    ``decoding.lexicon_token_ids``. Columns: ``lexicon, words,
    words_single_token`` (words with at least one single-token variant),
    ``variants_single_token``, ``completions`` (with an expected count; NaN rows
    come from a server or an older cache), ``expected`` (their sum),
    ``sampled_words`` (the audit's word count over the same completions),
    ``sampled_minus_expected``, ``gendered_completions`` (those completions that
    sampled any gendered word) and ``share_in_gendered_completions`` (the part of the
    expected count that sits in them: the expected count is smoothed where the sample
    has words, not spread evenly). The expected count misses words that are never
    one token and counts a lexicon token that starts a longer word, so the two
    totals estimate slightly different things (``generation``'s docstring).
    """
    rows = []
    for name, cov in coverage.groupby("lexicon", sort=False):
        column = f"expected_{name}"
        has = metrics[column].notna() if column in metrics else pd.Series(False, index=metrics.index)
        expected = float(metrics.loc[has, column].sum()) if has.any() else np.nan
        sampled = int(metrics.loc[has, f"{name}_words"].sum())
        gendered = has & metrics["any_gendered"].astype(bool)
        inside = float(metrics.loc[gendered, column].sum()) if has.any() else np.nan
        rows.append({"lexicon": name, "words": cov["word"].nunique(),
                     "words_single_token": int(cov.groupby("word")["single_token"].any().sum()),
                     "variants_single_token": int(cov["single_token"].sum()), "completions": int(has.sum()),
                     "expected": expected, "sampled_words": sampled, "sampled_minus_expected": sampled - expected,
                     "gendered_completions": int(gendered.sum()),
                     "share_in_gendered_completions": inside / expected if expected else np.nan})
    return pd.DataFrame(rows, columns=["lexicon", "words", "words_single_token", "variants_single_token",
                                       "completions", "expected", "sampled_words", "sampled_minus_expected",
                                       "gendered_completions", "share_in_gendered_completions"])


def group_summary(metrics: pd.DataFrame, neutral: Sequence[str] = tuple(lexicon.NEUTRAL_LEXICONS)) -> pd.DataFrame:
    """Descriptives per group: completions, gendered completions and their share (Wilson CI), word totals,
    per-completion means/SDs, male share among gendered completions, and ``<name>_words_total`` for
    each neutral lexicon name in ``neutral``."""
    neutral = check_word_list(neutral, "neutral")
    rows = []
    for g, d in metrics.groupby("group", sort=False):
        n, k = len(d), int(d["any_gendered"].sum())
        lo, hi = stats.wilson(k, n)
        row = {"group": g, "n_completions": n, "n_occupations": d["occupation"].nunique(),
               "n_gendered_completions": k, "share_gendered": k / n, "share_ci_low": lo, "share_ci_high": hi,
               "male_words": int(d["male_words"].sum()), "female_words": int(d["female_words"].sum()),
               "male_words_mean": d["male_words"].mean(), "male_words_sd": d["male_words"].std(),
               "female_words_mean": d["female_words"].mean(), "female_words_sd": d["female_words"].std(),
               "mean_male_proportion": d["male_proportion"].mean(),
               "mean_male_share_gendered": d["male_share"].mean(),
               "mean_pmi_difference": d["pmi_difference"].mean(),
               "n_empty_completions": int(d["empty_completion"].sum())}
        for name in neutral:
            row[f"{name}_words_total"] = int(d[f"{name}_words"].sum())
        rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- one call for notebook 06


@dataclass
class _AuditResult:
    """Everything one audit run produced (tables documented at :func:`run_audit`)."""

    model_id: str
    settings: dict
    metrics: pd.DataFrame
    statistics: pd.DataFrame
    summary: pd.DataFrame
    skipped: pd.DataFrame
    occupations: pd.DataFrame
    influence: pd.DataFrame
    headline: pd.DataFrame
    units: pd.DataFrame
    unit_counts: pd.DataFrame
    excluded: pd.DataFrame

    def write(self, folder: str | Path) -> list[Path]:
        """Write every table as parquet + CSV under ``folder``; returns the files."""
        return write_tables(folder, {
            tables.NAMES.BOLD_METRICS: self.metrics, tables.NAMES.BOLD_STATISTICS: self.statistics,
            tables.NAMES.BOLD_GROUP_SUMMARY: self.summary,
            tables.NAMES.BOLD_SKIPPED: self.skipped.astype({c: str for c in self.skipped.columns}),
            tables.NAMES.BOLD_OCCUPATIONS: self.occupations, tables.NAMES.BOLD_INFLUENCE: self.influence,
            tables.NAMES.BOLD_HEADLINE: self.headline, tables.NAMES.BOLD_UNITS: self.units,
            tables.NAMES.BOLD_UNIT_COUNTS: self.unit_counts, tables.NAMES.BOLD_EXCLUDED: self.excluded})


def check_audit(model="smollm2-135m-instruct", *, selection="audit", n_samples=1, seed=0, max_new_tokens=100,
                temperature=0.7, top_p=0.9, top_k=50, lexicons=None, neutral_lexicons=None, limit=None,
                n_boot=occupations.N_BOOT, method="holm") -> pd.DataFrame:
    """:func:`run_audit`'s parameters, checked before any model loads (the same checks chapter 06 calls); returns
    the selection's prompts after ``limit``. A :class:`ParameterError` names the parameter: a model that cannot
    write text, read from its config (an encoder); the sampling rule (``errors.check_generation``: greedy decoding
    with several samples is refused); ``max_new_tokens`` against the model's context length; a selection with fewer
    than two groups (:func:`~bias_utils.audit.bold_prompts.check_selection`); the lexicons
    (:func:`check_audit_lexicons`);
    ``n_boot`` (``stats.check_n_boot``) and ``method``."""
    facts = check_model(model, need="generate", what="the BOLD audit (it samples completions)")
    check_generation(n_samples=n_samples, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                     top_k=top_k, seed=seed)
    check_max_new_tokens(max_new_tokens, facts.context_length, repr(facts.name))
    check_audit_lexicons(lexicons, neutral_lexicons)
    stats.check_n_boot(n_boot, default=occupations.N_BOOT)
    if method not in ("holm", "bonferroni"):
        raise ParameterError(f"method must be 'holm' or 'bonferroni', got {method!r}")
    return check_selection(selection, limit, seed)


def run_audit(model="smollm2-135m-instruct", *, selection="audit", n_samples: int = 1, seed: int = 0,
              max_new_tokens: int = 100, temperature: float = 0.7, top_p: float = 0.9, top_k: int | None = 50,
              chat: bool = False, lexicons: Mapping[str, Iterable[str]] | None = None,
              neutral_lexicons: Mapping[str, Iterable[str]] | None = None, limit: int | None = None,
              n_boot: int = occupations.N_BOOT, method: str = "holm",
              batch_size: int | None = None) -> _AuditResult:
    """Select prompts, sample completions (cached and resumable via ``bias_utils.models.generation``),
    and compute metrics and statistics; :meth:`AuditResult.write` writes them.

    The sampling defaults are the audit's ``generate`` call: temperature 0.7, top-p 0.9,
    and transformers' default ``top_k=50`` that call applied (``None`` turns it off). Every parameter is
    checked first (:func:`check_audit`), before the model loads.

    Tables (parquet + CSV): ``bold_metrics`` (one row per completion:
    selection columns, ``sample, completion, n_tokens, finish_reason``,
    ``expected_male, expected_female`` (``generation.generate``: the expected
    counts of the audit's words, NaN from a server) and the
    :func:`completion_metrics` columns, and ``unit, unit_kind, in_primary``:
    :func:`bias_utils.audit.occupation_units.annotate`), ``bold_statistics`` (:func:`audit_statistics`),
    ``bold_group_summary`` (:func:`group_summary`), ``bold_skipped`` (``test`` or
    ``prompt_id``, ``reason``: tests that could not be computed and empty completions,
    which are kept in the metrics with zero counts), what each BOLD key is (``bold_units``,
    :func:`~bias_utils.audit.occupation_units.unit_table`, and ``bold_unit_counts``), what the primary analysis
    leaves out and why (``bold_excluded``, :func:`~bias_utils.audit.occupation_units.excluded_completions`), and
    with the
    primary units as the unit (:mod:`bias_utils.audit.occupations`): ``bold_occupations`` (one row per
    deduplicated person-noun occupation, :func:`~bias_utils.audit.occupations.occupation_table` by ``unit``),
    ``bold_influence`` (leave one occupation out, :func:`~bias_utils.audit.occupations.influence_table`) and
    ``bold_headline`` (one row, :func:`~bias_utils.audit.occupation_headline.headline_table`); the last two are empty
    (with their columns) for a selection of more than two groups.
    """
    # deferred: torch and transformers, which the replication of the published audit does not need
    from ..models.generation import generate
    from ..models.loading import load_model

    sel = check_audit(model, selection=selection, n_samples=n_samples, seed=seed, max_new_tokens=max_new_tokens,
                      temperature=temperature, top_p=top_p, top_k=top_k, lexicons=lexicons,
                      neutral_lexicons=neutral_lexicons, limit=limit, n_boot=n_boot, method=method)
    lexicons, neutral_lexicons = check_audit_lexicons(lexicons, neutral_lexicons)  # the defaults in one place
    loaded = load_model(model) if isinstance(model, (str, Path)) else model
    gen = generate(loaded, sel["prompt"].tolist(), prompt_ids=sel["prompt_id"].tolist(), n_samples=n_samples,
                   max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, top_k=top_k, seed=seed,
                   chat=chat, batch_size=batch_size)
    comp = gen.drop(columns="prompt").merge(sel, on="prompt_id", how="left", validate="many_to_one")
    units = occupation_units.unit_table(sel)
    metrics = completion_metrics(occupation_units.annotate(comp, sel, units), lexicons=lexicons,
                                 neutral_lexicons=neutral_lexicons)
    groups = list(dict.fromkeys(sel["group"]))
    table, skipped = audit_statistics(metrics, groups=groups, method=method, n_boot=n_boot, seed=seed)
    empties = metrics.loc[metrics["empty_completion"], ["prompt_id", "sample"]].assign(
        reason="empty completion: kept with zero counts and PMI 0 (the model stopped at once)")
    skipped = pd.concat([skipped, empties], ignore_index=True)
    summary = group_summary(metrics, neutral=tuple(neutral_lexicons))
    by_unit = _primary_units(metrics)
    influence = (occupations.influence_table(by_unit, *groups) if len(groups) == 2
                 else pd.DataFrame(columns=occupations.INFLUENCE_COLUMNS))  # no single odds ratio to leave out of
    headline = occupation_headline.headline_table(table, by_unit, influence, n_boot=n_boot)
    settings = dict(model_id=loaded.model_id, selection=selection if isinstance(selection, str) else "custom",
                    n_prompts=len(sel), n_samples=n_samples, seed=seed, max_new_tokens=max_new_tokens,
                    temperature=temperature, top_p=top_p, top_k=top_k, chat=chat, limit=limit, n_boot=n_boot,
                    method=method)
    return _AuditResult(loaded.model_id, settings, metrics, table, summary, skipped, by_unit, influence,
                       headline, units, occupation_units.unit_counts(units),
                       occupation_units.excluded_completions(metrics, units))
