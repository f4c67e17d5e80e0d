"""Altair charts for the book, one function per figure, and :func:`save`.

Every chart uses the ``bias_profiles`` theme (registered and enabled on
import) and can be written as SVG, PNG and Vega-Lite JSON by :func:`save`
(vl-convert renders offline, no browser needed).

Input tables are the tidy outputs of ``profiles`` and ``space``/``projection``;
each function names the columns it reads.

One concept over 600 lines: the book's visual language. Its colours (groups, units, sources), its log-axis ticks,
its theme and every shared figure live together so that one quantity is drawn one way on every page.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd

from ..core import cache
from ..core.errors import ParameterError, check_word_list
from ..core.results import display_name
from . import rendering

__all__ = [
    "accuracy_heatmap", "axis_validity_chart", "drawable", "layer_curves_chart", "profile_chart", "save",
    "specification_curve_chart", "warmth_competence_charts",
]

_THEME = "bias_profiles"
_FEMALE, _MALE = "#7b3294", "#e08214"
#: One colour per group in every figure, by the group's name (never by its position in a chart): the female side
#: of every contrast purple, the male side orange (a colour-blind safe pair). Keyed by the display label
#: (:func:`bias_utils.report.rendering.group_label`); :func:`group_scale` also accepts the tables' names.
GROUP_COLORS = {"female": _FEMALE, "male": _MALE, "female-dominated": _FEMALE, "male-dominated": _MALE,
                "female-majority": _FEMALE, "male-majority": _MALE}
#: The colour of an interval by what it treats as independent, in every forest plot: black where occupations (or
#: the published selection's keys) are the unit, grey where every word or completion is; greys, so that no hue of
#: a page's other figures takes a second meaning.
UNIT_COLORS = {"occupations (clustered)": "black", "independent words or completions": "#999999"}
OTHER_COLORS = ["#1b9e77", "#377eb8", "#e7298a", "#66a61e", "#a6761d", "#666666"]
#: One colour per model where a chart draws models side by side (chapter 09's erasure curves): hues none of the
#: colours above take (dark red, mustard, dark brown, slate), so that on a page beside the dimensions' and the
#: groups' colours none means two things.
MODEL_COLORS = ["#b2182b", "#e6ab02", "#8c510a", "#4d4d4d"]
#: Fixed colours per context source, far apart in hue and lightness (corpus and dictionary were
#: two blue-greens); a source registered later takes the next unused colour.
_SOURCE_COLORS = {"generated": "#e7298a", "dictionary": "#377eb8", "corpus": "#a6761d", "none": "#666666"}
#: Order of the dimensions on the profile axis (the paper's order).
_DIMENSION_ORDER = ("warmth", "competence", "sociability", "morality", "ability", "agency",
                   "status", "politics", "religion")
#: Pole labels (low, high) per dimension; other dimensions get "low X" / "high X".
_POLE_LABELS = {
    "politics": ("progressive", "traditional"),
    "religion": ("non-religious", "religious"),
}
_FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"


@alt.theme.register(_THEME, enable=True)
def _theme() -> alt.theme.ThemeConfig:
    return {
        "config": {
            "font": _FONT,
            "view": {"stroke": None, "continuousWidth": 380, "continuousHeight": 260},
            # labels at least 6 px apart (Vega hides the ones that would come closer): "0.00.1" read as one number
            "axis": {"labelFontSize": 11, "titleFontSize": 12, "titleFontWeight": "normal",
                     "gridColor": "#e6e6e6", "domainColor": "#888", "tickColor": "#888", "labelSeparation": 6},
            "legend": {"labelFontSize": 11, "titleFontSize": 11, "orient": "bottom"},
            "header": {"labelFontSize": 12, "titleFontSize": 12},
            "title": {"fontSize": 14, "fontWeight": "normal", "anchor": "start"},
            "range": {"category": OTHER_COLORS},
        }
    }


def _pole_labels(dimension: str) -> tuple[str, str]:
    """``(low pole, high pole)`` labels of a dimension, e.g. ``("progressive", "traditional")``."""
    return _POLE_LABELS.get(dimension, (f"low {dimension}", f"high {dimension}"))


def _fixed_scale(values: Sequence[str], fixed: dict[str, str]) -> alt.Scale:
    values = list(dict.fromkeys(values))
    others = iter([c for c in OTHER_COLORS if c not in fixed.values()] + OTHER_COLORS)
    return alt.Scale(domain=values, range=[fixed.get(str(v).lower()) or next(others) for v in values])


def _group_color(group) -> str:
    """The colour of a group in every chart: :data:`GROUP_COLORS` by its display label, else a colour of
    :data:`OTHER_COLORS` chosen by its name (a hash), so it too is the same in every chart."""
    label = rendering.group_label(group)
    if label in GROUP_COLORS:
        return GROUP_COLORS[label]
    others = [c for c in OTHER_COLORS if c not in GROUP_COLORS.values()]
    return others[int(cache.stable_hash(label), 16) % len(others)]


def group_scale(groups: Sequence[str]) -> alt.Scale:
    """A colour scale over groups' display labels (:func:`bias_utils.report.rendering.group_label`; the chart's data
    must
    hold the labels), each in its :func:`group_color`."""
    labels = list(dict.fromkeys(rendering.group_label(g) for g in groups))
    return alt.Scale(domain=labels, range=[_group_color(g) for g in labels])



def drawable(frame: pd.DataFrame, columns: Sequence[str], log: bool = False) -> pd.DataFrame:
    """The rows of ``frame`` a chart can place: every one of ``columns`` finite (and, on a log axis, above 0).
    A degenerate fit (an odds ratio of infinity, an interval from 0 to infinity) has no place on an axis; the
    chart's caption says how many rows it leaves out, and its table keeps them."""
    values = frame[check_word_list(columns, "columns")].apply(pd.to_numeric, errors="coerce").to_numpy(float)
    keep = np.isfinite(values).all(axis=1) & ((values > 0).all(axis=1) if log else True)
    return frame[keep]


def repel(values, gap: float, low: float, high: float) -> np.ndarray:
    """Label positions on one axis, in ``values``' order: at least ``gap`` apart and, among such
    placements, the nearest to the values in squared distance, kept within ``[low, high]`` (when the
    labels cannot all fit, the gap wins over ``high``).

    With the labels sorted, ``p[i] - i * gap`` must not decrease, so the nearest placement is the
    isotonic regression of ``values[i] - i * gap`` (pool-adjacent-violators), clipped to the bounds."""
    values = np.asarray(values, dtype=float)
    order = np.argsort(values, kind="stable")
    n = len(values)
    target = values[order] - gap * np.arange(n)
    blocks: list[list[float]] = []  # [sum, count] of pooled neighbours
    for t in target:
        blocks.append([t, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    fitted = np.concatenate([np.full(c, t / c) for t, c in blocks]) if n else target
    pos = np.clip(fitted, low, max(low, high - gap * (n - 1))) + gap * np.arange(n)
    out = np.empty_like(pos)
    out[order] = pos
    return out


def _ordered(dimensions) -> list[str]:
    present = list(dict.fromkeys(dimensions))
    return [d for d in _DIMENSION_ORDER if d in present] + [d for d in present if d not in _DIMENSION_ORDER]


def _js_map(mapping: dict) -> str:
    return json.dumps({str(k): v for k, v in mapping.items()})


def save(chart: alt.TopLevelMixin, path: str | Path, scale: float = 2.0) -> dict[str, Path]:
    """Write ``<path>.svg``, ``<path>.png`` (``scale`` x pixels) and ``<path>.vl.json``.

    ``path`` may carry one of those suffixes or none. Files are written atomically.
    """
    import vl_convert as vlc  # deferred: a large native library, needed only to write image files

    path = Path(path)
    stem = path.with_name(path.name.removesuffix(".vl.json")) if path.name.endswith(".vl.json") else path
    if stem.suffix in (".svg", ".png", ".json"):
        stem = stem.with_suffix("")
    spec = chart.to_json()
    return {
        "svg": cache.atomic_write_text(stem.with_name(stem.name + ".svg"), vlc.vegalite_to_svg(spec)),
        "png": cache.atomic_write_bytes(stem.with_name(stem.name + ".png"), vlc.vegalite_to_png(spec, scale=scale)),
        "vl.json": cache.atomic_write_text(stem.with_name(stem.name + ".vl.json"), spec),
    }


#: The format of a log axis' ticks: thousands separated, no trailing zeros (0.5, 1, 10, 1,000).
#: d3-format for log-axis ticks: thousands separators, never an exponent ("~g" printed 1e+12 for a separated fit)
LOG_FORMAT = ",~r"


def log_ticks(values, most: int = 7) -> list[float]:
    """The ticks of every log axis of the book (one scheme for one quantity): 1, 2 and 5 times the powers of ten
    from below the smallest of ``values`` (or 1) to above the largest (or 1); 1 and 3 times them, or the powers of
    ten alone (every second or third when there would still be more than ``most``), where the range is wider. 1
    is always one of them. Print them with :data:`LOG_FORMAT`."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v) & (v > 0)]
    low, high = (min(v.min(), 1.0), max(v.max(), 1.0)) if v.size else (1.0, 1.0)
    first, last = int(np.floor(np.log10(low))), int(np.ceil(np.log10(high)))
    for factors in ((1, 2, 5), (1, 3), (1,)):
        ticks = [f * 10.0 ** k for k in range(first, last + 1) for f in factors]
        ticks = [round(t, 12) for t in ticks if low / 2 < t < high * 2 or t == 1]
        if len(ticks) <= most:
            return ticks
    # every step-th power of ten, one more beyond each end so that the data lie inside
    step = -(-len(ticks) // (most - 2))
    powers = [k for k in range(first - step, last + step + 1) if k % step == 0]
    inside = [k for k in powers if low <= 10.0 ** k <= high]
    below, above = [k for k in powers if 10.0 ** k < low][-1:], [k for k in powers if 10.0 ** k > high][:1]
    return [round(10.0 ** k, 12) for k in below + inside + above]


def linear_ticks(low: float, high: float, most: int = 6) -> list[float]:
    """Ticks for a linear axis that shows ``[low, high]`` of its data and runs on past it (a column of labels): the
    multiples of the step 1, 2, 5 or 10 times a power of ten, the smallest that gives at most ``most`` ticks, inside
    ``[low, high]`` only. Vega's own ticks would continue under the labels."""
    span = (high - low) or 1.0
    base = 10.0 ** np.floor(np.log10(span / 4))
    step = next(base * m for m in (1, 2, 5, 10) if span / (base * m) <= most)
    first = np.ceil(low / step - 1e-9)  # a bound that is a multiple of the step is a tick
    return [round(float(k * step), 12) for k in np.arange(first, np.floor(high / step + 1e-9) + 1)]


def captioned(chart, heading: str, subtitle: Sequence[str], alt_text: str, caption: str):
    """``chart`` with its title (model ids shown by :func:`bias_utils.core.results.display_name`), its alt text
    and the caption the book prints under it (what to look for, legend and error bars), both in
    Vega-Lite's ``description`` as :func:`bias_utils.report.rendering.figure_text` reads them (``usermeta``
    would be refused once the chart is composed with others)."""
    heading = display_name(heading)
    title = alt.TitleParams(heading, subtitle=list(subtitle)) if subtitle else heading
    return chart.properties(title=title, description=display_name(alt_text) + rendering.CAPTION_SEPARATOR + caption)


def _one(frame: pd.DataFrame, column: str, what: str):
    values = frame[column].drop_duplicates().tolist()
    if len(values) != 1:
        raise ValueError(f"{what}: expected one {column}, found {values}; filter the table first")
    return values[0]


# --------------------------------------------------------------------------- Study 1


#: Marks an axis whose verdict (``axis_validity``) is not "supported": not shown to beat its null, or untestable.
INVALID_MARK = " †"
INVALID_NOTE = "† axis not shown to beat its label-shuffling null (or untestable): its gap is greyed and not read"
INVALID_GREY = "#bbbbbb"


def profile_chart(means: pd.DataFrame, stats: pd.DataFrame | None = None, *, title: str | None = None,
                  alpha: float = 0.05, invalid_axes: Sequence[str] = ()) -> alt.LayerChart:
    """The stereotype profile of one population (the paper's Figures 1 and 5).

    ``means``: ``profiles.group_means`` rows of ONE population and layer
    (columns ``population, layer, dimension, group, mean, ci_low, ci_high``);
    one row per dimension on the y axis, low pole labelled on the left, high
    pole on the right. ``stats``: ``profiles.profile_stats`` rows; dimensions
    with ``p_holm < alpha`` get bold pole labels and a ``*``. ``invalid_axes``
    (``axis_validity.unreadable_axes``): dimensions drawn in grey with a ``†`` instead
    of a star, explained in the subtitle.
    """
    pop = _one(means, "population", "profile_chart")
    means = means.assign(group=means["group"].map(rendering.group_label))
    _one(means, "layer", "profile_chart")
    dims = _ordered(means["dimension"])
    invalid = sorted(set(invalid_axes) & set(dims))
    sig = set()
    if stats is not None:
        s = stats[(stats["population"] == pop) & stats["dimension"].isin(dims)]
        sig = set(s.loc[s["p_holm"] < alpha, "dimension"]) - set(invalid)

    def mark(d: str) -> str:
        return INVALID_MARK if d in invalid else " *" if d in sig else ""

    low = {d: _pole_labels(d)[0] + mark(d) for d in dims}
    high = {d: _pole_labels(d)[1] + mark(d) for d in dims}
    bound = float(np.nanmax(np.abs(means[["mean", "ci_low", "ci_high"]].to_numpy())))
    bound = max(1.0, np.ceil(bound * 4) / 4)
    x = alt.X("mean:Q", title="standardised projected value (mean, 95% CI)",
              scale=alt.Scale(domain=[-bound, bound]))
    in_invalid = f"indexof({json.dumps(invalid)}, datum.dimension) >= 0"
    group_colour = alt.Color("group:N", title=pop, scale=group_scale(means["group"]))
    colour = alt.condition(in_invalid, alt.value(INVALID_GREY), group_colour)
    weight = {"condition": {"test": f"indexof({json.dumps(sorted(sig))}, datum.value) >= 0", "value": "bold"},
              "value": "normal"}
    label_colour = {"condition": {"test": f"indexof({json.dumps(invalid)}, datum.value) >= 0",
                                  "value": INVALID_GREY}, "value": "black"}

    def y_axis(orient: str, labels: dict) -> alt.Y:
        return alt.Y("dimension:N", sort=dims, title=None, axis=alt.Axis(
            orient=orient, labelExpr=f"{_js_map(labels)}[datum.value]", labelFontWeight=weight,
            labelColor=label_colour, ticks=False, domain=False, grid=True))

    data = means.assign(order=means["dimension"].map({d: i for i, d in enumerate(dims)}))
    base = alt.Chart(data)
    rule = alt.Chart(pd.DataFrame({"mean": [0.0]})).mark_rule(color="#999").encode(x="mean:Q")
    # one line per group through the valid axes only: a line into a greyed axis would draw it in colour
    lines = base.transform_filter(f"!({in_invalid})").mark_line(strokeWidth=1.5).encode(
        x=x, y=y_axis("left", low), color=group_colour, order="order:Q")
    points = base.mark_point(size=60, filled=True, opacity=1).encode(
        x=x, y=alt.Y("dimension:N", sort=dims, axis=None), color=colour,
        tooltip=["group", "dimension", alt.Tooltip("mean:Q", format=".2f"), "n"])
    bars = base.mark_errorbar(ticks=True).encode(
        x=alt.X("ci_low:Q", title=""), x2="ci_high:Q", y=y_axis("right", high), color=colour)
    groups = ", ".join(map(str, dict.fromkeys(means["group"])))
    caption = (f"Each row is a stereotype dimension, its low pole named on the left and its high pole on the right. "
               f"A dot is a group's mean standardised projection ({groups}; colour as in the legend), its bar the 95% "
               "confidence interval, the vertical line zero (the population's average). Look for rows where the "
               f"groups' intervals lie apart: a star and bold pole names mark a difference significant after Holm's "
               f"correction (α = {alpha:g}).")
    if invalid:
        caption += " " + INVALID_NOTE + "."
    chart = alt.layer(rule, lines, points, bars).resolve_axis(y="independent").properties(height=34 * len(dims))
    return captioned(chart, title or f"Stereotype profile: {pop}", [INVALID_NOTE] if invalid else [],
                   f"Dot plot: mean position of the {pop} groups ({groups}) on {len(dims)} stereotype dimensions "
                   f"({', '.join(dims)}), with 95% confidence intervals.", caption)


def warmth_competence_chart(means: pd.DataFrame, terms: pd.DataFrame | None = None, *,
                            stats: pd.DataFrame | None = None, title: str | None = None,
                            alpha: float = 0.05, invalid_axes: Sequence[str] = ()) -> alt.LayerChart:
    """The 2D warmth x competence plane (the paper's Figures 3 and 4).

    ``means``: ``profiles.group_means`` rows (one layer; any populations) with
    dimensions ``warmth`` and ``competence``: each group is a point with 95% CI
    bars in both directions, its shape telling the population. ``terms``:
    ``profiles.nonbinary_table`` rows; its ``series == "term"`` rows are drawn as
    labelled grey points (individual non-binary/transgender terms on the binary
    terms' scale). ``stats``: composite dimensions with ``p_holm < alpha`` for a
    plotted population are starred in the axis titles. ``invalid_axes``
    (``axis_validity.unreadable_axes``): a composite listed there gets a grey axis title
    with ``†`` and the note in the subtitle, and no star.
    """
    _one(means, "layer", "warmth_competence_chart")
    means = means.assign(group=means["group"].map(rendering.group_label))
    wide = _wide_wc(means, ["population", "group"], "mean", extra=("ci_low", "ci_high"))
    invalid = [d for d in ("warmth", "competence") if d in set(invalid_axes)]
    starred = {}
    if stats is not None:
        s = stats[stats["dimension"].isin(["warmth", "competence"]) & (stats["p_holm"] < alpha)
                  & stats["population"].isin(means["population"])]
        for d, g in s.groupby("dimension"):
            starred[d] = " (* " + ", ".join(sorted(g["population"].unique())) + ")"
    values = [wide[c].to_numpy() for c in wide.columns if c.startswith(("warmth", "competence"))]
    tw = None
    if terms is not None and len(terms):
        tw = _wide_wc(terms[terms["series"] == "term"], ["population", "group", "word"], "z")
        values += [tw["warmth"].to_numpy(), tw["competence"].to_numpy()]
    bound = max(1.0, float(np.ceil(np.nanmax(np.abs(np.concatenate(values))) * 4) / 4))
    scale = alt.Scale(domain=[-bound, bound])
    size = 340

    def axis_title(d: str) -> tuple[str, alt.Axis]:
        text = f"← low {d} · high {d} →"
        if d in invalid:
            return text + INVALID_MARK, alt.Axis(titleColor=INVALID_GREY)
        return text + starred.get(d, ""), alt.Axis()

    (x_title, x_axis), (y_title, y_axis) = axis_title("warmth"), axis_title("competence")

    def x(field: str) -> alt.X:
        return alt.X(field, scale=scale, title=x_title, axis=x_axis)

    def y(field: str) -> alt.Y:
        return alt.Y(field, scale=scale, title=y_title, axis=y_axis)

    colour = alt.Color("group:N", title="group", scale=group_scale(wide["group"]))
    base = alt.Chart(wide)
    zero = pd.DataFrame({"v": [0.0]})
    layers = [
        alt.Chart(zero).mark_rule(color="#bbb").encode(x=x("v:Q")),
        alt.Chart(zero).mark_rule(color="#bbb").encode(y=y("v:Q")),
        base.mark_errorbar().encode(x=x("warmth_ci_low:Q"), x2="warmth_ci_high:Q", y=y("competence:Q"),
                                    color=colour),
        base.mark_errorbar().encode(y=y("competence_ci_low:Q"), y2="competence_ci_high:Q", x=x("warmth:Q"),
                                    color=colour),
        base.mark_point(size=110, filled=True, opacity=1).encode(
            x=x("warmth:Q"), y=y("competence:Q"), color=colour, shape=alt.Shape("population:N", title="population"),
            tooltip=["population", "group", alt.Tooltip("warmth:Q", format=".2f"),
                     alt.Tooltip("competence:Q", format=".2f")]),
    ] + ([] if tw is None else _term_callouts(tw, x, y, bound, size))
    caption = ("Each group's mean on warmth (left to right) and competence (bottom to top), with 95% confidence "
               "intervals as bars in both directions; colour is the group, shape the population"
               + ("; grey diamonds are single non-binary/transgender terms on the same scale, each named in the "
                  "column beside them (a thin line leads from the name to its diamond)" if tw is not None else "")
               + ". Look at which side of zero each group falls and whether the bars overlap; a star in an axis "
                 "title names the populations whose groups differ on it after Holm's correction.")
    if invalid:
        caption += " " + INVALID_NOTE + "."
    pops = ", ".join(map(str, dict.fromkeys(wide["population"])))
    return captioned(alt.layer(*layers).properties(width=size, height=size), title or "Warmth and competence",
                   [INVALID_NOTE] if invalid else [],
                   f"Scatter plot of group means ({pops}) on warmth (x) and competence (y) with 95% confidence "
                   "intervals.", caption)


def _term_callouts(tw: pd.DataFrame, x, y, bound: float, size: int) -> list:
    """The single terms as diamonds, their names in a column on the emptier side of the cluster, spaced so
    no two overprint (:func:`repel`), each joined to its diamond by a thin line."""
    right = tw["warmth"].mean() <= 0
    gap = 14 * 2 * bound / size  # 14 px of an 11 px font, in data units
    reach = 0.12 * bound
    labels = tw.assign(
        label_x=tw["warmth"].max() + reach if right else tw["warmth"].min() - reach,
        label_y=repel(tw["competence"], gap, -bound + gap / 2, bound - gap / 2))
    base = alt.Chart(labels)
    return [base.mark_rule(color="#999", strokeWidth=0.6).encode(x=x("warmth:Q"), y=y("competence:Q"),
                                                                   x2="label_x:Q", y2="label_y:Q"),
            base.mark_point(shape="diamond", size=50, color="#555", filled=True, opacity=1).encode(
                x=x("warmth:Q"), y=y("competence:Q"),
                tooltip=["word", "group", alt.Tooltip("warmth:Q", format=".2f"),
                         alt.Tooltip("competence:Q", format=".2f")]),
            base.mark_text(align="left" if right else "right", dx=3 if right else -3, fontSize=11,
                           color="#333").encode(x=x("label_x:Q"), y=y("label_y:Q"), text="word:N")]


def warmth_competence_charts(means: pd.DataFrame, nonbinary: pd.DataFrame | None = None, *,
                             stats: pd.DataFrame | None = None, title: str = "",
                             invalid_axes: Sequence[str] = ()) -> dict[str, alt.LayerChart]:
    """One :func:`warmth_competence_chart` per population present, keyed by a file stem.

    ``means``: ``profiles.group_means`` rows (any populations and groups; the
    ``warmth_competence`` space is taken). ``nonbinary``: ``profiles.nonbinary_table``
    or None; its individual terms are drawn over the chart of the population
    whose group means they are scaled to (stem ``warmth_competence_nonbinary``)
    and get no chart of their own. Empty when the space has no composites.
    """
    wc = means[means["space"] == "warmth_competence"]
    terms = None if nonbinary is None else nonbinary[nonbinary["space"] == "warmth_competence"]
    term_pops = set() if terms is None else set(terms.loc[terms["series"] == "term", "population"])
    ref_pops = set() if terms is None else set(terms.loc[terms["series"] == "group mean", "population"])
    charts = {}
    for pop in dict.fromkeys(wc["population"]):
        if pop in term_pops:
            continue
        with_terms = pop in ref_pops
        slug = re.sub(r"[^\w.-]+", "_", str(pop))
        stem = "warmth_competence_nonbinary" if with_terms else f"warmth_competence_{slug}"
        label = f"{pop} and {', '.join(sorted(term_pops))} terms" if with_terms else str(pop)
        charts[stem] = warmth_competence_chart(wc[wc["population"] == pop], terms if with_terms else None,
                                               stats=stats, title=f"{title}: {label}" if title else label,
                                               invalid_axes=invalid_axes)
    return charts


def _wide_wc(frame: pd.DataFrame, keys: list[str], value: str, extra: Sequence[str] = ()) -> pd.DataFrame:
    sub = frame[frame["dimension"].isin(["warmth", "competence"])]
    if set(sub["dimension"]) != {"warmth", "competence"}:
        raise ValueError("warmth_competence_chart needs rows for both 'warmth' and 'competence' "
                         "(profile the 'warmth_competence' space)")
    wide = sub.pivot_table(index=keys, columns="dimension", values=[value, *extra], aggfunc="first")
    wide.columns = [d if v == value else f"{d}_{v}" for v, d in wide.columns]
    return wide.reset_index()


def layer_curves_chart(curves: pd.DataFrame, measures: Sequence[str] | None = None, *,
                       title: str | None = None) -> alt.FacetChart:
    """Accuracy and the female-male difference by layer, one line per context
    source (the paper's Figure 6): rows = measure, columns = dimension.

    ``curves``: ``layers.layers_by_context`` output (columns ``context_source,
    layer, measure, dimension, value``, optional ``ci_low, ci_high``).
    """
    data = curves if measures is None else curves[curves["measure"].isin(check_word_list(measures, "measures"))]
    if data.empty:
        raise ParameterError(f"measures: no rows of curves for {measures}; its measures are "
                             f"{sorted(curves['measure'].unique())}")
    measures = [rendering.column_label(m) for m in dict.fromkeys(data["measure"])]
    data = data.assign(layer=data["layer"].astype(int), measure=data["measure"].map(rendering.column_label))
    scale = _fixed_scale(data["context_source"], _SOURCE_COLORS)
    x = alt.X("layer:Q", title="layer (0 = embedding output)")
    # the legend's swatches in the lines' full colour, not the bands' pale fill
    colour = alt.Color("context_source:N", title="context source", scale=scale,
                       legend=alt.Legend(symbolOpacity=1, symbolStrokeWidth=3))
    parts = [alt.Chart().mark_line(point=alt.OverlayMarkDef(size=18)).encode(
        x=x, y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=False)), color=colour,
        tooltip=["context_source", "layer", alt.Tooltip("value:Q", format=".3f")])]
    banded: list[str] = []
    if {"ci_low", "ci_high"} <= set(data.columns) and data["ci_low"].notna().any():
        has = data["ci_low"].notna() & data["ci_high"].notna()
        banded = [m for m in measures if has[data["measure"] == m].any()]
        # a row without an interval gets a band of no width at its line (a panel whose bounds are all missing would
        # give Vega an infinite extent); the caption names the measures that have one
        data = data.assign(ci_low=data["ci_low"].where(has, data["value"]),
                           ci_high=data["ci_high"].where(has, data["value"]))
        parts.insert(0, alt.Chart().mark_area(opacity=0.15).encode(x=x, y="ci_low:Q", y2="ci_high:Q", color=colour))
    chart = (alt.layer(*parts, data=data).properties(width=260, height=150)
             .facet(row=alt.Row("measure:N", title=None, sort=measures),
                    column=alt.Column("dimension:N", title=None, sort=_ordered(data["dimension"])))
             .resolve_scale(y="independent"))
    caption = ("One panel per measure (rows) and dimension (columns); the x axis is the layer (0 = the embedding "
               "output), each line a context source (colour)"
               + ("" if not banded else ", the shaded band its 95% confidence interval"
                  + ("" if len(banded) == len(measures) else
                     f" (on the {' and '.join(banded)} row{'s' if len(banded) > 1 else ''} only; the "
                     f"{' and '.join(m for m in measures if m not in banded)} "
                     f"row{'s have' if len(measures) - len(banded) > 1 else ' has'} none)"))
               + ". Each panel has its own y scale. Look for the layers where a measure peaks and whether the "
                 "context sources agree.")
    return captioned(chart, title or "By layer and context source", [],
                   f"Line charts of {', '.join(map(str, dict.fromkeys(data['measure'])))} across layers, one line per "
                   "context source.", caption)


def accuracy_heatmap(accuracy: pd.DataFrame, *, title: str | None = None,
                     invalid_axes: pd.DataFrame | Sequence[str] = (), columns: str = "model") -> alt.LayerChart:
    """Direction-prediction accuracy per dimension x model and cut-off (the paper's Table 2).

    ``accuracy``: ``projection.direction_accuracy`` rows (one layer) with
    ``model_id`` (added by the caller when several models are stacked; ``columns`` says what it is, as the caption
    names the columns: "model", or "context source" where a chapter stacks one model's context sources),
    ``cutoff, dimension, accuracy, n``. Colour is centred on 0.5 (not a baseline: with
    unbalanced poles the larger pole's share is). ``invalid_axes``: axes whose verdict is not
    ``supported``, as ``model_id, dimension`` pairs (``crossmodel.unreadable_axes_by_model``) or
    dimensions of every row (``axis_validity.unreadable_axes``): those cells are grey with ``†``.
    """
    data = accuracy.copy()
    if "model_id" not in data:
        data["model_id"] = "model"
    if isinstance(invalid_axes, pd.DataFrame):
        bad = set(zip(invalid_axes["model_id"], invalid_axes["dimension"]))
    else:
        bad = {(m, d) for m in data["model_id"] for d in invalid_axes}
    data["invalid"] = [(m, d) in bad for m, d in zip(data["model_id"], data["dimension"])]
    data["label"] = [f"{a:.2f}" + (INVALID_MARK.strip() if i else "")
                     for a, i in zip(data["accuracy"], data["invalid"])]
    data["row"] = data["model_id"].astype(str) + " · " + data["cutoff"].astype(str)
    dims = _ordered(data["dimension"])
    # dimensions down, model and cut-off across, each cell a fixed step: a phone's box keeps the cells as wide as
    # their printed values (a width squeezed to the box printed them over each other), and the few columns fit
    base = alt.Chart(data).encode(
        x=alt.X("row:N", title=None, sort=None, axis=alt.Axis(labelAngle=-90, orient="top", labelLimit=260)),
        y=alt.Y("dimension:N", sort=dims, title=None))
    rect = base.mark_rect().encode(
        color=alt.condition("datum.invalid", alt.value("#e6e6e6"), alt.Color(
            "accuracy:Q", title="accuracy", scale=alt.Scale(scheme="redblue", domain=[0, 1], domainMid=0.5))),
        tooltip=["model_id", "cutoff", "dimension", alt.Tooltip("accuracy:Q", format=".2f"), "n", "invalid"])
    text = base.mark_text(fontSize=11).encode(
        text="label:N",
        color=alt.condition("!datum.invalid && abs(datum.accuracy - 0.5) > 0.3", alt.value("white"),
                            alt.value("black")))
    caption = ("The share of the full dictionary's extra terms (words the seed dictionary that built the axis does "
               "not contain) whose pole (high or low) the axis predicts, per dimension (rows) and "
               f"{columns} and cut-off (columns), printed in each cell; blue above 0.5, red below. 0.5 is not chance "
               "when a dimension's poles are unbalanced (the larger pole's share is).")
    if bad:
        caption += " Grey cells with † are axes not shown to beat their label-shuffling null (or untestable)."
    return captioned((rect + text).properties(width=alt.Step(40), height=alt.Step(24)),
                   title or "Direction-prediction accuracy", [INVALID_NOTE] if bad else [],
                   f"Heat map of direction-prediction accuracy for {len(dims)} dimensions.", caption)


# --------------------------------------------------------------------------- Study 2 (BOLD) figures

# --------------------------------------------------------------------------- robustness (issue 12)

#: Colours of a specification's status on the specification curve.
_SPEC_STATUS_COLORS = {"agrees, significant": "#1b7837", "opposite, significant": "#c51b7d",
                      "positive, significant": "#377eb8", "negative, significant": "#a6761d",
                      "not significant": "#9e9e9e"}
#: Rows of the specification curve's dot matrix: (column of ``specs``, label).
_SPEC_CHOICES = (("context_source", "context"), ("layer_choice", "layer"), ("template_set", "templates"),
                ("test_choice", "test"))


def specification_curve_chart(specs: pd.DataFrame, population: str, dimension: str, *,
                              title: str | None = None) -> alt.VConcatChart:
    """The specification curve of one population and dimension (Simonsohn, Simmons & Nelson 2020).

    ``specs``: ``robustness.specification_curve(...).specs`` (columns ``population,
    dimension, context_source, layer_choice, template_set, test_choice,
    effect_size, ci_low, ci_high, p_adj, significant, expected_sign``). Above: Hedges'
    g (first group minus second) with its 95% CI per specification, sorted by g;
    colour = significant after Holm in the paper's direction, against it, or not
    significant. Below: a dot matrix marking each specification's choices.
    """
    s = specs[(specs["population"] == population) & (specs["dimension"] == dimension)]
    if s.empty:
        raise ValueError(f"specification_curve_chart: no rows for {population!r}/{dimension!r}")
    s = s.sort_values(["effect_size", "context_source", "layer_choice", "template_set", "test_choice"],
                      kind="stable").reset_index(drop=True)
    expected = int(s["expected_sign"].iloc[0])
    sign = np.sign(s["effect_size"])
    if expected:
        status = np.where(~s["significant"], "not significant",
                          np.where(sign == expected, "agrees, significant", "opposite, significant"))
    else:
        status = np.where(~s["significant"], "not significant",
                          np.where(sign > 0, "positive, significant", "negative, significant"))
    s = s.assign(rank=np.arange(len(s)), status=status)
    present = [k for k in _SPEC_STATUS_COLORS if k in set(status)]
    colour = alt.Color("status:N", title=None, scale=alt.Scale(domain=present,
                                                               range=[_SPEC_STATUS_COLORS[k] for k in present]))
    x = alt.X("rank:Q", title="specification (sorted by effect)", axis=None, scale=alt.Scale(domain=[-1, len(s)]))
    tips = ["context_source", "layer_choice", "template_set", "test_choice", alt.Tooltip("effect_size:Q", format=".2f"),
            alt.Tooltip("p_adj:Q", format=".3g")]
    # the chart carries only the columns it draws: every specification's other columns are in the CSV
    base = alt.Chart(s[["rank", "status", "effect_size", "ci_low", "ci_high", "p_adj", "context_source",
                        "layer_choice", "template_set", "test_choice"]])
    top = alt.layer(
        alt.Chart(pd.DataFrame({"y": [0.0]})).mark_rule(color="#999").encode(y="y:Q"),
        base.mark_rule(opacity=0.5).encode(x=x, y=alt.Y("ci_low:Q", title="Hedges' g (95% CI)"), y2="ci_high:Q",
                                           color=colour),
        base.mark_point(filled=True, size=18).encode(x=x, y="effect_size:Q", color=colour, tooltip=tips),
    ).properties(width=max(360, 4 * len(s)), height=180)
    rows = [{"rank": r, "choice": f"{label}: {rendering.value_label(getattr(t, col))}", "status": st}
            for t, r, st in zip(s.itertuples(), s["rank"], s["status"]) for col, label in _SPEC_CHOICES]
    matrix = pd.DataFrame(rows)
    order = [f"{label}: {rendering.value_label(v)}" for col, label in _SPEC_CHOICES for v in dict.fromkeys(specs[col])]
    bottom = alt.Chart(matrix).mark_square(size=10).encode(
        x=x, y=alt.Y("choice:N", sort=order, title=None), color=colour
    ).properties(width=max(360, 4 * len(s)), height=alt.Step(11))
    direction = {1: f"paper: {s['group_a'].iloc[0]} higher", -1: f"paper: {s['group_b'].iloc[0]} higher",
                 0: "paper: no direction"}[expected]
    caption = (f"Above: Hedges' g ({s['group_a'].iloc[0]} minus {s['group_b'].iloc[0]}) of each of the {len(s)} "
               "specifications, sorted from lowest to highest, with its 95% confidence interval (vertical line); the "
               "colour says whether it is significant after Holm's correction and in which direction. Below: a dot "
               "marks the analysis choices of the specification above it. Look for how much of the curve lies on one "
               "side of zero and which choices sit at its ends.")
    return captioned(alt.vconcat(top, bottom, spacing=4),
                   title or f"Specification curve: {population}, {dimension} ({direction})", [],
                   f"Specification curve of {len(s)} effect sizes for {population} on {dimension}, with the choices "
                   "behind each.", caption)


def axis_validity_chart(validity: pd.DataFrame, *, title: str | None = None, columns: int = 3) -> alt.FacetChart:
    """The extra terms' rank AUC per layer against the label-shuffling null, one panel per axis.

    ``validity``: ``axis_validity.axis_validity`` rows of ONE context source (columns
    ``context_source, dimension, layer, auc, null_low, null_high, null_mean, p, verdict``);
    the ``"mean"`` layer is left out of the x axis (it is in the table). Grey band: the
    null's 95% range; filled points: verdict ``supported``. An untestable axis has no line.
    """
    source = _one(validity, "context_source", "axis_validity_chart")
    # the columns it draws and its tooltips name: the rest is in the CSV
    data = validity.loc[validity["layer"] != "mean", ["dimension", "layer", "auc", "null_low", "null_high",
                                                       "null_mean", "p", "verdict", "n_high", "n_low"]]
    data = data.assign(layer=data["layer"].astype(int))
    x = alt.X("layer:Q", title="layer (0 = embedding output)", axis=alt.Axis(format="d", tickMinStep=1))
    base = alt.Chart().encode(x=x)
    parts = [
        base.mark_area(color="#bdbdbd", opacity=0.5).encode(y=alt.Y("null_low:Q", title="AUC of the extra terms",
                                                                    scale=alt.Scale(domain=[0, 1])), y2="null_high:Q"),
        base.mark_line(color="#757575", strokeDash=[4, 3]).encode(y="null_mean:Q"),
        base.mark_line(color="#222").encode(y="auc:Q"),
        base.mark_point(size=40, color="#222").encode(
            y="auc:Q", fill=alt.Fill("verdict:N", title=None, scale=alt.Scale(
                domain=["supported", "not shown", "untestable"], range=["#222", "white", "#bbbbbb"])),
            tooltip=["dimension", "layer", "verdict", alt.Tooltip("auc:Q", format=".2f"),
                     alt.Tooltip("null_low:Q", format=".2f"), alt.Tooltip("null_high:Q", format=".2f"),
                     alt.Tooltip("p:Q", format=".3f"), "n_high", "n_low"]),
    ]
    chart = (alt.layer(*parts, data=data).properties(width=200, height=130)
             .facet(facet=alt.Facet("dimension:N", title=None, sort=_ordered(data["dimension"])), columns=columns))
    caption = ("One panel per stereotype axis; the x axis is the layer (0 = the embedding output). The black line is "
               "the rank AUC of the full dictionary's extra terms (0.5 = the axis orders them at random), the grey "
               "band the 95% range and the dashed line the mean of the label-shuffling null. Filled dots: layers "
               "where the axis beats its null (verdict supported); open dots: not shown; grey: untestable. Look for "
               "axes whose line stays above the band.")
    return captioned(chart, title or f"Axis validity: AUC against a shuffled-label null ({source} contexts)", [],
                   f"Line charts of the extra terms' AUC by layer for {data['dimension'].nunique()} axes against a "
                   "shuffled-label null band.", caption)
