"""Across models (notebook ``09_cross_model``): chapter 12's erasure curves side by side on relative depth.

Each decoder's chapter 12 erases its linear gender concept with LEACE at single hidden states and at all of them
(``intrinsic_extrinsic.erasure_statistics.tradeoff_table``). The models have different numbers of hidden states, so a
state is placed by its *relative depth*, the state over the model's hidden states above the token embeddings (state 15
of 30 and state 12 of 24 both lie halfway up). Per model and erased state: :func:`erasure_curves` the table,
:func:`erasure_curves_chart` the stereotype and the fact removed along the depth, and
:func:`describe_erasure_curves` the cross-model answer in words, all from the stacked ``erasure_tradeoff`` tables.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from ..core.precision import number_text, percent_text
from ..core.results import display_name
from ..intrinsic_extrinsic.erasers import ALL
from ..intrinsic_extrinsic.erasure_reading import curve_layers
from ..intrinsic_extrinsic.erasure_statistics import is_selective, largest_fall
from ..report import plots

__all__ = ["describe_erasure_curves", "erasure_curves", "erasure_curves_chart"]

#: The trade-off table's measures the curves read, each with the prefix of its columns in :func:`erasure_curves`.
_MEASURES = {"log_ratio_rho": "rho", "stereotype_removed": "stereotype", "fact_removed": "fact",
             "selectivity": "selectivity", "cross_entropy": "cross_entropy"}
#: The shares removed are changes themselves (their baseline 0): the table keeps their value, the others' change.
_SHARES = ("stereotype_removed", "fact_removed", "selectivity")
#: The erasures the curves hold: LEACE (the curve) and the eraser meant to spare the fact (chapter 12's selective
#: eraser, cross-fitted), where a table has it; the random and shuffled controls stay in chapter 12.
_ERASURES = {"leace": "LEACE", "selective": "the eraser meant to spare the fact"}
CURVE_COLUMNS = [
    "model_id", "erasure", "layer", "depth", "relative_depth",
    "stereotype_removed", "stereotype_ci_low", "stereotype_ci_high",
    "fact_removed", "fact_ci_low", "fact_ci_high",
    "selectivity", "selectivity_ci_low", "selectivity_ci_high", "selective",
    "rho_baseline", "rho_change", "rho_ci_low", "rho_ci_high",
    "cross_entropy_baseline", "cross_entropy_change", "cross_entropy_ci_low", "cross_entropy_ci_high",
]
#: The two panels of :func:`erasure_curves_chart`, as their headers read: the column each draws.
_PANELS = {"stereotype removed": "stereotype", "fact removed": "fact"}
_THIRDS = ("lower", "middle", "upper")


def erasure_curves(tradeoff: pd.DataFrame) -> pd.DataFrame:
    """Per model and erasure (``erasure``: LEACE, and chapter 12's selective eraser where its table has it; one hidden
    state, or ``all`` of them together) of the stacked ``erasure_tradeoff`` tables (chapter 12), one row
    (:data:`CURVE_COLUMNS`): ``layer`` (the erased state as text, or ``all``), ``depth``
    (the model's hidden states above the token embeddings), ``relative_depth`` (``layer`` / ``depth``; NaN for
    ``all``); ``stereotype_removed`` (the share of the next-word log-ratio's slope on the BLS share removed),
    ``fact_removed`` (the share of the female − male noun gap removed) and ``selectivity`` (the first minus the
    second), each with its 95% paired interval; ``selective`` (the selectivity and its interval above 0,
    ``erasure_statistics.is_selective``; missing where the table has no selectivity row); ``rho_baseline`` and
    ``rho_change`` (ρ of the next-word log-ratio with the BLS share without erasure, and its change) with the
    change's interval; ``cross_entropy_baseline`` and ``cross_entropy_change`` (nats per token on neutral text) with
    its interval. A measure a model's table lacks (written before it was measured) is NaN. Models in the order read,
    LEACE first, states from the lowest, ``all`` last."""
    if not len(tradeoff):
        return pd.DataFrame(columns=CURVE_COLUMNS).astype({"selective": "boolean"})
    kept = tradeoff[tradeoff["erasure"].isin(list(_ERASURES))]
    rows = []
    for (model, erasure), own in kept.groupby(["model_id", "erasure"], sort=False):
        depth = int(own["depth"].iloc[0])
        places = sorted(dict.fromkeys(own["layer"].astype(str)), key=lambda s: (s == ALL, int(s) if s != ALL else 0))
        for layer in places:
            here = own[own["layer"].astype(str) == layer].drop_duplicates("measure").set_index("measure")
            row = {"model_id": model, "erasure": erasure, "layer": layer, "depth": depth,
                   "relative_depth": float("nan") if layer == ALL else int(layer) / depth}
            for measure, prefix in _MEASURES.items():
                got = here.loc[measure] if measure in here.index else pd.Series(dtype=float)
                if measure in _SHARES:  # named as the table names them: stereotype_removed, fact_removed, selectivity
                    row[measure] = got.get("value", float("nan"))
                else:
                    row[f"{prefix}_baseline"] = got.get("baseline", float("nan"))
                    row[f"{prefix}_change"] = got.get("change", float("nan"))
                row[f"{prefix}_ci_low"] = got.get("ci_low", float("nan"))
                row[f"{prefix}_ci_high"] = got.get("ci_high", float("nan"))
            row["selective"] = is_selective(own, erasure, layer) if "selectivity" in here.index else pd.NA
            rows.append(row)
    table = pd.DataFrame(rows, columns=CURVE_COLUMNS)
    order = {e: i for i, e in enumerate(_ERASURES)}
    table = table.sort_values("erasure", key=lambda e: e.map(order), kind="stable")
    models = {m: i for i, m in enumerate(dict.fromkeys(table["model_id"]))}
    table = table.sort_values("model_id", key=lambda m: m.map(models), kind="stable").reset_index(drop=True)
    return table.astype({"selective": "boolean"})


def _where(row) -> str:
    """"at hidden state 15 of 30 (50% of the way up)", or "at every hidden state together", as chapter 12 says it."""
    if row.layer == ALL:
        return "at every hidden state together"
    return f"at hidden state {row.layer} of {int(row.depth)} ({percent_text(row.relative_depth)} of the way up)"


def _share(row, prefix: str) -> str:
    """"72% (60% to 81%)": a share removed with its interval."""
    value = row.stereotype_removed if prefix == "stereotype" else row.fact_removed
    return f"{percent_text(value)} ({percent_text(getattr(row, f'{prefix}_ci_low'))} to " \
           f"{percent_text(getattr(row, f'{prefix}_ci_high'))})"


def _third(row) -> str:
    """The third of the model's depth a state lies in: lower up to a third, middle up to two thirds, upper above
    (in whole numbers, so that state 10 of 30 is in the lower third)."""
    return _THIRDS[min(2, max(0, -(-3 * int(row.layer) // int(row.depth)) - 1))]


def _peak(own: pd.DataFrame) -> tuple[pd.Series | None, bool]:
    """``(row, shown)``: a model's single state where ρ of the next-word log-ratio with the BLS share falls the most
    (chapter 12's rule, ``erasure_statistics.largest_fall``), and whether the fall's interval lies below 0; None where
    ρ falls at no single state."""
    singles = own[own["layer"] != ALL].dropna(subset=["rho_change"])
    layer = largest_fall(singles.set_index("layer")["rho_change"])
    if layer is None:
        return None, False
    row = singles[singles["layer"] == layer].iloc[0]
    return row, bool(row.rho_ci_high < 0)


def _fall(row) -> str:
    """"0.54 (0.34 to 0.77)": the fall of ρ at a state (minus its change), with its interval."""
    return f"{number_text(-row.rho_change)} ({number_text(-row.rho_ci_high)} to {number_text(-row.rho_ci_low)})"


def _shown_elsewhere(own: pd.DataFrame) -> str:
    """For a model where no single state is shown to lower ρ, what is shown all the same: the single states where the
    share of the stereotype's slope removed lies above 0 (another measure of the same stereotype), and what erasing
    every state together removes where that is shown; neither is left unsaid."""
    removes = own[(own["layer"] != ALL) & (own["stereotype_ci_low"] > 0)]
    text = "" if removes.empty else (", though the stereotype's slope is shown to lose " + " and ".join(
        f"{_share(r, 'stereotype')} {_where(r)}" for r in removes.itertuples()))
    everywhere = own[(own["layer"] == ALL) & (own["stereotype_ci_low"] > 0)]
    for r in everywhere.itertuples():
        text += (f"; erased {_where(r)} it loses {_share(r, 'stereotype')} of the stereotype and {_share(r, 'fact')} "
                 "of the fact")
    return text


def _strengthened(own: pd.DataFrame) -> str:
    """The single states where the erasure is shown to *add* to the stereotype (a share removed whose interval lies
    below 0): a negative "largest removal" read alone would pass for a small one."""
    up = own[(own["layer"] != ALL) & (own["stereotype_ci_high"] < 0)]
    if up.empty:
        return ""
    return "; it is shown to strengthen the stereotype instead " + " and ".join(
        f"{_where(r)} ({_share(r, 'stereotype')} of it removed)" for r in up.itertuples())


def _names(models) -> str:
    names = [display_name(m) for m in models]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def describe_erasure_curves(curves: pd.DataFrame) -> str:
    """Markdown, the cross-model answer from :func:`erasure_curves`: per model, chapter 12's largest effect (the single
    hidden state where LEACE lowers ρ of the next-word log-ratio with the BLS share the most,
    ``erasure_statistics.largest_fall``; where its fall's interval reaches 0, that no state is shown to lower ρ, and
    what is shown instead), placed on the model's depth, with how much of the stereotype and of the fact it removes
    there; which models' erasures are selective (more of the stereotype removed than of the fact, the difference's
    interval above 0); and whether the models' largest shown effects lie in the same third of their depth."""
    if curves.empty:
        return "No model of this build has chapter 12's erasure curve."
    spared = curves[curves["erasure"] == "selective"]
    curves = curves[curves["erasure"] == "leace"]
    clauses, peaks = [], {}
    for model, own in curves.groupby("model_id", sort=False):
        row, shown = _peak(own)
        name = display_name(model)
        if row is None:
            measured = own[own["layer"] != ALL]["rho_change"].notna().any()
            clauses.append(f"in {name} ρ falls at no single erased state" + _strengthened(own) + _shown_elsewhere(own)
                           if measured else f"{name}'s table holds no single-state erasure measured on ρ")
        elif shown:
            peaks[model] = row
            clauses.append(f"in {name}, {_where(row)}, ρ falls by {_fall(row)}, with {_share(row, 'stereotype')} of "
                           f"the stereotype and {_share(row, 'fact')} of the fact removed")
        else:
            removed = (f"with {_share(row, 'stereotype')} of the stereotype and {_share(row, 'fact')} of the fact "
                       "removed")
            falls = own[(own["layer"] != ALL) & (own["rho_ci_high"] < 0)]
            if falls.empty:
                clauses.append(f"in {name} no single-state erasure is shown to lower ρ (its largest fall, {_fall(row)},"
                               f" is {_where(row)}, {removed})" + _strengthened(own) + _shown_elsewhere(own))
            else:
                clauses.append(f"in {name} the largest fall of ρ, {_fall(row)} {_where(row)} ({removed}), is not shown"
                               " (its interval reaches 0); ρ is shown to fall " + " and ".join(
                                   f"{_where(r)}, by {_fall(r)}" for r in falls.itertuples()))
    text = ("Where erasing the gender concept at one hidden state weakens the stereotype the most (chapter 12's rule: "
            "the state where ρ of the next-word log-ratio with the BLS share falls the most), and how much of the "
            "stereotype (the log-ratio's slope on the BLS share) and of the fact it removes there: "
            + "; ".join(clauses) + ".")
    return text + _selective(curves) + _spared(spared) + _depths(peaks, curves["model_id"].nunique())


def _selective(curves: pd.DataFrame) -> str:
    """Which models' LEACE erasures are selective, and which tables cannot say."""
    unmeasured = [m for m, own in curves.groupby("model_id", sort=False) if own["selective"].isna().all()]
    found = curves[curves["selective"].fillna(False).astype(bool)]
    if found.empty:
        text = (f" **No model's LEACE erasure{' measured for it' if unmeasured else ''} is selective**: at no state "
                "does LEACE remove more of the stereotype than of the fact with the difference's interval above 0")
    else:
        text = (" Selective LEACE erasures (more of the stereotype removed than of the fact, the difference's interval "
                "above 0): ") + \
            "; ".join(f"{display_name(model)} " + ", and ".join(
                f"{_where(r)}, {percent_text(r.stereotype_removed)} of the stereotype and "
                f"{percent_text(r.fact_removed)} of the fact" for r in own.itertuples())
                for model, own in found.groupby("model_id", sort=False))
    if unmeasured:
        tables = "its table" if len(unmeasured) == 1 else "their tables"
        text += f" ({_names(unmeasured)}: no selectivity in {tables}, written before chapter 12 measured it)"
    return text + "."


def _spared(spared: pd.DataFrame) -> str:
    """What the eraser meant to spare the fact did, per model that ran it: where it is selective, or that it is not
    at any state it was measured at (chapter 12 runs it only at the states it reads)."""
    if spared.empty:
        return ""
    parts = []
    for model, own in spared.groupby("model_id", sort=False):
        found = own[own["selective"].fillna(False).astype(bool)]
        if found.empty:
            places = ", ".join("every state together" if r.layer == ALL else f"state {r.layer}"
                               for r in own.itertuples())
            parts.append(f"in {display_name(model)} it is not selective at any state it was run at ({places})")
        else:
            parts.append(f"in {display_name(model)} it is selective " + ", and ".join(
                f"{_where(r)}: {_share(r, 'stereotype')} of the stereotype and {_share(r, 'fact')} of the fact"
                for r in found.itertuples()))
    return (" The eraser meant to spare the fact (chapter 12's LEACE of the occupations' BLS majority with the "
            "gendered terms' direction spared, cross-fitted): " + "; ".join(parts) + ".")


def _depths(peaks: dict[str, pd.Series], n_models: int) -> str:
    """Whether the models' largest shown effects (falls of ρ) lie in the same third of their depth."""
    if n_models < 2:
        return ""
    if len(peaks) < 2:
        return (" Fewer than two models show a fall of ρ at one state, so where it lies is not compared across "
                "them.")
    thirds = {m: _third(r) for m, r in peaks.items()}
    if len(set(thirds.values())) > 1:
        return (" The models' largest effects lie in different thirds of their depth: "
                + "; ".join(f"the {t} third in {_names([m for m in thirds if thirds[m] == t])}"
                            for t in _THIRDS if t in thirds.values()) + ".")
    which = ("both models" if n_models == 2 else f"all {n_models} models") if len(peaks) == n_models else \
        f"the {len(peaks)} models of {n_models} that show one ({_names(peaks)})"
    return (f" In {which} the largest effect lies in the {next(iter(thirds.values()))} third of "
            "their depth.")


def erasure_curves_chart(curves: pd.DataFrame) -> alt.FacetChart:
    """Two panels, "stereotype removed" and "fact removed": per model (colour, one line each) the share LEACE removes
    at each single hidden state, across the state's relative depth, with its 95% interval (a bar). Erasing every state
    together has no depth and is not drawn (:func:`erasure_curves` holds it)."""
    curves = curves[curves["erasure"] == "leace"]
    singles = plots.drawable(curves[curves["layer"] != ALL], ["relative_depth"])
    models = [display_name(m) for m in dict.fromkeys(singles["model_id"])]
    long = pd.concat([singles.assign(panel=panel, model=singles["model_id"].map(display_name),
                                     share=singles["stereotype_removed" if prefix == "stereotype" else "fact_removed"],
                                     low=singles[f"{prefix}_ci_low"], high=singles[f"{prefix}_ci_high"])
                      for panel, prefix in _PANELS.items()], ignore_index=True)
    long = plots.drawable(long, ["share"])[["model", "layer", "depth", "relative_depth", "panel", "share", "low",
                                            "high"]]
    if long.empty:
        raise ValueError("erasure_curves_chart: no single-state erasure with a share removed to draw")
    x = alt.X("relative_depth:Q", title="relative depth (state / states)",
              scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format=".0%"))
    y = alt.Y("share:Q", title="share removed", axis=alt.Axis(format=".0%"))
    colour = alt.Color("model:N", title="model", scale=alt.Scale(domain=models,
                                                                 range=[plots.MODEL_COLORS[i % len(plots.MODEL_COLORS)]
                                                                        for i in range(len(models))]),
                       legend=alt.Legend(symbolOpacity=1, symbolStrokeWidth=3))
    tooltip = ["model", "layer", "depth", alt.Tooltip("relative_depth:Q", format=".0%"),
               alt.Tooltip("share:Q", format=".0%"), alt.Tooltip("low:Q", format=".0%"),
               alt.Tooltip("high:Q", format=".0%")]
    zero, bars, lines = curve_layers(x, y, colour, tooltip)
    chart = alt.layer(zero, bars, lines, data=long).properties(width=240, height=200).facet(
        column=alt.Column("panel:N", title=None, sort=list(_PANELS)))
    left_out = int(curves["layer"].eq(ALL).sum())
    caption = ("Two panels: \"stereotype removed\", the share of the next-word log-ratio's slope on the BLS share of "
               "women that LEACE removes, and \"fact removed\", the share of the gap between female and male nouns "
               "such as queen and king it removes. Across: the erased hidden state as a share of the model's hidden "
               "states (its relative depth, so that models of different depths line up); one line per model, its "
               f"colour named in the legend ({', '.join(models)}); a bar is the 95% interval resampling occupations "
               "(stereotype) or noun pairs (fact); the dashed line is 0, nothing removed."
               + (f" Erasing every state together has no depth and is not drawn: the table below gives it for "
                  f"{'each model' if left_out > 1 else 'the model'}." if left_out else "")
               + " Look at where each model's stereotype curve peaks, and whether its fact curve peaks with it.")
    return plots.captioned(chart, "Erasing the gender concept: the curves side by side on relative depth", [],
                           f"Line charts of the share of the stereotype and of the fact that LEACE removes at each "
                           f"hidden state against relative depth, one line per model ({', '.join(models)}).", caption)
