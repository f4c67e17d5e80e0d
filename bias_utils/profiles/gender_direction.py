"""A model's female − male direction, and its check against the world (chapters 04 and 11).

**The direction.** The profiles' 9 female and 9 male gendered terms (``populations.load_populations("terms")``)
and the nouns to be placed are embedded together the way the term profiles embed a word: the seven
``profiles.DEFAULT_TEMPLATES`` with "the", hidden states averaged over the word's tokens and over the templates
(``profiles.population_embeddings``, kind ``noun``). Per layer, ``d`` = mean of the female terms − mean of the
male terms, and a noun's

    ``gender_position = (x − (f̄ + m̄)/2) · d / |d|²``

so 0 is midway, +0.5 the female terms' mean and −0.5 the male terms'. It is scale-free per layer, so the headline
(``layer="mean"``, as the profiles) is its mean over all hidden states. The same nouns are placed on the model's
**warmth** and **competence** axes (the ``warmth_competence`` basis of ``space.build_space``,
``projection.projection_table`` at the same layer rule): :func:`noun_positions`.

**Is it a gender direction?** A direction computed from 18 words can carry much besides gender. Garg et al. (2018)
checked theirs against the world: occupation words sat nearer the female words where more of the occupation's
workers are women. :func:`occupation_validity` does the same with the 60 occupation nouns of Rudinger et al. (2018)
and their U.S. Bureau of Labor Statistics share of women (``populations.occupation_shares``), through the one
engine that checks every measure of the book against the world (``core.criterion_validity.validity_statistics``;
chapter 11's next-word measure goes through it too). Per measure (``gender_position``, ``warmth``,
``competence``): Spearman's ρ and Pearson's r against ``bls_pct_female`` (scipy's p, and a 95% percentile
interval from resampling occupations), Holm over the three measures within a test; and the direction's
**discriminant** rows: its partial association with the share beyond the nouns' warmth and competence.

**The verdict, stated before the results** (``criterion_validity``), of the direction alone:

* ``supported``: the 95% interval of Spearman's ρ between ``gender_position`` and the BLS share lies above 0;
* ``untestable``: fewer than 10 of the nouns could be embedded;
* ``not shown``: otherwise (the interval includes 0, or lies below it). Not shown is not "no gender in the
  direction": ``detectable`` says which ρ the check would have found 80% of the time.

The discriminant rows get their own verdict by the same rule on the partial ρ. Chapter 11 reads a model's position
on the direction only where the (criterion) verdict is ``supported``, and says so where the discriminant verdict is
not: then the direction's order is not shown to be gender's rather than warmth's. Warmth and competence get no
verdict: nothing says how they should follow the share of women; their rows are described.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd

from ..core import tables
from ..core.criterion_validity import (
    MIN_ITEMS,
    POWER,
    correlation_text,
    describe_discriminant,
    measure_verdict,
)
from ..core.criterion_validity import statistic_row as _row
from ..core.criterion_validity import validity_statistics as _criterion_statistics
from ..core.errors import check_seed
from ..core.precision import number_text
from ..core.results import display_name, write_tables
from ..core.stats import check_n_boot
from ..report import plots
from .population_profiles import DEFAULT_TEMPLATES, check_word_projection, population_embeddings
from .populations import OCCUPATION_GROUPS, load_populations, occupation_shares
from .projection import projection_table

__all__ = [
    "describe_validity", "occupation_validity", "validity_chart",
]

#: The measures placed against the BLS share; the first is the direction the verdict is about.
_MEASURES = ("gender_position", "warmth", "competence")
#: Fewer embedded nouns than this leave the direction ``untestable`` (the engine's rule).
_MIN_NOUNS = MIN_ITEMS
_GENDERED_TERMS = "terms"
_SHARE = "bls_pct_female"


def gender_position(values: np.ndarray, female: np.ndarray, male: np.ndarray) -> np.ndarray:
    """Per item and layer, the position on the female − male direction (module docstring).

    ``values`` [n, L, H]; ``female``, ``male`` [k, L, H] the gendered terms. Returns [n, L]."""
    f, m = female.astype(np.float64).mean(axis=0), male.astype(np.float64).mean(axis=0)
    d = f - m
    norm2 = np.einsum("lh,lh->l", d, d)
    return np.einsum("nlh,lh->nl", values.astype(np.float64) - (f + m) / 2, d) / norm2


def _at_layer(per_layer: np.ndarray, layers: Sequence[int], layer) -> np.ndarray:
    if layer == "mean":
        return per_layer.mean(axis=1)
    if layer == "last":
        return per_layer[:, -1]
    # a negative index counts from the end, as in ``projection``
    return per_layer[:, int(layer) if int(layer) < 0 else list(layers).index(int(layer))]


def noun_positions(model, groups: Mapping[str, Sequence[str]], basis, *, population: str = "nouns", layer="mean",
                   templates: Sequence[str] = DEFAULT_TEMPLATES) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(table, skipped)`` for the nouns of ``groups`` (``{group: [nouns]}``, named ``population``): one row
    per embedded noun with ``group, noun, n_templates, gender_position`` and one column per dimension of
    ``basis`` (the ``warmth_competence`` basis: ``warmth``, ``competence``; projected values, not standardised;
    none when ``basis`` is None, as for a dictionary without those composites) at ``layer`` (``"mean"`` over
    hidden states, ``"last"``, or a hidden-state index); ``skipped``: ``population, group, word, context,
    reason`` of the nouns or gendered terms the model could not embed in a template (a noun embedded in no
    template is absent from ``table``)."""
    if population == _GENDERED_TERMS:
        raise ValueError(f"noun_positions: population {population!r} is the gendered terms' own name")
    emb = population_embeddings(model, {_GENDERED_TERMS: load_populations(_GENDERED_TERMS), population: groups},
                                templates, kind="noun")
    words = emb.words
    is_term = words["population"] == _GENDERED_TERMS
    female = emb.values[(is_term & (words["group"] == "female")).to_numpy()]
    male = emb.values[(is_term & (words["group"] == "male")).to_numpy()]
    own = (~is_term).to_numpy()
    X = emb.values[own]
    items = words.loc[own, ["group", "word", "n_templates"]].reset_index(drop=True)
    items["gender_position"] = _at_layer(gender_position(X, female, male), emb.layers, layer)
    if basis is None:
        return items.rename(columns={"word": "noun"}), emb.skipped
    missing = sorted(set(basis.layers) - set(emb.layers))
    if missing:
        raise ValueError(f"noun_positions: the basis has layers {missing} that the embeddings lack")
    projected = projection_table(basis, X[:, [emb.layers.index(x) for x in basis.layers]], items[["word"]], layer)
    wide = projected.pivot_table(index="word", columns="dimension", values="value", aggfunc="first")
    items = items.join(wide[list(basis.dimensions)], on="word")
    return items.rename(columns={"word": "noun"}), emb.skipped


# --------------------------------------------------------------------------- the check against the world


def _validity_statistics(values: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """The statistics of :data:`tables.NAMES.OCCUPATION_VALIDITY`: ``criterion_validity.validity_statistics`` of
    the :data:`_MEASURES` (the direction first) against ``bls_pct_female``, the direction's discriminant rows beyond
    ``warmth`` and ``competence`` (its columns are documented there)."""
    return _criterion_statistics(values, _MEASURES, n_boot=n_boot, seed=seed)


def _direction_verdict(statistics: pd.DataFrame) -> str:
    """The direction's verdict in an :data:`tables.NAMES.OCCUPATION_VALIDITY` (one of
    ``criterion_validity.VALIDITY_VERDICTS``); chapter 11 reads a model's direction only when it is ``supported``."""
    return measure_verdict(statistics, _MEASURES[0])


@dataclass
class _OccupationValidity:
    """Everything :func:`occupation_validity` finds: ``values`` (one row per noun of the occupations
    population: ``occupation, group, bls_pct_female, bls_year, n_templates`` (0: not embedded) and the
    :data:`MEASURES`, NaN where not embedded), ``statistics`` (:func:`_validity_statistics`), ``skipped``
    (``population, group, word, context, reason``: (noun, template) pairs not embedded)."""

    values: pd.DataFrame
    statistics: pd.DataFrame
    skipped: pd.DataFrame

    @property
    def verdict(self) -> str:
        """The direction's verdict (:func:`_direction_verdict`)."""
        return _direction_verdict(self.statistics)

    def write(self, folder: str | Path) -> list[Path]:
        """Write the values and the statistics as parquet + CSV under ``folder``."""
        return write_tables(folder, {tables.NAMES.OCCUPATION_VALIDITY_VALUES: self.values,
                                     tables.NAMES.OCCUPATION_VALIDITY: self.statistics})


def occupation_validity(model, basis, *, layer="mean", templates: Sequence[str] = DEFAULT_TEMPLATES,
                        n_boot: int = 1000, seed: int = 0) -> _OccupationValidity:
    """The 60 BLS occupation nouns (``populations.load_populations("occupations")``) on ``model``'s
    female − male direction and on ``basis`` (its ``warmth_competence`` basis, or None: the direction alone,
    ``warmth`` and ``competence`` NaN) at ``layer`` in ``templates``
    (:func:`noun_positions`), against the BLS share of women (:func:`_validity_statistics`). The parameters are
    checked first, before any model loads."""
    check_word_projection(model, layer, templates, layers=None if basis is None else basis.layers,
                          what="the direction's check (hidden states)")
    check_n_boot(n_boot)
    check_seed(seed)
    shares = occupation_shares()
    groups = load_populations("occupations")
    found, skipped = noun_positions(model, groups, basis, population="occupations", layer=layer,
                                    templates=templates)
    group_of = {w: g for g, ws in groups.items() for w in ws}
    values = shares[["occupation", _SHARE, "bls_year"]].assign(group=shares["occupation"].map(group_of))
    values = values.merge(found.drop(columns="group").rename(columns={"noun": "occupation"}), on="occupation",
                          how="left")
    values["n_templates"] = values["n_templates"].fillna(0).astype(int)
    values = values.reindex(columns=["occupation", "group", _SHARE, "bls_year", "n_templates", *_MEASURES])
    return _OccupationValidity(values, _validity_statistics(values, n_boot=n_boot, seed=seed), skipped)


# --------------------------------------------------------------------------- reading it


def describe_validity(statistics: pd.DataFrame, model: str = "this model", values: pd.DataFrame | None = None) -> str:
    """Markdown reading :func:`_validity_statistics`: how the nouns' position on the direction follows the share
    of women, the verdict in words (saying plainly "the direction is not validated for this model" when it is
    not ``supported``), with the power of the check, then the discriminant rows (whether it follows the share
    beyond warmth and competence, ``criterion_validity.describe_discriminant``); with ``values``
    (:class:`OccupationValidity`'s), where the positions lie against the gendered terms' means; then warmth and
    competence as described."""
    model = display_name(model)
    rho, r = _row(statistics, _MEASURES[0], "spearman"), _row(statistics, _MEASURES[0], "pearson")
    verdict, n = _direction_verdict(statistics), int(rho["n"])
    numbers = f"{correlation_text(rho)}; {correlation_text(r)}; n = {n} occupations, intervals resampling them"
    if verdict == "untestable":
        text = (f"Only {n} of the occupation nouns could be embedded in {model}, fewer than the {_MIN_NOUNS} the "
                "check needs: **the direction is not validated for this model** (verdict: untestable), and chapter "
                "11 does not read its position.")
    elif verdict == "supported":
        text = (f"In {model}, occupations with more women among their workers (U.S. BLS) sit nearer the female "
                f"terms on the female − male direction ({numbers}): **the direction is validated for this model** "
                "against the world (verdict: supported).")
    else:
        below = rho["ci_high"] < 0
        finding = ("the nouns are ordered *against* the share of women" if below else
                   "an ordering of the nouns by the share of women is not shown")
        text = (f"In {model}, {finding} ({numbers}): **the direction is not validated for this model** (verdict: "
                f"not shown), and chapter 11 does not read its position. With {n} nouns the check finds a ρ of "
                f"{number_text(rho['detectable'])} {int(POWER * 100)}% of the time (not shown is not absent).")
    if verdict != "untestable" and (beyond := describe_discriminant(statistics, _MEASURES[0], "the direction")):
        text += " " + beyond
    if values is not None and (placed := describe_placement(values)):
        text += " " + placed
    described = [f"{m}: {correlation_text(row)}" for m in _MEASURES[1:]
                 if (row := _row(statistics, m, "spearman")) is not None]
    if described:
        text += (" Described, not a verdict (nothing says how they should follow the share of women): "
                 + "; ".join(described) + ".")
    return text


def describe_placement(values: pd.DataFrame) -> str:
    """Where the occupation nouns lie against the terms' means (±0.5), from their ``gender_position`` (and
    ``noun``, else ``occupation``): "The nouns' positions run from −3.35 (nurse) to −2.76 (welder), all beyond
    the male terms' mean (−0.5): …" says why a chart's points all sit far from +0.5 when they do (the order can
    carry gender while the midpoint is not a neutral point for occupation nouns); "" without a position."""
    placed = values.dropna(subset=[_MEASURES[0]]).sort_values(_MEASURES[0])
    if placed.empty:
        return ""
    low, high = placed.iloc[0], placed.iloc[-1]
    name = "noun" if "noun" in placed else "occupation"
    text = (f"The nouns' positions run from {number_text(low[_MEASURES[0]])} ({low[name]}) to "
            f"{number_text(high[_MEASURES[0]])} ({high[name]})")
    if high[_MEASURES[0]] < -0.5 or low[_MEASURES[0]] > 0.5:
        side = "male" if high[_MEASURES[0]] < -0.5 else "female"
        sign = "−" if side == "male" else "+"
        return (text + f", all beyond the {side} terms' mean ({sign}0.5): the direction's midpoint is no neutral "
                "point for occupation nouns, so only their order along it is read.")
    return text + "."


def validity_chart(values: pd.DataFrame, statistics: pd.DataFrame | None = None, *, n_labels: int = 4,
                   title: str | None = None) -> alt.LayerChart:
    """The occupation nouns as points: across, the BLS share of women; up, the position on the female − male
    direction; colour: the BLS majority group; labelled: the ``n_labels`` nouns at each end of the position.
    ``statistics`` (:func:`_validity_statistics`) puts the Spearman ρ and the verdict in the subtitle."""
    data = values.dropna(subset=[_MEASURES[0], _SHARE]).reset_index(drop=True)
    if len(data) < 3:
        raise ValueError(f"validity_chart: {len(data)} nouns with a position; need 3")
    order = data[_MEASURES[0]].rank(method="first")
    labels = data[(order <= n_labels) | (order > len(data) - n_labels)].copy()
    height = 300
    lo, hi = float(data[_MEASURES[0]].min()), float(data[_MEASURES[0]].max())
    pad = 0.05 * (hi - lo or 1.0)
    y_scale = alt.Scale(domain=(lo - pad, hi + pad), nice=False)
    gap = 14 * (hi - lo + 2 * pad) / height  # 14 px for an 11 px font
    labels["label_y"] = plots.repel(labels[_MEASURES[0]], gap, lo - pad + gap / 2, hi + pad - gap / 2)
    x = alt.X(f"{_SHARE}:Q", title="women among its workers (U.S. BLS, %)", scale=alt.Scale(domain=(0, 100)))
    y = alt.Y(f"{_MEASURES[0]}:Q", title=["position on the female − male direction", "(+0.5 = female terms' mean)"],
              scale=y_scale, axis=alt.Axis(format=".2~f"))
    colour = alt.Color("group:N", title="BLS majority", scale=plots.group_scale(OCCUPATION_GROUPS))
    points = alt.Chart(data).mark_point(filled=True, opacity=0.7).encode(
        x=x, y=y, color=colour,
        tooltip=["occupation", alt.Tooltip(f"{_SHARE}:Q", format=".1f"),
                 alt.Tooltip(f"{_MEASURES[0]}:Q", format=".3f")])
    leaders = alt.Chart(labels).mark_rule(color="#999", strokeWidth=0.6).encode(x=x, y=y, y2="label_y:Q")
    # names right of the middle run leftwards, so they stay inside the plot
    text = [alt.Chart(labels[(labels[_SHARE] > 50) == right]).mark_text(
                align="right" if right else "left", dx=-5 if right else 5, fontSize=11).encode(
                x=x, y=alt.Y("label_y:Q", scale=y_scale), text="occupation:N")
            for right in (False, True) if ((labels[_SHARE] > 50) == right).any()]
    subtitle = []
    if statistics is not None:
        rho = _row(statistics, _MEASURES[0], "spearman")
        subtitle = [f"{correlation_text(rho)}; verdict: {rho['verdict']}"]
    caption = ("Each point is one of the occupation nouns of Rudinger et al. (2018): across, the share of women among "
               "its U.S. workers (Bureau of Labor Statistics, 2015/2016); up, where the model places the noun on its "
               "female − male direction (0 midway between the 9 female and 9 male terms' means, +0.5 the female "
               "terms' mean). Colour: the BLS majority. The labelled nouns are those at either end of the position "
               "(a thin line joins a name moved to clear another to its point). Look for whether the points rise "
               "from left to right: a direction that carries gender places occupations held mostly by women nearer "
               "the female terms.")
    return plots.captioned(alt.layer(points, leaders, *text).properties(width=440, height=height),
                           title or "Occupations: the female − male direction against the share of women", subtitle,
                           f"Scatter plot of {len(data)} occupation nouns: the share of women among their workers "
                           "(x) against their position on the model's female − male direction (y).", caption)
