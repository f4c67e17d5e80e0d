"""Stereotype profiles of word populations (Schuster et al. 2024, Study 1).

Pipeline, with the original study's choices as defaults (read from the authors' published
``projection.py``/``utils.py``):

1. Every word of a population (names, gendered terms, non-binary terms, occupation nouns) is put into seven neutral
   templates (``DEFAULT_TEMPLATES``). Templates stay lower case and the word keeps its own casing ("this is Mary",
   "Mary is here"). A common noun or adjective gets the article: "this is the woman", "the woman is here". The original
   decides that with nltk's POS tagger, whose model is not available offline; here it follows from the word list's
   kind (``populations.takes_article``): names never take "the", pronouns never do, every other word does.
2. The word's hidden states are taken in every template and averaged over the templates (one vector per word and
   layer).
3. The vectors are projected onto the polar stereotype dimensions layer by layer (``projection.project``); the
   headline value of a word is the mean of its projected values over ALL hidden states (the original), the last
   layer is an option, every single layer is kept for the layer analysis.
4. Values are z-standardised per dimension over all the words of one population together (population SD, ddof 0),
   each population on its own; a population may instead be put on another population's scale (the non-binary terms
   on the binary gendered terms' scale, as in the original's ``standardize_new_values``).
5. Per dimension, the two groups are compared with Welch's t (primary), the original Student t (equal variances),
   Hedges' g with a 95% CI, and Holm's correction across the dimensions of one space; with more than two groups a
   Welch ANOVA plus Holm-corrected pairwise Welch tests.

One concept over 600 lines: a population's profile. Its checks, its embedding through the templates and the
tests on the standardised values are one pipeline (``run_profiles``) whose checks must run before the embedding
and whose tests read the embedding's own skips.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

from ..core import tables
from ..core.errors import ParameterError, check_layer, check_positive_int, check_word_list
from ..core.precision import interval_text, number_text, p_text, percent_text
from ..core.results import write_table
from ..core.stats import (
    STAT_COLUMNS,
    adjust_pvalues,
    column_test,
    group_tests,
    hedges_g,
    student_t,
    welch_anova,
    welch_t,
)
from ..models.embeddings import embed_words
from ..models.loading import check_model
from .populations import KINDS, POPULATION_KINDS, load_populations, population_kind, takes_article
from .projection import projection_table

__all__ = [
    "DEFAULT_TEMPLATES", "describe_profile", "describe_share_below", "paper_finding", "paper_finding_sentence",
    "run_profiles", "share_below_group_means", "word_summary",
]

#: The placeholder a template marks the word with.
PLACEHOLDER = "{word}"

#: The original study's seven templates (``utils.TEMPLATES``), with the word's slot marked.
DEFAULT_TEMPLATES: tuple[str, ...] = (
    "this is {word}",
    "that is {word}",
    "there is {word}",
    "the person is {word}",
    "here is {word}",
    "{word} is here",
    "{word} is there",
)

#: Default scale for populations standardised against another one (the paper's Figure 4).
_DEFAULT_REFERENCE = {"nonbinary": "terms"}

#: Fewest words per population group, in the input and among the words embedded: a group's mean needs a spread
#: for the two-group tests.
_MIN_GROUP_WORDS = 2


# --------------------------------------------------------------------------- templates


def check_templates(templates: Sequence[str]) -> tuple[str, ...]:
    """The templates as a tuple of strings (:func:`~bias_utils.core.errors.check_word_list`: one string is
    refused), each with exactly one ``{word}`` slot; a :class:`ParameterError` names ``templates``."""
    templates = tuple(check_word_list(templates, "templates", empty="no templates given"))
    for t in templates:
        if t.count(PLACEHOLDER) != 1:
            raise ParameterError(f"templates: {t!r} must contain the placeholder {PLACEHOLDER} exactly once")
    if len(set(templates)) != len(templates):
        raise ParameterError("templates contain duplicates, which would weight them twice")
    return templates


def check_template_list(templates) -> tuple[str, ...] | None:
    """``None`` (the original templates) or the checked templates (:func:`check_templates`)."""
    return None if templates is None else check_templates(templates)


def fill_template(template: str, word: str, article: bool) -> str:
    """The template with the word in its slot, after "the" if ``article``."""
    return template.replace(PLACEHOLDER, f"the {word}" if article else word)


# --------------------------------------------------------------------------- populations


def _population_names(populations: Sequence) -> dict[str, str | Path]:
    """``{name: built-in name or file}``: a file is named by its stem when no other population has that name and it
    is no built-in's, else by its path as given."""
    stems = [Path(str(p)).stem if Path(str(p)).suffix else None for p in populations]
    names: dict[str, str | Path] = {}
    for p, stem in zip(populations, stems):
        name = stem if stem is not None and stems.count(stem) == 1 and stem not in POPULATION_KINDS else str(p)
        if name in names:
            raise ParameterError(f"population {name!r} is listed twice")
        names[name] = p
    return names


def _resolve_populations(populations, kind=None) -> tuple[dict[str, dict[str, list[str]]], dict[str, str]]:
    """``({population: {group: [words]}}, {population: kind})``.

    ``populations``: built-in names / file paths (a str or a list, read with
    ``populations.load_populations``) or the ``{population: {group: [words]}}``
    mapping itself. A file's population is named by its stem when no other
    population has that name and it is no built-in's, else by its path as given
    (``study_a/groups.json`` beside ``study_b/groups.csv``; ``my/names.json``
    beside the built-in ``names``): no population replaces another. ``kind`` overrides
    the template kind (``"name"``: no article, ``"noun"``: "the" except for
    pronouns): one kind for all, ``{population: kind}``, or ``None`` for the
    populations module's own (built-ins, a file's declared kind; ``"noun"`` for
    a mapping's unknown populations).
    """
    if isinstance(populations, (str, Path)):
        populations = [populations]
    kinds: dict[str, str] = {}
    if isinstance(populations, Mapping):
        out = {str(k): {str(g): list(ws) for g, ws in v.items()} for k, v in populations.items()}
        kinds = {k: POPULATION_KINDS.get(k, "noun") for k in out}
    else:
        out = {}
        for name, p in _population_names(populations).items():
            out[name] = load_populations(p)
            kinds[name] = population_kind(p)
    if not out:
        raise ParameterError("no populations given")
    for name, groups in out.items():
        if not groups or any(len(ws) == 0 for ws in groups.values()):
            raise ParameterError(f"population {name!r} has no groups or an empty group: {groups!r}")
    if isinstance(kind, Mapping):
        kinds.update({k: v for k, v in kind.items() if k in out})
    elif kind is not None:
        kinds = dict.fromkeys(out, kind)
    bad = {k: v for k, v in kinds.items() if v not in KINDS}
    if bad:
        raise ParameterError(f"population kind must be one of {KINDS}, got {bad}")
    return out, kinds


def _limit_populations(populations: Mapping[str, Mapping[str, list[str]]], limit: int | None,
                      only: Sequence[str] = ("names",)) -> dict[str, dict[str, list[str]]]:
    """The first ``limit`` words of every group of the populations in ``only``
    (quick runs keep the gendered terms whole, as they are only 9 per group)."""
    if limit is None:
        return {k: {g: list(w) for g, w in v.items()} for k, v in populations.items()}
    if limit < 2:
        raise ParameterError(f"limit must be at least 2 words per group for a t-test, got {limit}")
    return {k: {g: list(w)[:limit] if k in only else list(w) for g, w in v.items()}
            for k, v in populations.items()}


def _thin_groups(groups: Mapping[str, Sequence[str]]) -> str:
    small = {g: len(w) for g, w in groups.items() if len(w) < _MIN_GROUP_WORDS}
    return ", ".join(f"{g!r} ({n} word{'s' * (n != 1)})" for g, n in small.items())


def check_population_list(populations, kind=None,
                           limit=None) -> tuple[dict[str, dict[str, list[str]]], dict[str, str]]:
    """:func:`resolve_populations` after :func:`limit_populations`, checked before any model loads; a
    :class:`ParameterError` names ``populations``, ``kind`` or ``limit``: a file that cannot be read (file, line),
    a group of fewer than :data:`_MIN_GROUP_WORDS` words, a population standardised against one that is not
    profiled (``"nonbinary"`` needs ``"terms"``, :data:`DEFAULT_REFERENCE`), nothing left to test, a tested
    population with one group."""
    listed = isinstance(populations, Sequence) and populations and all(isinstance(p, (str, Path)) for p in populations)
    if not isinstance(populations, (str, Path, Mapping)) and not listed:
        raise ParameterError(f"populations must be a built-in name ({', '.join(POPULATION_KINDS)}), a file path, or a "
                             f"non-empty list of them, got {populations!r}")
    limit = check_positive_int(limit, "limit", allow_none=True)
    try:
        pops, kinds = _resolve_populations(populations, kind)
    except ValueError as exc:
        raise ParameterError(f"{'kind' if 'kind must be' in str(exc) else 'populations'}: {exc}") from None
    limited = _limit_populations(pops, limit)
    given = {} if isinstance(populations, Mapping) else _population_names(
        [populations] if isinstance(populations, (str, Path)) else populations)
    for name, groups in limited.items():
        if _thin_groups(groups):
            cut = " after limit" if limited[name] != pops[name] else ""
            raise ParameterError(f"populations: {given.get(name, name)}: group(s) {_thin_groups(groups)}{cut} need at "
                                 f"least {_MIN_GROUP_WORDS} words each (the group tests compare variances)")
    tested = [p for p in pops if p not in _DEFAULT_REFERENCE]
    if not tested:
        compared = ", ".join(p for p in POPULATION_KINDS if p not in _DEFAULT_REFERENCE)
        raise ParameterError(f"populations: nothing to test in {list(pops)}: {', '.join(map(repr, pops))} only "
                             f"stand(s) on another population's scale; add a population whose groups are compared "
                             f"({compared} or a file)")
    for name, reference in _DEFAULT_REFERENCE.items():
        if name in pops and reference not in pops:
            raise ParameterError(f"populations: {name!r} is put on the scale of {reference!r} (the paper's Figure 4), "
                                 f"which is not among {list(pops)}; add {reference!r} or leave {name!r} out")
    single = [p for p in tested if len(pops[p]) < 2]
    if single:
        raise ParameterError(f"populations: {single[0]!r} has only the group {list(pops[single[0]])}; the tests "
                             "compare two groups or more")
    return limited, kinds


def check_profile_run(model, populations=("names", "terms", "nonbinary", "occupations"), templates=None, layer="mean",
                   limit: int | None = None, kind=None, *, layers=None):
    """:func:`run_profiles`' parameters, checked before any model loads (chapter 04's check calls it too):
    the model (it must give hidden states), ``templates`` (:func:`check_template_list`), ``layer`` against the
    model's hidden states (``layers``: the basis's; default: the layer count in the model's config; ``"all"`` is
    refused: a profile is one value per word) and the populations (:func:`check_population_list`). Returns the
    latter's ``(populations, kinds)``."""
    check_word_projection(model, layer, templates, layers=layers, what="a profile (hidden states)")
    return check_population_list(populations, kind, limit)


def check_word_projection(model, layer="mean", templates=None, *, layers=None, what: str = "projecting words"):
    """The parameters every projection of words in templates shares (:func:`run_profiles`,
    ``gender_direction.occupation_validity``, ``bold_link.run_link``), checked before any model loads: a model with
    hidden states (``models.check_model``), ``templates`` (:func:`check_template_list`) and ``layer`` (one value
    per word: not ``"all"``) against ``layers`` (the basis's hidden-state indices; default: the model's, from its
    config). Returns the model's ``ModelFacts``."""
    facts = check_model(model, need="embed", what=what)
    check_template_list(templates)
    check_layer(layer, layers=facts.n_states if layers is None else layers, allow_all=False)
    return facts


# --------------------------------------------------------------------------- embeddings


@dataclass
class _PopulationEmbeddings:
    """Template-averaged hidden states of the population words.

    ``values``: float32 [n_words, n_layers, hidden], row i belongs to ``words`` row i.
    ``words``: ``population, group, word, kind`` (``name``/``noun``), ``article``
    (whether the templates put "the" before it), ``n_templates`` (templates that were
    embedded; fewer than ``len(templates)`` when the tokenizer could not locate the
    word in some template, those are listed in ``skipped``), ``warning`` (empty, or
    why the word is kept with a caveat: a minority of its tokens is the unknown token).
    ``skipped``: ``population, group, word, context, reason``; a word with no
    usable template at all has ``context`` empty and is absent from ``words``.
    ``layers``: hidden-state indices of axis 1 (0 = embedding output).
    """

    values: np.ndarray
    words: pd.DataFrame
    skipped: pd.DataFrame
    layers: tuple[int, ...]
    templates: tuple[str, ...]
    model_id: str


def population_embeddings(model, populations, templates: Sequence[str] = DEFAULT_TEMPLATES,
                          layers="all", kind=None, *, cache: bool = True, progress: bool = True
                          ) -> _PopulationEmbeddings:
    """Embed every population word in every template and average over templates.

    ``populations`` and ``kind``: see :func:`resolve_populations`. ``cache`` and ``progress``: ``embed_words``'s
    (chapter 12's erasure embeds with its cache off while the model is hooked).
    """
    templates = check_templates(templates)
    pops, kinds = _resolve_populations(populations, kind)
    rows, contexts, targets = [], [], []
    for pop, groups in pops.items():
        for group, words in groups.items():
            for word in dict.fromkeys(words):  # a repeated word would count twice in its group
                article = takes_article(word, kinds[pop])
                rows.append((pop, group, word, kinds[pop], article))
                for t in templates:
                    contexts.append(fill_template(t, word, article))
                    targets.append(word)
    emb = embed_words(model, contexts, targets, layers=layers, cache=cache, progress=progress)
    values = np.asarray(emb.values, dtype=np.float32)
    n_t = len(templates)
    per_word = values.reshape(len(rows), n_t, *values.shape[1:])
    kept = ~np.isnan(per_word).any(axis=(2, 3))  # [n_words, n_templates]

    reasons = {}
    if len(emb.skipped):
        reasons = dict(zip(emb.skipped["pair_index"], emb.skipped["reason"].astype(str)))
    skipped = []
    for i, (pop, group, word, *_) in enumerate(rows):
        for j in np.flatnonzero(~kept[i]):
            reason = reasons.get(i * n_t + j, "no embedding returned")
            skipped.append((pop, group, word, contexts[i * n_t + j], reason))
        if not kept[i].any():
            skipped.append((pop, group, word, "", "word not located in any template; left out"))

    has_any = kept.any(axis=1)
    with np.errstate(invalid="ignore"):
        mean = np.where(kept[:, :, None, None], per_word, 0.0).sum(axis=1)
        mean = mean / np.maximum(kept.sum(axis=1), 1)[:, None, None]
    words = pd.DataFrame(rows, columns=["population", "group", "word", "kind", "article"])
    words["n_templates"] = kept.sum(axis=1)
    # A word kept although some of its pieces are the unknown token: visible in the words table.
    warnings = dict(zip(emb.warnings["pair_index"] // n_t, emb.warnings["reason"].astype(str)))
    words["warning"] = [warnings.get(i, "") for i in range(len(rows))]
    return _PopulationEmbeddings(
        values=mean[has_any].astype(np.float32),
        words=words[has_any].reset_index(drop=True),
        skipped=pd.DataFrame(skipped, columns=["population", "group", "word", "context", "reason"]),
        layers=tuple(int(x) for x in emb.layers),
        templates=templates,
        model_id=getattr(model, "model_id", str(model)),
    )


# --------------------------------------------------------------------------- projection


def word_summary(words: pd.DataFrame, template: str | None = None) -> pd.DataFrame:
    """Per population and group of :attr:`PopulationEmbeddings.words` (the index): ``words`` (how many),
    ``article`` (share after "the"), ``min_templates`` (fewest templates a word could be embedded in); with a
    ``template``, ``example``: it filled with the group's first word ("This is the nurse.", "This is Mary.")."""
    summary = words.groupby(["population", "group"]).agg(words=("word", "size"), article=("article", "mean"),
                                                         min_templates=("n_templates", "min"))
    if template is not None:
        first = words.groupby(["population", "group"]).first()
        summary["example"] = [fill_template(template, w, bool(a)) for w, a in zip(first["word"], first["article"])]
    return summary


def _zscore(values: np.ndarray, mean: float, sd: float, what: str) -> np.ndarray:
    if not np.isfinite(sd) or sd == 0:
        raise ParameterError(f"cannot standardise {what}: standard deviation is {sd}")
    return (values - mean) / sd


def _standardise(table: pd.DataFrame, reference: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Add ``z``: ``value`` standardised per (population, space, dimension, layer)
    over all the population's words together, with the population SD (ddof 0)
    as in the original; a population listed in ``reference`` (population ->
    reference population) is put on the reference's mean and SD instead."""
    reference = dict(reference or {})
    keys = ["space", "dimension", "layer"]
    present = set(table["population"])
    for pop, ref in reference.items():
        if pop in present and ref not in present:
            raise ParameterError(f"population {pop!r} is standardised against {ref!r}, which was not profiled")
        if ref in reference:
            raise ParameterError(f"reference population {ref!r} is itself standardised against another")
    scale = (table[~table["population"].isin(list(reference))]
             .groupby(["population", *keys], sort=False)["value"]
             .agg(mean="mean", sd=lambda v: float(np.std(v, ddof=0))))
    out = table.copy()
    z = np.empty(len(out))
    for (pop, *key), idx in out.groupby(["population", *keys], sort=False).groups.items():
        src = reference.get(pop, pop)
        m, s = scale.loc[(src, *key)]
        z[out.index.get_indexer(idx)] = _zscore(out.loc[idx, "value"].to_numpy(), m, s,
                                                 f"{pop}/{'/'.join(map(str, key))}")
    out["z"] = z
    return out


def profile_table(pop_emb: _PopulationEmbeddings, bases, layer="mean",
                  reference: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Projected and standardised values, one row per (word, space, dimension, layer).

    ``bases``: ``PolarBasis`` objects (a list, ``{space: basis}`` or one basis), e.g.
    the ``"dimensions"`` and ``"warmth_competence"`` spaces. ``layer``: ``"mean"`` (mean
    of the projected values over all hidden states, the original), ``"last"``, a
    hidden-state index, or ``"all"`` (every layer, for the layer analysis).
    ``reference``: populations to put on another population's scale; default
    ``DEFAULT_REFERENCE`` for those present (non-binary terms on the gendered terms' scale).

    Columns: ``population, group, word, kind, space, layer`` (``"mean"`` or the int
    hidden-state index, as in ``projection.projection_table``), ``dimension``,
    ``value`` (projected), ``z`` (standardised).
    """
    if isinstance(bases, Mapping):
        bases = list(bases.values())
    elif not isinstance(bases, (list, tuple)):
        bases = [bases]
    present = set(pop_emb.words["population"])
    if reference is None:
        reference = {p: r for p, r in _DEFAULT_REFERENCE.items() if p in present}
    items = pop_emb.words[["population", "group", "word", "kind"]]
    frames = []
    for basis in bases:
        missing = sorted(set(basis.layers) - set(pop_emb.layers))
        if missing:
            raise ParameterError(f"basis {basis.space!r} has layers {missing} that the population embeddings lack")
        X = pop_emb.values[:, [pop_emb.layers.index(x) for x in basis.layers]]
        frames.append(projection_table(basis, X, items, layer))
    return _standardise(pd.concat(frames, ignore_index=True), reference)


# --------------------------------------------------------------------------- statistics

#: Columns of :func:`profile_stats` (see its docstring).
_PROFILE_STATS_COLUMNS = [
    "population", "space", "layer", "dimension", "group_a", "group_b", "n_a", "n_b",
    "mean_a", "mean_b", "sd_a", "sd_b", "diff", "t", "df", "p", "p_holm",
    "t_student", "df_student", "p_student", "p_student_holm", "g", "g_ci_low", "g_ci_high",
    "significant",
]
_FAMILY = ["population", "space", "layer"]
#: :func:`profile_stats`' tests: Welch (primary), the original's Student t, Hedges' g, each as its scalar test.
_PAIR_TESTS = {"welch": column_test(welch_t, "welch"), "student": column_test(student_t, "student"),
               "g": column_test(hedges_g, "g")}


def _tested_populations(table: pd.DataFrame, populations) -> list[str]:
    if populations is None:
        populations = [p for p in dict.fromkeys(table["population"]) if p not in _DEFAULT_REFERENCE]
    missing = sorted(set(populations) - set(table["population"]))
    if missing:
        raise ParameterError(f"population(s) {missing} not in the profile table")
    return list(populations)


def profile_stats(table: pd.DataFrame, populations: Sequence[str] | None = None, value: str = "z",
                  alpha: float = 0.05) -> pd.DataFrame:
    """Group comparisons per (population, space, layer, dimension).

    Two groups give one row per dimension; more than two give one row per pair
    (see :func:`profile_anova` for the omnibus test). ``populations`` defaults to
    every population except those standardised against another one (the
    non-binary terms, shown by :func:`nonbinary_table` instead).

    Columns (``a``/``b`` = the groups in the population's order, e.g. female/male):
    ``n_a, n_b``; ``mean_a, mean_b, sd_a, sd_b`` of ``value`` (standardised by
    default) with SD ddof 0, as the original; ``diff = mean_a - mean_b``;
    ``t, df, p``: Welch's t test (primary); ``p_holm``: Holm over the family
    (all rows of one population, space and layer: the 7 dimensions, or the 2
    composites, times the pairs); ``t_student, df_student, p_student,
    p_student_holm``: the original study's Student t (equal variances);
    ``g, g_ci_low, g_ci_high``: Hedges' g (a - b) with its 95% CI;
    ``significant``: ``p_holm < alpha``. The project's generic statistic columns
    follow as aliases (``test`` = welch_t, ``statistic`` = t, ``p_adj`` = p_holm,
    ``adj_method`` = holm, ``effect`` = hedges_g, ``effect_size`` = g, ``ci_low``,
    ``ci_high`` = the g CI, ``n = n_a + n_b``).
    """
    rows = []
    sub = table[table["population"].isin(_tested_populations(table, populations))]
    for (pop, space, layer, dim), d in sub.groupby(_FAMILY + ["dimension"], sort=False):
        groups = {g: v[value].to_numpy(dtype=float) for g, v in d.groupby("group", sort=False)}
        if len(groups) < 2:
            raise ParameterError(f"population {pop!r} has only the group(s) {list(groups)}; need two to compare")
        for ga, gb in combinations(groups, 2):
            a, b = groups[ga], groups[gb]
            r = group_tests(np.concatenate([a, b])[None, :, None], np.arange(a.size + b.size) < a.size, _PAIR_TESTS,
                            names=(ga, gb))
            r = {k: v.item() for k, v in r.items()}
            rows.append({
                "population": pop, "space": space, "layer": layer, "dimension": dim,
                "group_a": ga, "group_b": gb, "n_a": a.size, "n_b": b.size,
                "mean_a": a.mean(), "mean_b": b.mean(), "sd_a": a.std(ddof=0), "sd_b": b.std(ddof=0),
                "diff": a.mean() - b.mean(), "t": r["welch_statistic"], "df": r["welch_df"], "p": r["welch_p"],
                "t_student": r["student_statistic"], "df_student": r["student_df"], "p_student": r["student_p"],
                "g": r["g_effect_size"], "g_ci_low": r["g_ci_low"], "g_ci_high": r["g_ci_high"],
            })
    if not rows:
        raise ParameterError("no population to test")
    out = pd.DataFrame(rows)
    out["p_holm"] = np.nan
    out["p_student_holm"] = np.nan
    for _, idx in out.groupby(_FAMILY, sort=False).groups.items():
        out.loc[idx, "p_holm"] = adjust_pvalues(out.loc[idx, "p"].to_numpy(), "holm")
        out.loc[idx, "p_student_holm"] = adjust_pvalues(out.loc[idx, "p_student"].to_numpy(), "holm")
    out["significant"] = out["p_holm"] < alpha
    out = out[_PROFILE_STATS_COLUMNS].assign(
        test="welch_t", statistic=out["t"], p_adj=out["p_holm"], adj_method="holm",
        effect="hedges_g", effect_size=out["g"], ci_low=out["g_ci_low"], ci_high=out["g_ci_high"],
        n=out["n_a"] + out["n_b"])
    return out.reset_index(drop=True)


def _profile_anova(table: pd.DataFrame, populations: Sequence[str] | None = None, value: str = "z",
                  seed: int = 0) -> pd.DataFrame:
    """Welch one-way ANOVA per dimension for populations with more than two groups
    (empty for two-group populations, where :func:`profile_stats` is the test).

    Columns: ``population, space, layer, dimension`` and the project's statistic
    columns (``test`` = welch_anova, ``statistic`` = F, ``df`` = numerator df,
    ``p``, ``p_adj`` Holm over the dimensions of one population/space/layer,
    ``effect`` = eta_squared with a bootstrap 95% CI, ``n``).
    """
    rows = []
    sub = table[table["population"].isin(_tested_populations(table, populations))]
    for (pop, space, layer, dim), d in sub.groupby(_FAMILY + ["dimension"], sort=False):
        if d["group"].nunique() > 2:
            row = welch_anova(d[value].to_numpy(dtype=float), d["group"].to_numpy(), seed=seed)
            rows.append({"population": pop, "space": space, "layer": layer, "dimension": dim, **row})
    cols = _FAMILY + ["dimension"] + STAT_COLUMNS
    if not rows:
        return pd.DataFrame(columns=cols)
    out = pd.DataFrame(rows)
    for _, idx in out.groupby(_FAMILY, sort=False).groups.items():
        out.loc[idx, "p_adj"] = adjust_pvalues(out.loc[idx, "p"].to_numpy(), "holm")
    out["adj_method"] = "holm"
    return out[cols].reset_index(drop=True)


def _group_means(table: pd.DataFrame, value: str = "z", level: float = 0.95) -> pd.DataFrame:
    """Mean of ``value`` per (population, space, layer, dimension, group) with a
    t-based CI of the mean (SE from the ddof-1 SD).

    Columns: ``population, space, layer, dimension, group, n, mean, sd`` (ddof 0,
    as the original), ``ci_low, ci_high``.
    """
    keys = _FAMILY + ["dimension", "group"]
    agg = table.groupby(keys, sort=False)[value].agg(
        n="size", mean="mean", sd=lambda v: float(np.std(v, ddof=0)), sd1=lambda v: float(np.std(v, ddof=1)))
    half = sps.t.ppf(0.5 + level / 2, agg["n"] - 1) * agg["sd1"] / np.sqrt(agg["n"])
    agg["ci_low"], agg["ci_high"] = agg["mean"] - half, agg["mean"] + half
    return agg.drop(columns="sd1").reset_index()


def _nonbinary_table(table: pd.DataFrame, population: str = "nonbinary", reference: str = "terms") -> pd.DataFrame:
    """Individual terms of ``population`` against the group means of ``reference``
    (the paper's Figure 4); ``population`` must have been standardised on the
    reference's scale (:func:`profile_table` does that by default).

    Columns: ``series`` (``"term"`` for an individual term, ``"group mean"`` for
    a reference group), ``population, group, word`` (empty for means),
    ``space, layer, dimension, z, ci_low, ci_high`` (CI of a group mean; NaN for
    terms), ``n``.
    """
    for p in (population, reference):
        if p not in set(table["population"]):
            raise ParameterError(f"population {p!r} not in the profile table")
    terms = table[table["population"] == population].assign(series="term", ci_low=np.nan, ci_high=np.nan, n=1)
    means = _group_means(table[table["population"] == reference]).rename(columns={"mean": "z"})
    means = means.assign(series="group mean", word="")
    cols = ["series", "population", "group", "word", "space", "layer", "dimension", "z", "ci_low", "ci_high", "n"]
    return pd.concat([means[cols], terms[cols]], ignore_index=True)


def share_below_group_means(nonbinary: pd.DataFrame, space: str = "warmth_competence") -> pd.DataFrame:
    """Per dimension of ``space``, the share of the individual terms of a :func:`nonbinary_table`
    that lie below every reference group mean (for the terms population: below both the
    female and the male term means).

    Columns: ``dimension, share_below, n_below, n_terms`` (``n_terms``: distinct words).
    """
    table = nonbinary[nonbinary["space"] == space]
    if table.empty:
        raise ParameterError(f"share_below_group_means: no rows of space {space!r}")
    lowest = table[table["series"] == "group mean"].groupby("dimension")["z"].min()
    terms = table[table["series"] == "term"]
    below = terms.assign(below=terms["z"] < terms["dimension"].map(lowest))
    out = below.groupby("dimension").agg(share_below=("below", "mean"), n_below=("below", "sum"),
                                         n_terms=("word", "nunique"))
    return out.reset_index()


def _axis_reading(invalid_axes, dimension: str) -> str:
    """The verdict an unread axis is given in a sentence (``verdict_phrase`` when the caller has it)."""
    if isinstance(invalid_axes, Mapping):
        return invalid_axes[dimension]
    return "not shown to beat its label-shuffling null"


def describe_share_below(below: pd.DataFrame) -> str:
    """Markdown bullets reading :func:`share_below_group_means`: per dimension, the share of the single terms
    below both binary group means."""
    return "\n".join(f"- {r.dimension}: {percent_text(r.share_below)} of {r.n_terms} non-binary/transgender terms "
                     "lie below both binary term means" for r in below.itertuples())


def _describe_stats(stats: pd.DataFrame, dimensions: Sequence[str] | None = None, alpha: float = 0.05,
                   invalid_axes: Sequence[str] = ()) -> list[str]:
    """One sentence per stats row that reads the result, e.g. ``names: female
    higher than male on warmth (g = 0.52, 95% CI 0.24 to 0.80; Welch t(180.20) = 3.61, p < 0.001,
    Holm p = 0.0012; Student p < 0.001)``. A dimension in ``invalid_axes`` (``axis_validity.unreadable_axes``,
    or a mapping from those dimensions to ``axis_validity.verdict_phrase``) is not read: its
    sentence gives the axis's verdict instead."""
    lines = []
    rows = stats if dimensions is None else stats[stats["dimension"].isin(dimensions)]
    for r in rows.itertuples(index=False):
        hi, lo = (r.group_a, r.group_b) if r.diff > 0 else (r.group_b, r.group_a)
        numbers = (f"g = {number_text(r.g)}, 95% CI {interval_text(r.g_ci_low, r.g_ci_high, r.g)}; Welch "
                   f"t({number_text(r.df)}) = {number_text(r.t)}, p {p_text(r.p, relation=True)}, Holm p "
                   f"{p_text(r.p_holm, relation=True)}; Student p {p_text(r.p_student, relation=True)}")
        if r.dimension in invalid_axes:
            lines.append(f"{r.population}: {r.dimension} not read, its axis is "
                         f"{_axis_reading(invalid_axes, r.dimension)} ({numbers})")
        elif r.p_holm < alpha:
            lines.append(f"{r.population}: {hi} higher than {lo} on {r.dimension} ({numbers})")
        else:
            lines.append(f"{r.population}: no significant {r.group_a}/{r.group_b} difference on "
                         f"{r.dimension}; {hi} descriptively higher ({numbers})")
    return lines


def describe_profile(stats: pd.DataFrame, alpha: float = 0.05, invalid_axes: Sequence[str] = ()) -> str:
    """Markdown bullets reading every stats row, warmth and competence first, grouped by population
    (``invalid_axes``: as :func:`describe_stats`)."""
    check_word_list(invalid_axes, "invalid_axes")  # the names (or a mapping from them): "warmth" is no list
    lines = []
    for _, s in stats.groupby("population", sort=False):
        rank = s["dimension"].map({"warmth": 0, "competence": 1}).fillna(2)
        ranked = s.assign(_r=rank).sort_values("_r", kind="stable")
        lines += ["- " + line for line in _describe_stats(ranked, alpha=alpha, invalid_axes=invalid_axes)]
    return "\n".join(lines)


def paper_finding(stats: pd.DataFrame, population: str = "names", alpha: float = 0.05) -> pd.DataFrame:
    """Does Schuster et al.'s headline hold: female names higher on warmth, male names on competence?

    One row per composite present in ``stats`` for ``population`` (female vs male):
    ``dimension, expected, holds`` (right direction and ``p_holm < alpha``),
    ``diff`` (female - male), ``g, g_ci_low, g_ci_high, p, p_holm, p_student``.
    """
    expected = {"warmth": "female", "competence": "male"}
    s = stats[(stats["population"] == population) & stats["dimension"].isin(list(expected))]
    rows = []
    for r in s.itertuples(index=False):
        if {r.group_a, r.group_b} != {"female", "male"}:
            raise ValueError(f"paper_finding needs female and male groups, got {r.group_a!r} and {r.group_b!r}")
        sign = 1 if r.group_a == "female" else -1
        diff, g = sign * r.diff, sign * r.g
        lo, hi = sorted((sign * r.g_ci_low, sign * r.g_ci_high))
        higher = "female" if diff > 0 else "male"
        rows.append({"dimension": r.dimension, "expected": f"{expected[r.dimension]} higher",
                     "holds": bool(higher == expected[r.dimension] and r.p_holm < alpha), "diff": diff,
                     "g": g, "g_ci_low": lo, "g_ci_high": hi, "p": r.p, "p_holm": r.p_holm, "p_student": r.p_student})
    return pd.DataFrame(rows, columns=["dimension", "expected", "holds", "diff", "g", "g_ci_low", "g_ci_high",
                                       "p", "p_holm", "p_student"])


def paper_finding_sentence(finding: pd.DataFrame, invalid_axes: Sequence[str] = ()) -> str:
    """Markdown reading :func:`paper_finding`: does each half of the headline hold on this model,
    with the Holm p; an axis in ``invalid_axes`` (as :func:`describe_stats`) is flagged with its verdict."""
    check_word_list(invalid_axes, "invalid_axes")
    parts = []
    for r in finding.itertuples(index=False):
        group = r.expected.split()[0]
        verdict = "yes" if r.holds else "no"
        flag = (f"; its axis is {_axis_reading(invalid_axes, r.dimension)}, so this is not evidence either way"
                if r.dimension in invalid_axes else "")
        parts.append(f"{group} names higher on {r.dimension}: {verdict} "
                     f"(Holm p {p_text(r.p_holm, relation=True)}{flag})")
    return "**Paper's finding on this model** — " + "; ".join(parts) + "." if parts else ""


# --------------------------------------------------------------------------- one call for notebook 04


@dataclass
class _ProfileResult:
    """Everything notebook 04 shows and writes (tables documented at their functions).

    ``values``: :func:`profile_table` at the chosen layer; ``values_by_layer``: at every
    layer; ``stats`` / ``stats_by_layer``: :func:`profile_stats` of those; ``anova``:
    :func:`profile_anova`; ``means``: :func:`group_means` of ``values``; ``nonbinary``:
    :func:`nonbinary_table` (None without the ``nonbinary`` and ``terms`` populations);
    ``skipped``: :attr:`PopulationEmbeddings.skipped`.
    """

    embeddings: _PopulationEmbeddings
    values: pd.DataFrame
    values_by_layer: pd.DataFrame
    stats: pd.DataFrame
    stats_by_layer: pd.DataFrame
    anova: pd.DataFrame
    means: pd.DataFrame
    nonbinary: pd.DataFrame | None
    skipped: pd.DataFrame

    def write(self, folder: str | Path) -> list[Path]:
        """Write every table as parquet + CSV under ``folder`` (``tables.PROFILE_*`` names)."""
        folder = Path(folder)
        written = {tables.NAMES.PROFILE_VALUES: self.values, tables.NAMES.PROFILE_VALUES_BY_LAYER: self.values_by_layer,
                   tables.NAMES.PROFILE_STATS: self.stats, tables.NAMES.PROFILE_STATS_BY_LAYER: self.stats_by_layer,
                   tables.NAMES.PROFILE_ANOVA: self.anova, tables.NAMES.PROFILE_GROUP_MEANS: self.means,
                   tables.NAMES.PROFILE_SKIPPED: self.skipped, tables.NAMES.PROFILE_WORDS: self.embeddings.words}
        if self.nonbinary is not None:
            written[tables.NAMES.PROFILE_NONBINARY] = self.nonbinary
        return [p for name, df in written.items() for p in write_table(df, folder / name)]


def _lost_words(skipped: pd.DataFrame, population: str) -> str:
    """Which words of ``population`` no template could embed and why (:attr:`PopulationEmbeddings.skipped`'s
    reasons, the most frequent first), with the way out when the cause is the tokenizer's unknown token; empty when
    no word was lost whole."""
    rows = skipped[skipped["population"] == population]
    lost = list(dict.fromkeys(rows.loc[rows["context"] == "", "word"]))
    if not lost:
        return ""
    # "word '🙂': 1 of its 1 tokens are the unknown token '[UNK]' (skipped: ...)": the cause without the word
    causes = rows.loc[rows["word"].isin(lost) & (rows["context"] != ""), "reason"].astype(str).map(
        lambda r: r.split(": ", 1)[1] if r.startswith("word ") and ": " in r else r).value_counts()
    unknown = any("unknown token" in c for c in causes.index)
    return (f". {len(lost)} word(s) could not be embedded in any template ({', '.join(lost[:6])}"
            f"{', ...' if len(lost) > 6 else ''}): " + "; ".join(causes.index[:2])
            + (". Give words this model's tokenizer knows, or use a model whose tokenizer has no unknown token "
               "(byte-level BPE, as smollm2-135m-instruct)" if unknown else ""))


def run_profiles(model, bases, populations=("names", "terms", "nonbinary", "occupations"), templates=None, layer="mean",
                 limit: int | None = None, kind=None) -> _ProfileResult:
    """Embed, project, standardise and test the populations (module docstring).

    ``bases``: the space's ``PolarBasis`` objects (``space.build_space(...).bases``).
    ``limit``: at most this many names per group (quick runs; terms stay whole). Every parameter is checked
    first (:func:`check_profile_run`), before a word is embedded; a population whose group keeps fewer than
    :data:`_MIN_GROUP_WORDS` embedded words is not tested (a row of ``skipped`` says why).
    """
    if not isinstance(bases, Mapping) or not bases:
        raise ParameterError(f"bases must be the space's {{name: PolarBasis}} (space.build_space(...).bases), "
                             f"got {type(bases).__name__}")
    pops, kinds = check_profile_run(model, populations, templates, layer, limit, kind,
                                 layers=next(iter(bases.values())).layers)
    emb = population_embeddings(model, pops, templates or DEFAULT_TEMPLATES, kind=kinds)
    # The input's rule again on what was embedded: a group left with one word makes its population untestable.
    embedded = {p: {g: emb.words.loc[(emb.words["population"] == p) & (emb.words["group"] == g), "word"].tolist()
                    for g in groups} for p, groups in pops.items()}
    thin = {p: f"among the embedded words, group(s) {_thin_groups(groups)}; {_MIN_GROUP_WORDS} per group needed"
            + _lost_words(emb.skipped, p) for p, groups in embedded.items() if _thin_groups(groups)}
    untested = pd.DataFrame([{"population": p, "group": "", "word": "", "context": "",
                              "reason": f"population not tested: {why}"} for p, why in thin.items()],
                            columns=emb.skipped.columns)
    emb.skipped = pd.concat([emb.skipped, untested], ignore_index=True) if len(untested) else emb.skipped
    tested = [p for p in pops if p not in _DEFAULT_REFERENCE and p not in thin]
    if not tested:
        raise ParameterError("no population left to test: " + "; ".join(f"{p}: {why}" for p, why in thin.items()))
    values = profile_table(emb, bases, layer)
    by_layer = profile_table(emb, bases, "all")
    present = set(values["population"])
    nonbinary = None
    if {"nonbinary", "terms"} <= present and "terms" not in thin:
        nonbinary = _nonbinary_table(values)
    return _ProfileResult(emb, values, by_layer, profile_stats(values, tested), profile_stats(by_layer, tested),
                         _profile_anova(values, tested), _group_means(values), nonbinary, emb.skipped)
