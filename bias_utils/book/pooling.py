"""Across models (notebook ``09_cross_model``): the per-model links between the bias inside a model and the bias it
writes pooled with a DerSimonian–Laird random-effects meta-analysis, in words and as a forest plot.

Chapter 11's primary (Spearman's ρ of the direction with the next-word log-ratio, ``link_next_word``) on Fisher's z
scale, its BOLD-based robustness row (``link_statistics``) on its own scale, and chapter 11's long form
(``long_form_link``) like the primary. Only like is pooled with like: a model whose measure is defined otherwise is a
row of its own, kept apart with the reason. Reads the tables ``crossmodel.read_all_results`` stacks; which folders and
models those are is ``crossmodel``'s.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd
from scipy import stats as sps

from ..audit import long_form
from ..audit.neutral_share import BLS_UNITS
from ..audit.next_word_prompts import DEFAULT_DEFINITION, DEFINITION
from ..core import precision, tables
from ..core.results import display_name
from ..intrinsic_extrinsic import bold_link, link
from ..report import plots
from .crossmodel import short_model_ids

__all__ = ["describe_pooling", "link_forest_chart", "pooled_link"]

#: The tests :func:`pooled_link` pools, each a model's primary row of its table: chapter 11's primary, Spearman's ρ
#: between the direction and the next-word log-ratio across the BLS occupations (``link_next_word``), pooled on
#: Fisher's z scale; and the robustness row, the BOLD-based within-field slope (``link_statistics``), on its own.
_POOLED_TESTS = (link.NEXT_WORD_PRIMARY["test"], bold_link.PRIMARY["test"])
#: Var(atanh ρ) of Spearman's ρ over n pairs is about 1.06 / (n − 3) (Fieller, Hartley and Pearson 1957).
_SPEARMAN_Z_VARIANCE = 1.06
#: The scale each pooled test's SE is on (a reader comparing 0.14 with 0.46 must know they are not one unit).
_SE_SCALES = {_POOLED_TESTS[0]: "Fisher's z (atanh of ρ)", _POOLED_TESTS[1]: "log-odds per SD of the position"}


def _random_effects(estimates, se) -> dict:
    """DerSimonian–Laird random-effects pooling of ``estimates`` with standard errors ``se``.

    Returns ``k``; ``estimate, se, ci_low, ci_high`` (normal 95% interval), ``z, p`` of the pooled
    effect; ``tau2`` (between-model variance, moment estimator truncated at 0), ``q, q_df, q_p``
    (Cochran's heterogeneity test) and ``i2`` (share of the variation beyond sampling error). With one
    estimate the pool is that estimate and the spread between models is not estimable: ``tau2``, ``q``,
    ``q_p`` and ``i2`` are NaN."""
    y, s = np.asarray(estimates, float), np.asarray(se, float)
    if y.shape != s.shape or y.ndim != 1 or y.size == 0:
        raise ValueError(f"random_effects: {y.size} estimates and {s.size} standard errors; need one each, >= 1")
    if not (np.isfinite(y).all() and np.isfinite(s).all() and (s > 0).all()):
        raise ValueError("random_effects: estimates must be finite and standard errors finite and > 0")
    w = 1 / s ** 2
    fixed = (w * y).sum() / w.sum()
    k = y.size
    q = float((w * (y - fixed) ** 2).sum())
    c = w.sum() - (w ** 2).sum() / w.sum()
    tau2 = float(max(0.0, (q - (k - 1)) / c)) if k > 1 else 0.0
    w_re = 1 / (s ** 2 + tau2)
    est = float((w_re * y).sum() / w_re.sum())
    se_re = float(np.sqrt(1 / w_re.sum()))
    z = est / se_re
    spread = {"tau2": tau2, "q": q, "q_df": k - 1, "q_p": float(sps.chi2.sf(q, k - 1)),
              "i2": max(0.0, (q - (k - 1)) / q) if q > 0 else 0.0} if k > 1 else dict.fromkeys(
        ("tau2", "q", "q_df", "q_p", "i2"), np.nan)
    return {"k": k, "estimate": est, "se": se_re, "ci_low": est - 1.959963984540054 * se_re,
            "ci_high": est + 1.959963984540054 * se_re, "z": z, "p": float(2 * sps.norm.sf(abs(z))), **spread}


#: The pooled row's ``model_id``.
_POOLED = "pooled (random effects)"


def pooled_link(next_word: pd.DataFrame, link_stats: pd.DataFrame | None = None,
                at_length: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per intrinsic measure and :data:`_POOLED_TESTS` test, one row per model and, with two models or more, a
    pooled row (``model_id`` = :data:`_POOLED`) from :func:`_random_effects`: chapter 11's primary, Spearman's ρ
    across the BLS occupations (the ``primary`` row of ``next_word``, stacked ``link_next_word`` tables), pooled on
    Fisher's z scale (SE √(1.06 / (n − 3)); the pooled estimate and interval transformed back to ρ); and, from
    ``link_stats`` (stacked ``link_statistics``) when given, the robustness row: the BOLD-based slope per SD within
    category and group, on its own scale with its Wald SE; and from ``at_length`` (stacked ``long_form_link``) when
    given, the long form's primary, Spearman's ρ of the next-word log-ratio with the long-form female share
    (``intrinsic`` :data:`_NEXT_WORD`: here the next word is the predictor), pooled like chapter 11's primary.

    A row its chapter does not read (the direction not validated against the BLS share: ``readable`` False) is not
    pooled. Only like is pooled with like: a model whose next-word measure has another ``measure_definition``
    (other templates or words counted: ``audit.next_word_prompts.measure_definition``) than the pooled models' (the
    built-in one where a model has it, else the most common) is a row of its own, kept out of the pool with the
    reason in ``kept_apart`` (:func:`_like_with_like`). Columns: ``intrinsic, test, model_id, estimate, ci_low,
    ci_high`` (95%: a model's row its own chapter's interval, the very numbers chapter 11 prints, so one quantity has
    one interval in the book; the pooled row's is normal on the pooled scale), ``se`` (what the pool weighs by, on
    that scale), ``se_scale`` (which scale: :data:`_SE_SCALES`), ``n`` (occupations; the pooled row: models),
    ``units``, ``extrinsic_measure``, then for the pooled row ``p, tau2, q, q_p, i2``, then ``measure_definition``
    ("" for the BOLD slope, which no template defines) and ``kept_apart`` ("" for a row in the pool). Rows without an
    estimate are left out."""
    cols = list(tables.table(tables.NAMES.LINK_POOLED).columns)
    parts = []
    if len(next_word):
        parts.append(next_word[(next_word["test"] == _POOLED_TESTS[0]) & next_word["primary"].astype(bool)])
    if link_stats is not None and len(link_stats):
        robust = link_stats[link_stats["test"] == _POOLED_TESTS[1]]
        if "units" not in robust:  # how many of the primary units the model's count reaches (link._bold_row)
            robust = robust.assign(units=[link.counted_units(r) for _, r in robust.iterrows()])
        parts.append(robust)
    if at_length is not None and len(at_length):
        rows = at_length[at_length["primary"].astype(bool)]
        parts.append(rows.assign(intrinsic=_NEXT_WORD, readable=True, units=BLS_UNITS, extrinsic_measure=(
            "long-form female share"), **{DEFINITION: rows[long_form.LONG_FORM_DEFINITION]}))
    if not parts:
        return pd.DataFrame(columns=cols)
    s = pd.concat(parts, ignore_index=True)
    if "readable" in s:
        s = s[s["readable"].fillna(False).astype(bool)]
    if "se" not in s:  # the next-word table has none: its SE is Fisher's, below
        s["se"] = np.nan
    # a table written before the definition was recorded reads "": unknown, so like nothing but itself
    s[DEFINITION] = (s[DEFINITION] if DEFINITION in s else pd.Series(
        "", index=s.index)).fillna("").astype(str)
    spearman = s["test"] == _POOLED_TESTS[0]
    s.loc[spearman, "se"] = np.sqrt(_SPEARMAN_Z_VARIANCE / (s.loc[spearman, "n"].astype(float) - 3))
    s = s.dropna(subset=["effect_size", "se"])
    rows = []
    for (intrinsic, test), g in s.groupby(["intrinsic", "test"], sort=False):
        fisher = test == _POOLED_TESTS[0]
        reference, apart = _like_with_like(g[DEFINITION], intrinsic == _NEXT_WORD)
        for r, why in zip(g.itertuples(index=False), apart):
            rows.append({"intrinsic": intrinsic, "test": test, "model_id": r.model_id, "estimate": float(r.effect_size),
                         "ci_low": float(r.ci_low), "ci_high": float(r.ci_high), "se": float(r.se), "n": int(r.n),
                         "units": r.units, "extrinsic_measure": r.extrinsic_measure,
                         DEFINITION: getattr(r, DEFINITION), "kept_apart": why})
        g = g[[not why for why in apart]]
        y = g["effect_size"].to_numpy(float)
        y = np.arctanh(np.clip(y, -0.999999, 0.999999)) if fisher else y
        se = g["se"].to_numpy(float)
        if len(g) < 2:
            continue  # one model: nothing to pool, and no spread between models to estimate
        pool = _random_effects(y, se)
        back = np.tanh if fisher else (lambda v: v)
        rows.append({"intrinsic": intrinsic, "test": test, "model_id": _POOLED,
                     "estimate": float(back(pool["estimate"])), "ci_low": float(back(pool["ci_low"])),
                     "ci_high": float(back(pool["ci_high"])), "se": pool["se"], "n": pool["k"],
                     "units": "/".join(sorted(set(g["units"].dropna().astype(str)))) or None,
                     "extrinsic_measure": "/".join(sorted(set(g["extrinsic_measure"]))),
                     **{k: pool[k] for k in ("p", "tau2", "q", "q_p", "i2")},
                     DEFINITION: reference, "kept_apart": ""})
    return pd.DataFrame(rows, columns=cols).assign(se_scale=lambda f: f["test"].map(_SE_SCALES))[cols]


def _like_with_like(definitions: pd.Series, at_length: bool = False) -> tuple[str, list[str]]:
    """``(reference, reasons)``: the measure definition the pool keeps (the built-in one where a row has it, else
    the most common, the first listed on a tie) and, per row of ``definitions``, why it is kept apart ("" when it is
    the reference's); ``at_length``: the definitions are the long form's."""
    counts = definitions.value_counts(sort=False)
    builtin = long_form.long_form_definition() if at_length else DEFAULT_DEFINITION
    reference = (builtin if builtin in counts.index
                 else counts.index[int(np.argmax(counts.to_numpy()))] if len(counts) else "")
    own = ("instructions, samples or length", "its long form") if at_length else ("templates or words",
                                                                                  "its next-word measure")
    theirs = (f"{reference}, the built-in " + ("instructions, samples and length" if at_length else
                                               "templates and the audit's words") if reference == builtin
              else reference or "not recorded")

    def why(definition: str) -> str:
        if definition == reference:
            return ""
        if not definition:
            return (f"its table does not record what defines its next-word measure (written before chapter 11 "
                    f"recorded it), so it cannot be pooled with measures of definition {theirs}: rerun its chapter 11")
        return (f"{own[1]} is defined by other {own[0]} (definition {definition}) than the pooled models' "
                f"({theirs}): a different measure, not pooled with them")
    return reference, [why(d) for d in definitions]


#: The ``intrinsic`` of the long form's pooled rows: the next word, as the predictor of what is written at length.
_NEXT_WORD = "next_word_log_ratio"
#: Per pooled test (and the long form's, by its ``intrinsic``): what its estimate is (a sentence's subject), its axis
#: title, and what a chart's dot is.
_POOL_WORDS = {
    _NEXT_WORD: {
        "name": "Spearman ρ between the next-word log-ratio and the long-form female share across the BLS "
                "occupations (the long form's primary)",
        "axis": "Spearman ρ: next-word log-ratio against the long-form female share (BLS occupations)",
        "dot": "the Spearman correlation, across the BLS occupations, between the log-ratio of female to male words "
               "the model predicts next after neutral sentences about an occupation and the female share of the "
               "gendered words in the texts it wrote at length about one person in it (chapter 11), the line its "
               "95% bootstrap interval as the model's own chapter gives it. ",
        "pool": "The diamond in the last row pools the models (DerSimonian–Laird random effects on Fisher's z "
                "scale, each ρ weighted by 1.06 / (n − 3); a normal interval transformed back). ",
        "unit": "",
    },
    _POOLED_TESTS[0]: {
        "name": "Spearman ρ between the direction and the next-word log-ratio across the BLS occupations (chapter "
                "11's primary)",
        "axis": "Spearman ρ: position on the {axis} against the next-word log-ratio (BLS occupations)",
        "dot": "the Spearman correlation, across the 60 BLS occupations, between where the model places an "
               "occupation's noun on its {axis} and the log-ratio of female to male words it predicts next "
               "after neutral sentences about the occupation (chapter 11's primary), the line its 95% bootstrap "
               "interval as the model's own chapter gives it. ",
        "pool": "The diamond in the last row pools the models (DerSimonian–Laird random effects on Fisher's z "
                "scale, each ρ weighted by 1.06 / (n − 3); a normal interval transformed back). ",
        "unit": "",
    },
    _POOLED_TESTS[1]: {
        "name": "BOLD-based within-field slope (chapter 11's robustness row)",
        "axis": "slope of the log-odds per SD, within category and group: position on the {axis} against female vs "
                "male words",
        "dot": "the change in the log-odds of female vs male words in its BOLD completions per standard deviation "
               "of the occupation noun's position on its {axis}, within BOLD category and audit group (a random "
               "intercept per occupation), the line its 95% confidence interval as the model's own chapter gives "
               "it (profile likelihood). ",
        "pool": "The diamond in the last row pools the models (DerSimonian–Laird random effects, weighted by each "
                "slope's standard error; a normal interval). ",
        "unit": " log-odds per SD",
    },
}


def describe_pooling(pooled: pd.DataFrame, intrinsic: str = "gender_position", test: str = _POOLED_TESTS[0]) -> str:
    """One sentence on the pooled statistic ``test`` of :func:`pooled_link` for ``intrinsic``: with two models or
    more the pooled estimate with its interval, τ², Q (its p) and I²; with fewer, that nothing is pooled and the
    spread between models is not estimable; then each model kept apart (another measure) and why."""
    rows = pooled[(pooled["intrinsic"] == intrinsic) & (pooled["test"] == test)]
    apart = rows[rows["kept_apart"].fillna("").astype(bool)] if "kept_apart" in rows else rows.iloc[:0]
    models = rows[(rows["model_id"] != _POOLED) & ~rows.index.isin(apart.index)]
    pool = rows[rows["model_id"] == _POOLED]
    words = _POOL_WORDS[intrinsic if intrinsic == _NEXT_WORD else test]
    kept = "".join(f" **Kept apart: {display_name(r.model_id)}**: {r.kept_apart}." for r in apart.itertuples())
    if pool.empty:
        return (f"{len(models)} model{'' if len(models) == 1 else 's'} of this build "
                f"{'has' if len(models) == 1 else 'have'} the {words['name']}"
                + ("" if intrinsic == _NEXT_WORD else " on a validated direction")
                + (" and one definition of the measure" if len(apart) else "")
                + ": nothing is pooled, and the spread between models (τ², Q, I²) is not estimable." + kept)
    r = pool.iloc[0]
    num = precision.number_text
    return (f"Pooled over {int(r.n)} models (DerSimonian–Laird random effects), the {words['name']} is "
            f"{num(r.estimate)}{words['unit']} (95% CI {precision.interval_text(r.ci_low, r.ci_high, r.estimate)}, "
            f"p {precision.p_text(r.p, relation=True)}); between the models τ² = {num(r.tau2)}, "
            f"Q = {num(r.q)} (p {precision.p_text(r.q_p, relation=True)}), I² = {precision.percent_text(r.i2)}."
            + kept)


def link_forest_chart(pooled: pd.DataFrame, intrinsic: str = "gender_position", test: str = _POOLED_TESTS[0], *,
                      title: str | None = None) -> alt.LayerChart:
    """Forest plot of :func:`pooled_link` rows for one intrinsic measure and test: each model's estimate
    with its 95% interval and, when the rows hold one, the pooled estimate last (a diamond); a rule marks 0
    (no link). A model kept apart (another measure: ``kept_apart``) is not drawn; :func:`describe_pooling` names
    it."""
    data = pooled[(pooled["intrinsic"] == intrinsic) & (pooled["test"] == test)]
    if "kept_apart" in data:  # another measure: not drawn beside the models it was not pooled with
        data = data[~data["kept_apart"].fillna("").astype(bool)]
    if data.empty:
        raise ValueError(f"link_forest_chart: no {test} rows for {intrinsic}")
    axis = "female − male direction" if intrinsic == "gender_position" else f"{intrinsic.replace('_', ' ')} axis"
    words = {k: v.format(axis=axis) for k, v in _POOL_WORDS[intrinsic if intrinsic == _NEXT_WORD else test].items()}
    # a model without a finite interval has nothing to draw: left out, counted in the caption
    drawn = plots.drawable(data, ["estimate", "ci_low", "ci_high"])
    left_out = len(data) - len(drawn)
    data = short_model_ids(drawn).assign(kind=lambda d: np.where(d["model_id"] == _POOLED, "pooled", "model"))
    order = list(data["model_id"])
    # padded, and 0 not pinned to an edge: the dashed line at 0 stays inside the plot, not under the axis line
    x = alt.X("estimate:Q", title=words["axis"], scale=alt.Scale(zero=False, padding=12))
    y = alt.Y("model_id:N", sort=order, title=None)
    zero = alt.Chart(pd.DataFrame({"estimate": [0.0]})).mark_rule(color="#999", strokeDash=[4, 3]).encode(x=x)
    # black: shape (dot or diamond) tells a model from the pool, and a hue on this page names a dimension or a unit
    bars = alt.Chart(data).mark_rule(strokeWidth=2, color="black").encode(x="ci_low:Q", x2="ci_high:Q", y=y)
    has_pool = bool((data["kind"] == "pooled").any())
    points = alt.Chart(data).mark_point(filled=True, size=80, color="black").encode(
        x=x, y=y, shape=alt.Shape("kind:N", scale=alt.Scale(domain=["model", "pooled"],
                                                             range=["circle", "diamond"]),
                                  title=None, legend=None if not has_pool else alt.Legend()),
        tooltip=["model_id", alt.Tooltip("estimate:Q", format=".3f"), alt.Tooltip("ci_low:Q", format=".3f"),
                 alt.Tooltip("ci_high:Q", format=".3f"), "n"])
    caption = ("Each row is a model: the dot is " + words["dot"]
               + (words["pool"] if has_pool else "With one model nothing is pooled. ")
               + "The dashed line marks 0, no link. Look at whether the intervals lie on one side of 0"
               + (" and whether the models agree with each other." if has_pool else ".")
               + (f" {left_out} model{'s' if left_out != 1 else ''} without a finite interval left out; the table "
                  f"below gives {'them' if left_out != 1 else 'it'}." if left_out else ""))
    heading = ("Does the next word predict what it writes at length?" if intrinsic == _NEXT_WORD
               else "Does the bias inside predict the bias it writes?" if test == _POOLED_TESTS[0]
               else "Robustness: the link read from the sampled BOLD completions (within fields)")
    return plots.captioned(alt.layer(zero, bars, points).properties(width=420, height=alt.Step(24)),
                           title or heading, [],
                           f"Forest plot of the {words['name']} per model{' and pooled' if has_pool else ''}, "
                           "with 95% intervals.", caption)
