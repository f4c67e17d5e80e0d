"""bias_utils.book.crossmodel_erasure: chapter 12's erasure curves side by side on relative depth (chapter 09): the
table, the sentence of the cross-model answer on planted tables, and the chart's rendered marks."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import vl_convert as vlc

from bias_utils.book import crossmodel_erasure, runs
from bias_utils.core import tables
from bias_utils.intrinsic_extrinsic import erasure_statistics
from bias_utils.report import rendering

SMOL, GEMMA, QWEN = ("smollm2-135m-instruct--b179c9523d0e--fp32", "gemma-3-270m--0a1b2c3d4e5f--fp32",
                     "qwen2.5-coder-0.5b-instruct--a1b2c3d4e5f6--fp32")
#: A state where nothing moves: a little of the stereotype, its interval across 0; none of the fact; ρ unchanged.
_STILL = {"stereotype": (0.02, -0.1, 0.14), "fact": (0.0, -0.05, 0.05), "rho": (0.0, -0.05, 0.05), "cost": 0.01,
          "kept": 1.0}


def _tradeoff(model: str, depth: int, plants: dict[str, dict], step: int = 3, selectivity: bool = True
              ) -> pd.DataFrame:
    """A model's ``erasure_tradeoff`` as chapter 12 writes it (``erasure_statistics.TRADEOFF_COLUMNS``), LEACE at
    every ``step``-th state counted down from the last and at all of them, with the changes planted per state
    (``plants``: state -> parts of :data:`_STILL`); ``selectivity`` False: a table written before it was measured."""
    rows = []

    def add(erasure, layer, measure, value, baseline, low=np.nan, high=np.nan):
        rows.append({"model_id": model, "erasure": erasure, "layer": layer, "depth": depth, "rank": 1,
                     "measure": measure, "value": value, "baseline": baseline, "change": value - baseline,
                     "ci_low": low, "ci_high": high, "resampled": "occupations", "n": 60, "best": False})

    base = {"log_ratio_rho": 0.8, "cross_entropy": 3.0, "facts_right_share": 1.0}
    for measure, value in base.items():
        add("none", "none", measure, value, value)
    for layer in [str(s) for s in range(depth, 0, -step)][::-1] + ["all"]:
        p = {**_STILL, **plants.get(layer, {})}
        (s, s_low, s_high), (f, f_low, f_high), (rho, rho_low, rho_high) = p["stereotype"], p["fact"], p["rho"]
        add("leace", layer, "log_ratio_rho", 0.8 + rho, 0.8, rho_low, rho_high)
        add("leace", layer, "stereotype_removed", s, 0.0, s_low, s_high)
        add("leace", layer, "fact_removed", f, 0.0, f_low, f_high)
        if selectivity:
            add("leace", layer, "selectivity", s - f, 0.0, s_low - f_high, s_high - f_low)
        add("leace", layer, "cross_entropy", 3.0 + p["cost"], 3.0, p["cost"] / 2, 2 * p["cost"])
        add("leace", layer, "facts_right_share", p["kept"], 1.0)
    return pd.DataFrame(rows, columns=erasure_statistics.TRADEOFF_COLUMNS)


#: State 9 of 30 removes most of the stereotype and more of the fact at a cost above the rule's budget; state 24 less
#: of the stereotype and none of the fact, within it (the rule's state, selective).
_LARGEST_NOT_THE_RULES = {
    "9": {"stereotype": (0.8, 0.6, 0.95), "fact": (0.9, 0.8, 0.97), "rho": (-0.5, -0.7, -0.3), "cost": 0.3,
          "kept": 0.6},
    "24": {"stereotype": (0.3, 0.1, 0.5), "rho": (-0.15, -0.25, -0.05), "cost": 0.02}}


def test_the_curves_place_each_erased_state_on_its_models_depth():
    stacked = pd.concat([_tradeoff(SMOL, 30, _LARGEST_NOT_THE_RULES), _tradeoff(QWEN, 24, {}, selectivity=False)])
    stacked = pd.concat([stacked, _tradeoff(QWEN, 24, {}).assign(erasure="random")])  # a control: not a curve
    curves = crossmodel_erasure.erasure_curves(stacked)
    assert list(curves.columns) == list(tables.table(tables.NAMES.ERASURE_CURVES).columns)
    assert list(curves.columns) == crossmodel_erasure.CURVE_COLUMNS
    smol = curves[curves["model_id"] == SMOL]
    assert list(smol["layer"]) == [str(s) for s in range(3, 31, 3)] + ["all"]
    assert smol["relative_depth"].iloc[:-1].tolist() == pytest.approx([s / 30 for s in range(3, 31, 3)])
    assert np.isnan(smol["relative_depth"].iloc[-1])
    assert list(curves.loc[curves["model_id"] == QWEN, "layer"])[:2] == ["3", "6"]  # 24, 21, ... 3 from the lowest
    at9 = smol.set_index("layer").loc["9"]
    assert (at9["stereotype_removed"], at9["stereotype_ci_low"], at9["fact_removed"]) == (0.8, 0.6, 0.9)
    assert (at9["rho_baseline"], at9["rho_change"], at9["rho_ci_high"]) == pytest.approx((0.8, -0.5, -0.3))
    assert (at9["cross_entropy_baseline"], at9["cross_entropy_change"]) == pytest.approx((3.0, 0.3))
    # selective as chapter 12 says it, and unknown where the table has no selectivity
    assert list(smol.loc[smol["selective"].astype(bool), "layer"]) == ["24"]
    assert erasure_statistics.is_selective(stacked[stacked["model_id"] == SMOL], "leace", "24")
    old = curves[curves["model_id"] == QWEN]
    assert old["selective"].isna().all() and old["selectivity"].isna().all()
    assert crossmodel_erasure.erasure_curves(stacked.iloc[:0]).empty
    assert crossmodel_erasure.erasure_curves(pd.DataFrame(columns=["model_id"])).empty  # no model has one


def test_the_sentence_reads_the_largest_effect_where_the_rule_names_another_state():
    """The rule stated in advance names state 24 (within its budget); the largest effect (ρ's largest fall) is at
    state 9: the sentence reads state 9 on the depth, with the stereotype and the fact it removes, and lists state 24
    as selective."""
    table = _tradeoff(SMOL, 30, _LARGEST_NOT_THE_RULES)
    assert erasure_statistics.best_tradeoff_layer(table) == "24"
    assert erasure_statistics.largest_effect_layer(table) == "9"
    text = crossmodel_erasure.describe_erasure_curves(crossmodel_erasure.erasure_curves(table))
    assert ("in smollm2-135m-instruct, at hidden state 9 of 30 (30% of the way up), ρ falls by 0.50 (0.30 to 0.70), "
            "with 80% (60% to 95%) of the stereotype and 90% (80% to 97%) of the fact removed.") in text
    assert ("Selective LEACE erasures (more of the stereotype removed than of the fact, the difference's interval "
            "above 0): "
            "smollm2-135m-instruct at hidden state 24 of 30 (80% of the way up), 30% of the stereotype and 0% of the "
            "fact.") in text
    assert "third" not in text  # one model: nothing across models to say
    # a larger fall whose interval reaches 0 is named as chapter 12 names it, and the shown falls are not left out
    wide = {**_LARGEST_NOT_THE_RULES, "12": {"rho": (-0.9, -1.9, 0.1)}}
    text = crossmodel_erasure.describe_erasure_curves(crossmodel_erasure.erasure_curves(_tradeoff(SMOL, 30, wide)))
    assert ("in smollm2-135m-instruct the largest fall of ρ, 0.90 (−0.10 to 1.90) at hidden state 12 of 30 (40% of the "
            "way up) (with 2% (−10% to 14%) of the stereotype and 0% (−5% to 5%) of the fact removed), is not shown "
            "(its interval reaches 0); ρ is shown to fall at hidden state 9 of 30 (30% of the way up), by 0.50 (0.30 "
            "to 0.70) and at hidden state 24 of 30 (80% of the way up), by 0.15 (0.05 to 0.25).") in text


def test_chapter_09_names_the_state_chapter_12_names_where_the_slope_peaks_elsewhere():
    """One rule for the largest effect in the book: state 6 removes more of the stereotype's slope, state 21 lowers ρ
    the most; chapter 12 (``largest_effect_layer``) and chapter 09's sentence both name state 21."""
    table = _tradeoff(QWEN, 24, {"6": {"stereotype": (0.9, 0.7, 1.0), "rho": (-0.1, -0.2, -0.02)},
                                 "21": {"stereotype": (0.4, 0.2, 0.6), "rho": (-0.6, -0.8, -0.4)}})
    assert erasure_statistics.largest_effect_layer(table) == "21"
    text = crossmodel_erasure.describe_erasure_curves(crossmodel_erasure.erasure_curves(table))
    assert "in qwen2.5-coder-0.5b-instruct, at hidden state 21 of 24 (88% of the way up), ρ falls by 0.60" in text
    assert "hidden state 6 of 24" not in text.split(".")[0]


def test_the_sentence_says_where_the_models_disagree_and_what_a_model_without_a_shown_effect_shows():
    """Gemma's largest effect in the lower third of its depth, Qwen's in the upper; at no single state does SmolLM2
    lower ρ by a fall its interval shows, but its slope loses a share at state 15 and erasing every state together
    removes both: said, not left out."""
    stacked = pd.concat([
        _tradeoff(GEMMA, 18, {"3": {"stereotype": (0.6, 0.4, 0.8), "fact": (0.7, 0.6, 0.8),
                                    "rho": (-0.4, -0.6, -0.2)}}),
        _tradeoff(QWEN, 24, {"21": {"stereotype": (0.5, 0.2, 0.8), "rho": (-0.3, -0.5, -0.1)},
                             "9": {"stereotype": (0.3, 0.1, 0.5), "rho": (-0.1, -0.2, -0.02)}}),
        _tradeoff(SMOL, 30, {"15": {"stereotype": (0.4, 0.1, 0.7), "rho": (-0.2, -0.45, 0.05)},
                             "all": {"stereotype": (0.9, 0.8, 1.0), "fact": (0.95, 0.9, 1.0)}})])
    text = crossmodel_erasure.describe_erasure_curves(crossmodel_erasure.erasure_curves(stacked))
    assert ("in gemma-3-270m, at hidden state 3 of 18 (17% of the way up), ρ falls by 0.40 (0.20 to 0.60), with 60% "
            "(40% to 80%) of the stereotype") in text
    assert "in qwen2.5-coder-0.5b-instruct, at hidden state 21 of 24 (88% of the way up), ρ falls by 0.30" in text
    assert ("in smollm2-135m-instruct no single-state erasure is shown to lower ρ (its largest fall, 0.20 (−0.05 to "
            "0.45), is at hidden state 15 of 30 (50% of the way up), with 40% (10% to 70%) of the stereotype and 0% "
            "(−5% to 5%) of the fact removed), though the stereotype's slope is shown to lose 40% (10% to 70%) at "
            "hidden state 15 of 30 (50% of the way up); erased at every hidden state together it loses 90% (80% to "
            "100%) of the stereotype and 95% (90% to 100%) of the fact.") in text
    assert text.endswith("The models' largest effects lie in different thirds of their depth: the "
                         "lower third in gemma-3-270m; the upper third in qwen2.5-coder-0.5b-instruct.")
    assert ("Selective LEACE erasures (more of the stereotype removed than of the fact, the difference's interval "
            "above 0): "
            "qwen2.5-coder-0.5b-instruct at hidden state 9 of 24 (38% of the way up), 30% of the stereotype and 0% of "
            "the fact, and at hidden state 21 of 24 (88% of the way up), 50% of the stereotype and 0% of the fact; "
            "smollm2-135m-instruct at hidden state 15 of 30 (50% of the way up), 40% of the stereotype and 0% of the "
            "fact.") in text


def test_an_erasure_shown_to_strengthen_the_stereotype_is_said_so():
    """The QUICK book's one state removed −42% (−123% to −9%) of the stereotype: read as its "largest removal" alone it
    passed for a small one; the sentence says the erasure is shown to strengthen it there."""
    table = _tradeoff(SMOL, 30, {"30": {"stereotype": (-0.42, -1.23, -0.09), "fact": (0.18, 0.16, 0.2)}}, step=1000)
    text = crossmodel_erasure.describe_erasure_curves(crossmodel_erasure.erasure_curves(table))
    assert ("in smollm2-135m-instruct ρ falls at no single erased state; it is shown to strengthen the stereotype "
            "instead at hidden state 30 of 30 (100% of the way up) (−42% (−123% to −9%) of it removed)") in text
    neutral = _tradeoff(SMOL, 30, {}, step=1000)
    assert "strengthen" not in crossmodel_erasure.describe_erasure_curves(crossmodel_erasure.erasure_curves(neutral))


def test_the_eraser_meant_to_spare_the_fact_is_read_beside_leace():
    """No LEACE state is selective, but the selective eraser is, at the last state: the table holds its rows, the
    sentence says both (a "no erasure is selective" that left it out would contradict chapter 12), and the chart draws
    LEACE alone."""
    entangled = {"9": {"stereotype": (0.8, 0.6, 0.95), "fact": (0.9, 0.8, 0.97), "rho": (-0.5, -0.7, -0.3)}}
    table = _tradeoff(GEMMA, 18, entangled)
    spared = _tradeoff(GEMMA, 18, {"18": {"stereotype": (0.11, 0.05, 0.2), "fact": (0.01, 0.0, 0.02)}})
    spared = spared[spared["layer"].isin(["9", "18"])].assign(erasure="selective")
    curves = crossmodel_erasure.erasure_curves(pd.concat([table, spared]))
    assert list(curves["erasure"]) == ["leace"] * 7 + ["selective"] * 2
    assert list(curves.loc[curves["selective"].astype(bool), ["erasure", "layer"]].itertuples(index=False)) == [
        ("selective", "18")]
    text = crossmodel_erasure.describe_erasure_curves(curves)
    assert "**No model's LEACE erasure is selective**" in text
    assert ("The eraser meant to spare the fact (chapter 12's LEACE of the occupations' BLS majority with the gendered "
            "terms' direction spared, cross-fitted): in gemma-3-270m it is selective at hidden state 18 of 18 (100% of "
            "the way up): 11% (5% to 20%) of the stereotype and 1% (0% to 2%) of the fact.") in text
    assert "at hidden state 9 of 18 (50% of the way up), ρ falls by 0.50 (0.30 to 0.70), with 80% (60% to 95%)" in text
    not_spared = crossmodel_erasure.erasure_curves(pd.concat([table, spared[spared["layer"] == "9"]]))
    assert ("in gemma-3-270m it is not selective at any state it was run at (state 9)"
            in crossmodel_erasure.describe_erasure_curves(not_spared))
    spec = crossmodel_erasure.erasure_curves_chart(curves).to_dict()
    drawn = pd.DataFrame(next(iter(spec["datasets"].values())))
    assert len(drawn) == 2 * 6  # LEACE's six single states in each panel, no selective row


def test_the_sentence_says_the_models_agree_only_where_the_table_does():
    middle = {"stereotype": (0.5, 0.3, 0.7), "fact": (0.6, 0.5, 0.7), "rho": (-0.3, -0.5, -0.1)}
    stacked = pd.concat([_tradeoff(SMOL, 30, {"15": middle}), _tradeoff(GEMMA, 18, {"9": middle}),
                         _tradeoff(QWEN, 24, {"12": middle}, selectivity=False)])
    text = crossmodel_erasure.describe_erasure_curves(crossmodel_erasure.erasure_curves(stacked))
    assert text.endswith("In all 3 models the largest effect lies in the middle third of their depth.")
    assert ("**No model's LEACE erasure measured for it is selective**: at no state does LEACE remove more of the "
            "stereotype than of the fact with the difference's interval above 0 (qwen2.5-coder-0.5b-instruct: no "
            "selectivity in its table, written before chapter 12 measured it).") in text
    # one model's largest removal moved to the upper third: no longer all in one
    moved = pd.concat([stacked[stacked["model_id"] != GEMMA], _tradeoff(GEMMA, 18, {"15": middle})])
    text = crossmodel_erasure.describe_erasure_curves(crossmodel_erasure.erasure_curves(moved))
    assert "middle third of their depth." not in text
    assert text.endswith("the middle third in smollm2-135m-instruct and qwen2.5-coder-0.5b-instruct; the upper third "
                         "in gemma-3-270m.")


@pytest.mark.parametrize(("layer", "depth", "third"), [("1", 30, "lower"), ("10", 30, "lower"), ("11", 30, "middle"),
                                                        ("20", 30, "middle"), ("21", 30, "upper"), ("30", 30, "upper"),
                                                        ("8", 24, "lower"), ("9", 24, "middle")])
def test_a_state_lies_in_the_third_of_the_depth_its_whole_numbers_say(layer, depth, third):
    assert crossmodel_erasure._third(pd.Series({"layer": layer, "depth": depth})) == third


def _lines(svg: str) -> list[tuple[str, str]]:
    """``(model, stroke)`` of each line the SVG draws, in the order drawn."""
    return re.findall(r'aria-label="[^"]*model: ([^;"]+);[^"]*" role="graphics-symbol" '
                      r'aria-roledescription="line mark" d="[^"]*" stroke="(#[0-9a-f]{6})"', svg)


def _points_per_panel(svg: str) -> list[int]:
    """The points of each panel's line layer, panels in the order drawn."""
    starts = [m.end() for m in re.finditer(r'<g class="mark-symbol role-mark [^"]*"', svg)]
    return [svg[s:svg.find('<g class="mark-', s)].count('aria-roledescription="point"') for s in starts]


def test_the_chart_draws_a_line_per_model_in_each_panel_in_its_legends_colour():
    stacked = pd.concat([_tradeoff(GEMMA, 18, {"3": {"stereotype": (0.6, 0.4, 0.8)}}), _tradeoff(QWEN, 24, {}),
                         _tradeoff(SMOL, 30, {})])
    curves = crossmodel_erasure.erasure_curves(stacked)
    curves.loc[(curves["model_id"] == SMOL) & (curves["layer"] == "30"), "fact_removed"] = np.nan  # not drawn
    spec = crossmodel_erasure.erasure_curves_chart(curves).to_dict()
    svg = vlc.vegalite_to_svg(spec)
    names = ["gemma-3-270m", "qwen2.5-coder-0.5b-instruct", "smollm2-135m-instruct"]
    headers = re.findall(r"aria-label=\"Title text '(stereotype removed|fact removed)'\"", svg)
    assert headers == ["stereotype removed", "fact removed"]
    lines = _lines(svg)
    assert [m for m, _ in lines] == names * 2  # one line per model in each of the two panels
    legend = dict((label, colour) for colour, label in re.findall(
        r'fill="(#[0-9a-f]{6})" stroke="#[0-9a-f]{6}" stroke-width="3" opacity="1"/></g>'
        r'<g class="mark-text role-legend-label"[^>]*><text[^>]*>([^<]+)</text>', svg))
    assert list(legend) == names and len(set(legend.values())) == 3
    assert all(legend[m] == stroke for m, stroke in lines)
    # a point per single state (6 + 8 + 10), every state together not drawn, a missing share not drawn
    assert _points_per_panel(svg) == [24, 23]
    alt_text, caption = rendering._figure_text(spec)
    assert "Two panels: \"stereotype removed\"" in caption and "\"fact removed\", the share of the gap" in caption
    assert f"colour named in the legend ({', '.join(names)})" in caption
    assert "Erasing every state together has no depth and is not drawn: the table below gives it for each model" \
        in caption
    assert alt_text.startswith("Line charts of the share of the stereotype and of the fact")
    with pytest.raises(ValueError, match="no single-state erasure"):
        crossmodel_erasure.erasure_curves_chart(curves[curves["layer"] == "all"])


@pytest.mark.slow
@pytest.mark.shares_quick_book
def test_a_real_chapter_12_table_reads_as_its_curve(smollm, smollm_quick_bases):
    """SmolLM2's own erasure table (LEACE at states 15 and 30 and at all, the QUICK book's ``limit`` of each input;
    the selective eraser where chapter 12 ran it): one curve row per LEACE and selective erasure, each value the
    table's own, LEACE placed at 50% and 100% of its depth; its sentence and chart are made. The table comes from the
    suite's erasure cache, so test_erasure_chart.py's test of the same table computes it once between them, and the
    QUICK book's chapter 12 (the same inputs) shares its conditions at the last state and at all."""
    from bias_utils.intrinsic_extrinsic import erasure

    table = erasure.erasure_tradeoff(smollm, smollm_quick_bases["warmth_competence"], layer_step=15,
                                     limit=runs.QUICK_PARAMETERS["limit"],
                                     n_boot=100, progress=False).tradeoff
    all_curves = crossmodel_erasure.erasure_curves(table)
    ran = table.loc[table["erasure"] == "selective", "layer"].drop_duplicates()
    assert list(all_curves.loc[all_curves["erasure"] == "selective", "layer"]) == list(ran)
    for _, row in all_curves.iterrows():
        own = table[(table["erasure"] == row["erasure"]) & (table["layer"] == row["layer"])].set_index("measure")
        assert row["stereotype_removed"] == own.at["stereotype_removed", "value"]
        assert row["fact_ci_high"] == own.at["fact_removed", "ci_high"]
        assert row["rho_change"] == own.at["log_ratio_rho", "change"]
        assert row["cross_entropy_ci_low"] == own.at["cross_entropy", "ci_low"]
        assert row["selective"] == erasure_statistics.is_selective(table, row["erasure"], row["layer"])
    curves = all_curves[all_curves["erasure"] == "leace"].set_index("layer")
    assert list(curves.index) == ["15", "30", "all"]
    assert curves["relative_depth"].tolist()[:2] == [0.5, 1.0] and set(curves["depth"]) == {smollm.n_layers}
    text = crossmodel_erasure.describe_erasure_curves(all_curves)
    assert text.startswith("Where erasing the gender concept at one hidden state weakens the stereotype the most")
    assert "in smollm2-135m-instruct" in text and "third" not in text
    svg = vlc.vegalite_to_svg(crossmodel_erasure.erasure_curves_chart(all_curves).to_dict())
    assert [m for m, _ in _lines(svg)] == ["smollm2-135m-instruct"] * 2
