"""Chapter 12's erasure read for a reader: the sentences of its first screen and of the front page, the curve's table
and the chart, all from the trade-off table (``intrinsic_extrinsic.erasure_statistics``).

What the sentences read, in this order: the curve's largest effect (:func:`erasure_statistics.largest_effect_layer`)
in plain words, where in the model it is (the hidden state and its share of the model's depth), how much of the
stereotype goes (ρ before → after, the stereotype slope's share removed), what it costs (nats per token and as a share
of the model's cross-entropy), how much of the fact goes, whether the erasure is selective and what the controls did
there; then the state the rule stated before the results names (:func:`erasure_statistics.best_tradeoff_layer`),
which may be another; then the erasure at every state. A fall that is not shown at one state never stands for the
chapter's answer where another state shows one.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from ..core.precision import interval_text, number_text, percent_text
from ..core.results import display_name, first_row
from ..report import plots
from .erasers import ALL
from .erasure_statistics import MAX_COST, MIN_FACTS, best_tradeoff_layer, is_selective, largest_effect_layer

__all__: list[str] = []

_ERASURE_LABELS = {"leace": "LEACE", "random": "random subspace", "shuffled": "LEACE, shuffled labels",
                   "selective": "selective LEACE, cross-fitted"}
_CONTROL_NAMES = {"random": "a random subspace of the same rank", "shuffled": "LEACE fitted on shuffled labels"}
#: How far below its best state the unhooked probe may read at a state before its reading there after an erasure says
#: little (accuracy; a tenth of the way from chance to perfect, twice).
_WEAK_PROBE = 0.1
#: The rule's history, said in the chapter: what its first version named that it no longer does (issue 58).
_FIRST_RULE_ROSE = 0.18


def _row(table: pd.DataFrame, erasure: str, layer: str, measure: str) -> pd.Series:
    return first_row(table, erasure=erasure, layer=layer, measure=measure)


def _change_text(row: pd.Series) -> str:
    """"−0.65 (−0.80 to −0.49)": a change with its interval."""
    return (f"{number_text(row['change'], signed=True)} "
            f"({interval_text(row['ci_low'], row['ci_high'], row['change'])})")


def _share_text(row: pd.Series) -> str:
    """"72% (60% to 81%)": a share removed with its interval."""
    return f"{percent_text(row['value'])} ({percent_text(row['ci_low'])} to {percent_text(row['ci_high'])})"


def _falls(table: pd.DataFrame, layer: str) -> bool:
    """Whether ρ's fall at ``layer`` (LEACE) is shown: its interval below 0."""
    return float(_row(table, "leace", layer, "log_ratio_rho")["ci_high"]) < 0


def _depth(table: pd.DataFrame) -> int:
    return int(table["depth"].iloc[0])


def _where(table: pd.DataFrame, layer: str) -> str:
    """"at hidden state 15 of 30 (50% of the way up)", or "at every hidden state together"."""
    if layer == ALL:
        return "at every hidden state together"
    return f"at hidden state {layer} of {_depth(table)} ({percent_text(int(layer) / _depth(table))} of the way up)"


def _cost(table: pd.DataFrame, erasure: str, layer: str, signed: bool = True) -> str:
    """"+0.18 nats per token (+5% of its cross-entropy)"."""
    ce = _row(table, erasure, layer, "cross_entropy")
    share = ce["change"] / ce["baseline"]
    return (f"{number_text(ce['change'], signed=signed)} nats per token "
            f"({'+' if share > 0 else ''}{percent_text(share)} of its cross-entropy)")


def _selective_text(table: pd.DataFrame, layer: str) -> str:
    if is_selective(table, "leace", layer):
        return "more of the stereotype than of the fact: a selective erasure"
    return "not selective (it does not remove more of the stereotype than of the fact)"


def _rule_text() -> str:
    return (f"the single-state erasure that adds at most {number_text(MAX_COST)} nats per token and keeps at least "
            f"{percent_text(MIN_FACTS)} of the gendered nouns on their side, with the largest fall of ρ, if ρ falls")


def describe_tradeoff(table: pd.DataFrame, model_id: str, probe: pd.DataFrame | None = None) -> str:
    """Markdown, the chapter's first screen: the unhooked model; the curve's largest effect with its controls, the
    stereotype and the fact it removes, and what it does inside (:func:`_inside`, with ``probe``,
    ``erasure_statistics.probe_table``); the rule's state; the erasure at every state; which erasures are selective;
    the rule's history."""
    name = display_name(model_id)
    base = {m: _row(table, "none", "none", m)["value"] for m in
            ("log_ratio_rho", "facts_right_share", "probe_accuracy", "cross_entropy", "stereotype_slope", "facts_gap")}
    n_occupations = int(_row(table, "none", "none", "log_ratio_rho")["n"])
    n_nouns = 2 * int(_row(table, "none", "none", "facts_right_share")["n"])
    singles = sorted({lay for e, lay in zip(table["erasure"], table["layer"]) if e == "leace" and lay != ALL}, key=int)
    text = (f"Without erasure, {name}'s next-word log-ratio follows the BLS share of women with ρ = "
            f"{number_text(base['log_ratio_rho'])} over the {n_occupations} occupations (a slope of "
            f"{number_text(base['stereotype_slope'])} nats per 100 points of share: the *stereotype*); the female "
            f"noun of a pair such as queen and king is ahead of the male by {number_text(base['facts_gap'])} nats "
            f"(the *fact*), {percent_text(base['facts_right_share'])} of the {n_nouns} nouns on their side; a probe "
            f"tells the held-out names' gender with accuracy {number_text(base['probe_accuracy'])} (at its best "
            f"hidden state); its cross-entropy on neutral text is {number_text(base['cross_entropy'])} nats per "
            f"token. LEACE was applied at {len(singles)} single hidden state{'' if len(singles) == 1 else 's'} of "
            f"{_depth(table)} "
            f"({', '.join(singles)}) and at all of them together.")
    largest, best = largest_effect_layer(table), best_tradeoff_layer(table)
    shown = [lay for lay in singles if _falls(table, lay)]
    if largest is None:
        text += " **At no single hidden state does erasing the gender concept lower ρ.**"
    else:
        rho = _row(table, "leace", largest, "log_ratio_rho")
        verdict = ("**The curve's largest effect**" if largest in shown else
                   "**No single-state erasure is shown to lower ρ where it falls most**")
        text += (f" {verdict} is {_where(table, largest)}: ρ goes from {number_text(rho['baseline'])} to "
                 f"{number_text(rho['value'])}, a change of {_change_text(rho)}, at {_cost(table, 'leace', largest)}. "
                 f"It removes {_share_text(_row(table, 'leace', largest, 'stereotype_removed'))} of the stereotype "
                 f"and {_share_text(_row(table, 'leace', largest, 'fact_removed'))} of the fact: "
                 f"{_selective_text(table, largest)}.")
        controls = [(e, _row(table, e, largest, "log_ratio_rho")) for e in ("random", "shuffled")]
        controls = [(e, r) for e, r in controls if r is not None]
        if controls:
            text += (" At the same state " + " and ".join(
                f"{_CONTROL_NAMES[e]} changes ρ by "
                f"{_change_text(r)} at {_cost(table, e, largest)}" for e, r in controls) + ".")
        text += _selective_reading(table, largest)
        if largest not in shown and shown:
            text += f" The fall is shown at {'state' if len(shown) == 1 else 'states'} {', '.join(shown)}."
        if probe is not None:
            text += _inside(table, probe, largest)
    text += _rule_reading(table, best, largest)
    everywhere = _row(table, "leace", ALL, "log_ratio_rho")
    if everywhere is not None:
        kept = _row(table, "leace", ALL, "facts_right_share")["value"]
        text += (f" Erased {_where(table, ALL)}: ρ changes by {_change_text(everywhere)} at "
                 f"{_cost(table, 'leace', ALL)}, {percent_text(kept)} of the gendered nouns stay on their side.")
    text += _selective_list(table)
    text += (f" *The rule changed once since this chapter's first version*: that version could name a state where ρ "
             f"rose (it named one where ρ rose by {number_text(_FIRST_RULE_ROSE)} on a two-point grid); since then a "
             "state where ρ does not fall never qualifies. Because the rule weighs cost and facts, it need not name "
             "the largest effect, so this page reads both. Intervals: 95%, resampling occupations (ρ, slope), pairs "
             "(fact), sentences (cross-entropy), paired across the two conditions.")
    return text


def _inside(table: pd.DataFrame, probe: pd.DataFrame, layer: str) -> str:
    """What the erasure at ``layer`` does inside: the held-out names' probe there before and after, and the
    occupations' position ρ before and after, with why a position read on the unhooked model's ruler may rise."""
    unhooked = probe[probe["erasure"] == "none"].set_index("state")["accuracy"]
    after = first_row(probe, erasure="leace", layer=layer, state=int(layer))
    position = _row(table, "leace", layer, "position_rho")
    shuffled = _row(table, "shuffled", layer, "position_rho")
    best = int(unhooked.idxmax())
    weak = "" if unhooked[int(layer)] >= unhooked[best] - _WEAK_PROBE else (
        " The probe reads the names' gender there less well than at its best state before any erasure, so what it "
        "reads after says little about that state.")
    return (f" Inside: without erasure a probe reads the held-out names' gender at state {layer} with accuracy "
            f"{number_text(unhooked[int(layer)])} (at its best, state {best}, {number_text(unhooked[best])}); with "
            f"LEACE there, {number_text(after['accuracy'])} (chance 0.5).{weak} The occupations' position on the "
            f"female − male direction follows the BLS share with ρ {number_text(position['baseline'])} before and "
            f"{number_text(position['value'])} after"
            + (f" ({number_text(shuffled['value'])} after shuffled-label LEACE)" if shuffled is not None else "")
            + ". That position is read on the unhooked model's direction, averaged over every hidden state: it says "
            "where the erased nouns now lie on the old ruler. LEACE, fitted on names and terms and not on these nouns, "
            "removes the gender concept's linear trace, not every spread of the nouns along that ruler, so the "
            "position can rise or fall without the concept coming back; the probe, not the position, says whether "
            "the concept is gone.")


def _selective_list(table: pd.DataFrame) -> str:
    """Which erasures meant to remove something are selective (LEACE and the selective eraser; the controls are not
    candidates), each with how much of the stereotype and of the fact it removes: a selective erasure may remove
    little of either."""
    selective = [(e, lay) for e, lay in dict.fromkeys(zip(table["erasure"], table["layer"]))
                 if e in ("leace", "selective") and is_selective(table, e, lay)]
    if not selective:
        return " **No erasure measured is selective**: none removes more of the stereotype than of the fact."
    return (" Selective (more of the stereotype removed than of the fact, the difference's interval above 0): " +
            "; ".join(f"{_ERASURE_LABELS[e]} {_where(table, lay)}, "
                      f"{percent_text(_row(table, e, lay, 'stereotype_removed')['value'])} of the stereotype and "
                      f"{percent_text(_row(table, e, lay, 'fact_removed')['value'])} of the fact"
                      for e, lay in selective) + ".")


def _selective_reading(table: pd.DataFrame, layer: str) -> str:
    """The eraser meant to be selective at ``layer``: what it removes of each, and whether it is selective."""
    rho = _row(table, "selective", layer, "log_ratio_rho")
    if rho is None:
        return ""
    return (f" The eraser meant to spare the fact (LEACE of the occupations' BLS majority with the gendered terms' "
            f"female − male direction spared, fitted on half the occupations and measured on the other half, both "
            f"ways) changes ρ there by {_change_text(rho)} and removes "
            f"{_share_text(_row(table, 'selective', layer, 'stereotype_removed'))} of the stereotype and "
            f"{_share_text(_row(table, 'selective', layer, 'fact_removed'))} of the fact: "
            f"{'selective' if is_selective(table, 'selective', layer) else 'not selective'}.")


def _rule_reading(table: pd.DataFrame, best: str | None, largest: str | None) -> str:
    if best is None:
        return f" No single-state erasure meets the rule stated before the results ({_rule_text()})."
    if best == largest:
        return f" The rule stated before the results ({_rule_text()}) names the same state."
    rho = _row(table, "leace", best, "log_ratio_rho")
    return (f" The rule stated before the results ({_rule_text()}) names hidden state {best}, where ρ changes by "
            f"{_change_text(rho)}{'' if _falls(table, best) else ', a fall not shown'}, at "
            f"{_cost(table, 'leace', best)}.")


def front_page_clause(table: pd.DataFrame, who: str) -> str:
    """The front page's clause for one decoder (``who``: its name or link), in plain words: the curve's largest effect
    (where, ρ before → after, the cost, the fact removed, the controls), then the rule's state where it is another."""
    largest, best = largest_effect_layer(table), best_tradeoff_layer(table)
    singles = sorted({lay for e, lay in zip(table["erasure"], table["layer"]) if e == "leace" and lay != ALL}, key=int)
    shown = [lay for lay in singles if _falls(table, lay)]
    if largest is None or not shown:
        text = (f"in {who}, erasing the gender concept at no single hidden state is shown to weaken how its next "
                "word follows the share of women in an occupation")
        if largest is not None:
            rho = _row(table, "leace", largest, "log_ratio_rho")
            text += f" (the largest fall, {_where(table, largest)}: {_change_text(rho)})"
    else:
        layer = largest if largest in shown else min(shown, key=lambda s: _row(table, "leace", s, "log_ratio_rho")
                                                      ["change"])
        rho = _row(table, "leace", layer, "log_ratio_rho")
        fact = _row(table, "leace", layer, "fact_removed")["value"]
        controls = [_row(table, e, layer, "log_ratio_rho") for e in ("random", "shuffled")]
        text = (f"in {who}, erasing the gender concept {_where(table, layer)} weakens how its next word follows the "
                f"share of women in an occupation, ρ from {number_text(rho['baseline'])} to "
                f"{number_text(rho['value'])}, at {_cost(table, 'leace', layer)}")
        stereotype = _row(table, "leace", layer, "stereotype_removed")["value"]
        text += (f", removing less of the gap between words like queen and king ({percent_text(fact)}) than of the "
                 f"stereotype ({percent_text(stereotype)}): a selective erasure" if is_selective(table, "leace", layer)
                 else
                 f", but it also removes {percent_text(fact)} of the gap between words like queen and king")
        if all(c is not None for c in controls):
            text += (f"; a random subspace and shuffled labels there change ρ by "
                     f"{number_text(controls[0]['change'], signed=True)} and "
                     f"{number_text(controls[1]['change'], signed=True)}")
    if best is not None and best != largest:
        text += (f"; the rule stated in advance names state {best}, where the fall is "
                 f"{'shown' if _falls(table, best) else 'not shown'}")
    elif best is None:
        text += "; no state meets the rule stated in advance"
    return text


def curve_table(table: pd.DataFrame) -> pd.DataFrame:
    """The curve as the chapter shows it: per erasure and place, Δρ, the stereotype and the fact removed and the
    change in cross-entropy, each with its interval, and whether it is selective."""
    rows = []
    for erasure, layer in dict.fromkeys(zip(table["erasure"], table["layer"])):
        if erasure == "none":
            continue
        rho, ce = _row(table, erasure, layer, "log_ratio_rho"), _row(table, erasure, layer, "cross_entropy")
        rows.append({"erasure": _ERASURE_LABELS[erasure], "hidden state": layer,
                     "share of depth": "all" if layer == ALL else percent_text(int(layer) / _depth(table)),
                     "Δρ": _change_text(rho), "stereotype removed": _share_text(
                         _row(table, erasure, layer, "stereotype_removed")),
                     "fact removed": _share_text(_row(table, erasure, layer, "fact_removed")),
                     "Δ cross-entropy (nats/token)": _change_text(ce),
                     "selective": is_selective(table, erasure, layer)})
    return pd.DataFrame(rows)


def probe_by_state(probe: pd.DataFrame, layers: list[str]) -> pd.DataFrame:
    """The held-out names' probe accuracy at every hidden state (rows): without erasure, and under LEACE at each of
    ``layers`` and at every state together (columns)."""
    kept = probe[(probe["erasure"] == "none") | ((probe["erasure"] == "leace") & probe["layer"].isin([*layers, ALL]))]
    names = {layer: "without erasure" if layer == "none" else f"LEACE {_where_short(layer)}" for layer in kept["layer"]}
    wide = kept.assign(condition=kept["layer"].map(names)).pivot_table(index="state", columns="condition",
                                                                       values="accuracy", sort=False)
    return wide.rename_axis(index="hidden state", columns=None)


def _where_short(layer: str) -> str:
    return "at every state" if layer == ALL else f"at state {layer}"


#: Each erasure's colour and point shape in the chart, and the colour as the caption names it.
_ERASURE_MARKS = {"LEACE": ("#1b9e77", "circle", "green"), "random subspace": ("#666666", "square", "grey"),
                  "LEACE, shuffled labels": ("#a6761d", "triangle-up", "brown"),
                  "selective LEACE, cross-fitted": ("#e7298a", "diamond", "pink")}
#: The chart's panels, top to bottom: the trade-off table's measure each draws, and its axis title.
_CHART_PANELS = {"stereotype_removed": "stereotype removed", "fact_removed": "fact removed",
                 "cross_entropy": "cost: Δ cross-entropy (nats/token)"}


def curve_layers(x: alt.X, y: alt.Y, colour: alt.Color, tooltip: list) -> list[alt.Chart]:
    """The layers of one panel of an erasure curve, without data (the caller's layer gives it, with columns ``low``
    and ``high``): a dashed rule at 0, each point's 95% interval as a bar where it has one, and the curve as a line
    through its points. Chapter 12's chart and chapter 09's curves side by side draw their panels with them."""
    zero = alt.Chart().mark_rule(color="#999", strokeDash=[4, 3]).encode(y=alt.datum(0))
    bars = alt.Chart().transform_filter("isValid(datum.low) && isValid(datum.high)").mark_rule(
        opacity=0.5).encode(x=x, y="low:Q", y2="high:Q", color=colour)
    line = alt.Chart().mark_line(point=alt.OverlayMarkDef(filled=True, size=40)).encode(
        x=x, y=y, color=colour, tooltip=tooltip)
    return [zero, bars, line]


def _chart_rows(table: pd.DataFrame) -> tuple[pd.DataFrame, float]:
    """Per erasure, place and panel the estimate (a share removed, or the change in cross-entropy) with its
    interval, and where across it is drawn: a single state at its number (a control a little beside LEACE, so that
    their bars do not cover each other), every state together apart to the right of the last. Returns the rows and
    that place of ``all``."""
    depth = _depth(table)
    apart = depth + max(2.0, depth / 10)
    beside = {"LEACE": 0.0, "random subspace": -1.0, "LEACE, shuffled labels": 1.0,
              "selective LEACE, cross-fitted": 2.0}
    rows = []
    for (erasure, layer), own in table[table["erasure"] != "none"].groupby(["erasure", "layer"], sort=False):
        label = _ERASURE_LABELS[erasure]
        at = (apart if layer == ALL else float(layer)) + beside[label] * depth / 60
        for measure, panel in _CHART_PANELS.items():
            row = own[own["measure"] == measure]
            if len(row):
                rows.append({"erasure": label, "layer": "all" if layer == ALL else layer, "at": at, "panel": panel,
                             "curve": label == "LEACE" and layer != ALL, "estimate": float(row["change"].iloc[0]),
                             "low": float(row["ci_low"].iloc[0]), "high": float(row["ci_high"].iloc[0])})
    columns = ["erasure", "layer", "at", "panel", "curve", "estimate", "low", "high"]
    return plots.drawable(pd.DataFrame(rows, columns=columns), ["estimate"]), apart


def tradeoff_chart(table: pd.DataFrame, model_id: str) -> alt.VConcatChart:
    """Three panels, top to bottom: the share of the stereotype removed, the share of the fact removed, and the
    cost (the change in cross-entropy per token on neutral text); across, the erased hidden state, every state
    together (``all``) apart on the right. LEACE at single states is a line through its points, each with its paired
    95% interval (a bar); LEACE at every state and the controls (random subspace, shuffled labels, the selective
    eraser) are points of their own colour and shape, where they were run."""
    rows, apart = _chart_rows(table)
    if rows.empty:
        raise ValueError("tradeoff_chart: no erasure with a share removed or a cost to draw")
    drawn = [e for e in _ERASURE_MARKS if e in set(rows["erasure"])]
    singles = sorted({int(s) for s in rows["layer"] if s != "all"})
    ticks = [*singles, apart] if (rows["layer"] == "all").any() else singles
    margin = max(1.0, _depth(table) / 20)
    scale = alt.Scale(domain=[min(ticks) - margin, max(ticks) + margin], nice=False)
    # one legend for both: each erasure's symbol in its colour and shape
    legend = alt.Legend(symbolOpacity=1, symbolStrokeWidth=2, columns=2, columnPadding=24)
    colour = alt.Color("erasure:N", title="erasure", legend=legend,
                       scale=alt.Scale(domain=drawn, range=[_ERASURE_MARKS[e][0] for e in drawn]))
    shape = alt.Shape("erasure:N", title="erasure", legend=legend,
                      scale=alt.Scale(domain=drawn, range=[_ERASURE_MARKS[e][1] for e in drawn]))
    tooltip = ["erasure", alt.Tooltip("layer:N", title="hidden state"), "panel",
               alt.Tooltip("estimate:Q", format=".3f"), alt.Tooltip("low:Q", format=".3f"),
               alt.Tooltip("high:Q", format=".3f")]
    panels = []
    for measure, panel in _CHART_PANELS.items():
        share = measure != "cross_entropy"
        x = alt.X("at:Q", title="erased hidden state" if not share else None, scale=scale,
                  axis=alt.Axis(values=ticks, labelExpr=f"datum.value == {apart} ? 'all' : datum.label"))
        # padded, so that the dashed 0 of a panel whose estimates are all above it is not drawn on its edge
        y = alt.Y("estimate:Q", title=panel if share else ["cost: Δ cross-entropy", "(nats per token)"],
                  axis=alt.Axis(format=".0%" if share else ".2f"),
                  scale=alt.Scale(padding=8))
        zero, bars, line = curve_layers(x, y, colour, tooltip)
        points = alt.Chart().transform_filter("!datum.curve").mark_point(filled=True, size=60, opacity=1).encode(
            x=x, y=y, color=colour, shape=shape, tooltip=tooltip)
        panels.append(alt.layer(zero, bars, line.transform_filter("datum.curve"), points,
                                data=rows[rows["panel"] == panel]).properties(width=420, height=120))
    chart = alt.vconcat(*panels, spacing=12).resolve_scale(x="shared")
    where = {e: sorted(set(rows.loc[rows["erasure"] == e, "layer"]), key=lambda s: (s == "all", s.zfill(4)))
             for e in drawn}
    said = [f"{e} ({_ERASURE_MARKS[e][2]}, {_shape_text(e, where[e])}) at {_places(where[e])}" for e in drawn]
    caption = ("Three panels, one erasure of the gender concept per point: \"stereotype removed\", the share of the "
               "next-word log-ratio's slope on the BLS share of women that the erasure removes; \"fact removed\", the "
               "share of the gap between female and male nouns such as queen and king it removes; and the cost, how "
               "many nats per token worse the model predicts neutral text. Across: the erased hidden state; \"all\", "
               "apart on the right, erases every state together. Drawn: " + "; ".join(said) + ". Bars: 95% intervals "
               "of the paired changes; the dashed line is 0. Look for states where the stereotype panel is high, the "
               "fact panel low and the cost near 0; the controls should remove little.")
    return plots.captioned(chart, f"{model_id}: erasing the gender concept, what goes and what it costs", [],
                           "Line charts along the erased hidden state of the share of the stereotype and of the fact "
                           "that erasing the gender concept removes, and of its cost in cross-entropy.", caption)


def _places(layers: list[str]) -> str:
    """"hidden states 15 and 30 and every state together"."""
    states = [s for s in layers if s != "all"]
    text = "" if not states else (f"hidden state {states[0]}" if len(states) == 1 else
                                  f"hidden states {', '.join(states[:-1])} and {states[-1]}")
    if "all" in layers:
        text += (" and " if text else "") + "every state together"
    return text


def _shape_text(erasure: str, layers: list[str]) -> str:
    """How an erasure is drawn: LEACE at several single states as a line through circles (every state together a
    circle apart), anything else as points of its shape."""
    singles = [s for s in layers if s != "all"]
    if erasure == "LEACE" and len(singles) > 1:
        return "a line through circles" + (", every state together a circle apart" if "all" in layers else "")
    return _ERASURE_MARKS[erasure][1].replace("-up", "") + "s"
