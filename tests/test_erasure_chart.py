"""Chapter 12's chart (``intrinsic_extrinsic.erasure_reading.tradeoff_chart``) as drawn: the SVG vl-convert renders
from its spec, read for its marks (one LEACE line per panel, the controls' points where they were run, the legend's
colours the colours drawn, no two texts on top of each other), on planted tables and on a real small run."""

from __future__ import annotations

import re

import pandas as pd
import pytest
import vl_convert as vlc
from test_crossmodel_erasure import _LARGEST_NOT_THE_RULES, SMOL, _tradeoff

from bias_utils.book import runs
from bias_utils.intrinsic_extrinsic import erasure_reading
from bias_utils.report import rendering

PANELS = ["stereotype removed", "fact removed", "cost: Δ cross-entropy (nats/token)"]
CONTROLS = {"random": "random subspace", "shuffled": "LEACE, shuffled labels",
            "selective": "selective LEACE, cross-fitted"}
#: The colours the caption may name, by their hex (named independently of the chart's own table).
COLOUR_WORDS = {"#1b9e77": "green", "#666666": "grey", "#a6761d": "brown", "#e7298a": "pink"}


def _with_controls(table: pd.DataFrame, places: list[str]) -> pd.DataFrame:
    """``table`` with each control run at ``places``: LEACE's rows there, the erasure renamed, the estimates moved
    so that each control's points lie apart."""
    leace = table[(table["erasure"] == "leace") & table["layer"].isin(places)]
    moved = [leace.assign(erasure=e, change=leace["change"] - 0.1 * (i + 1)) for i, e in enumerate(CONTROLS)]
    return pd.concat([table, *moved], ignore_index=True)


def _marks(svg: str) -> list[dict]:
    """Every line and point the SVG draws: its erasure, state, panel, kind and colour."""
    found = re.findall(r'aria-label="[^"]*erasure: ([^;"]+); hidden state: ([^;"]+); panel: ([^;"]+);[^"]*" '
                       r'role="graphics-symbol" aria-roledescription="(line mark|point)"[^>]*? '
                       r'(?:stroke|fill)="(#[0-9a-f]{6})"', svg)
    return [dict(zip(("erasure", "layer", "panel", "kind", "colour"), f)) for f in found]


def _legend(svg: str) -> dict[str, str]:
    return dict((label, fill) for fill, label in re.findall(
        r'fill="(#[0-9a-f]{6})"(?: fill-opacity="1")? stroke="#[0-9a-f]{6}" stroke-width="2" opacity="1"/></g>'
        r'<g class="mark-text role-legend-label"[^>]*><text[^>]*>([^<]+)</text>', svg))


def _zero_lines(svg: str) -> list[float]:
    """How far below the top of its panel each dashed line at 0 is drawn."""
    return [float(y) for y in re.findall(r'<line transform="translate\([-\d.]+,([-\d.]+)\)"[^>]*stroke-dasharray',
                                         svg)]


def _boxes(svg: str) -> list[tuple[str, float, float, float, float]]:
    """The box of each unrotated text the SVG writes (labels, titles, the legend), from its group's and its own
    translations, its anchor and its font size (a character at most 0.62 of the size wide)."""
    boxes, stack = [], [(0.0, 0.0)]
    for token in re.finditer(r'<g\b([^>]*)>|</g>|<text ([^>]*)>([^<]*)</text>', svg):
        if token.group(0) == "</g>":
            stack.pop()
        elif token.group(0).startswith("<g"):
            moved = re.search(r'transform="translate\(([-\d.]+),([-\d.]+)\)', token.group(1))
            dx, dy = (float(moved.group(1)), float(moved.group(2))) if moved else (0.0, 0.0)
            stack.append((stack[-1][0] + dx, stack[-1][1] + dy))
        else:
            attrs, text = token.group(2), token.group(3)
            where = re.search(r'transform="translate\(([-\d.]+),([-\d.]+)\)', attrs)
            if "rotate" in attrs or where is None or not text.strip():
                continue
            size = float(re.search(r'font-size="([\d.]+)px"', attrs).group(1))
            width = 0.62 * size * len(text)
            x, y = stack[-1][0] + float(where.group(1)), stack[-1][1] + float(where.group(2))
            anchor = re.search(r'text-anchor="(\w+)"', attrs)
            left = x - {"middle": width / 2, "end": width}.get(anchor.group(1) if anchor else "start", 0)
            boxes.append((text, left, y - size, left + width, y))
    return boxes


def _overlapping(boxes) -> list[tuple[str, str]]:
    return [(a[0], b[0]) for i, a in enumerate(boxes) for b in boxes[i + 1:]
            if a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5 and a[2] < b[4] - 0.5 and b[2] < a[4] - 0.5]


def test_the_dense_curve_is_a_line_per_panel_with_its_controls_as_points_and_no_text_on_text():
    """LEACE at every third state of 30 and at all of them, its controls at states 9 and 24 and at all: in each of
    the three panels one LEACE line through its ten single states, LEACE at every state and each control as points
    of their own, every colour the legend's; the caption names what is drawn, with its colour; no two texts
    overlap (the old scatter printed each state's number beside its point, on top of each other near 0)."""
    table = _with_controls(_tradeoff(SMOL, 30, _LARGEST_NOT_THE_RULES), ["9", "24", "all"])
    spec = erasure_reading.tradeoff_chart(table, SMOL).to_dict()
    svg = vlc.vegalite_to_svg(spec)
    marks = _marks(svg)
    lines = [m for m in marks if m["kind"] == "line mark"]
    assert [m["panel"] for m in lines] == PANELS and {m["erasure"] for m in lines} == {"LEACE"}
    legend = _legend(svg)
    assert list(legend) == ["LEACE", *CONTROLS.values()] and len(set(legend.values())) == 4
    assert all(m["colour"] == legend[m["erasure"]] for m in marks)
    for panel in PANELS:
        points = {(m["erasure"], m["layer"]) for m in marks if m["kind"] == "point" and m["panel"] == panel}
        singles = {lay for e, lay in points if e == "LEACE" and lay != "all"}
        assert singles == {str(s) for s in range(3, 31, 3)}
        assert ("LEACE", "all") in points
        for label in CONTROLS.values():
            assert {lay for e, lay in points if e == label} == {"9", "24", "all"}
    # the state the chart draws each estimate at is the table's own
    at9 = next(m for m in re.findall(r'aria-label="([^"]*)"', svg)
               if "erasure: random subspace; hidden state: 9; panel: fact removed" in m)
    assert "estimate: 0.800" in at9  # LEACE removes 90% of the fact at state 9; the planted control 0.1 less
    _, caption = rendering._figure_text(spec)
    for label, colour in legend.items():
        assert f"{label} ({COLOUR_WORDS[colour]}," in caption
    assert "random subspace (grey, squares) at hidden states 9 and 24 and every state together" in caption
    assert "LEACE (green, a line through circles, every state together a circle apart) at hidden states 3, 6" in \
        caption
    # one legend, each erasure in its colour and its shape (two legends of one field made Vega warn)
    assert len(re.findall(r'aria-roledescription="legend"', svg)) == 1
    points = spec["vconcat"][0]["layer"][-1]["encoding"]
    assert points["shape"]["legend"] == points["color"]["legend"]  # Vega warns where one of the two is disabled
    # the dashed 0 inside each panel, not on its edge where the axis is drawn
    assert len(_zero_lines(svg)) >= 3 and all(1.5 < y < 120 - 1.5 for y in _zero_lines(svg))
    boxes = _boxes(svg)
    assert {"9", "24", "all", "LEACE", "erased hidden state"} <= {b[0] for b in boxes}
    assert _overlapping(boxes) == []
    nine = next(b for b in boxes if b[0] == "9")
    assert _overlapping([nine, (nine[0], nine[1] + 3, nine[2], nine[3] + 3, nine[4])])  # the check sees an overlap


def test_a_curve_without_controls_draws_and_names_none():
    table = _tradeoff(SMOL, 30, _LARGEST_NOT_THE_RULES)
    spec = erasure_reading.tradeoff_chart(table, SMOL).to_dict()
    svg = vlc.vegalite_to_svg(spec)
    assert {m["erasure"] for m in _marks(svg)} == {"LEACE"} and list(_legend(svg)) == ["LEACE"]
    # every cost above 0: the cost panel's dashed 0 is drawn inside it all the same, not on its axis
    assert len(_zero_lines(svg)) >= 3 and all(1.5 < y < 120 - 1.5 for y in _zero_lines(svg))
    _, caption = rendering._figure_text(spec)
    assert not any(label in caption for label in CONTROLS.values())
    with pytest.raises(ValueError, match="no erasure"):
        erasure_reading.tradeoff_chart(table[table["erasure"] == "none"], SMOL)


@pytest.mark.slow
@pytest.mark.shares_quick_book
def test_a_real_chapter_12_table_is_drawn_as_its_curve(smollm, smollm_quick_bases):
    """SmolLM2's own erasure table (LEACE at states 15 and 30 and at all, its controls where the curve picks, the QUICK
    book's ``limit`` of each input): a LEACE line in each panel; each control drawn at exactly the places the table ran
    it; each drawn estimate the table's own; no text on text. The table comes from the suite's erasure cache, so
    test_crossmodel_erasure.py's test of the same table computes it once between them, and the QUICK book's chapter 12
    (the same inputs) and test_erasure.py's resumed run share its conditions at the last state and at all."""
    from bias_utils.intrinsic_extrinsic import erasure

    table = erasure.erasure_tradeoff(smollm, smollm_quick_bases["warmth_competence"], layer_step=15,
                                     limit=runs.QUICK_PARAMETERS["limit"],
                                     n_boot=100, progress=False).tradeoff
    svg = vlc.vegalite_to_svg(erasure_reading.tradeoff_chart(table, smollm.model_id).to_dict())
    marks = _marks(svg)
    assert [m["panel"] for m in marks if m["kind"] == "line mark"] == PANELS
    legend = _legend(svg)
    assert all(m["colour"] == legend[m["erasure"]] for m in marks)
    for erasure_name, label in {"leace": "LEACE", **CONTROLS}.items():
        ran = set(table.loc[table["erasure"] == erasure_name, "layer"])
        drawn = {m["layer"] for m in marks if m["erasure"] == label and m["kind"] == "point"}
        assert drawn == ran, erasure_name
    assert {"15", "30", "all"} <= {m["layer"] for m in marks if m["erasure"] == "LEACE"}
    labels = re.findall(r'aria-label="([^"]*erasure: random subspace; hidden state: all; panel: stereotype '
                        r'removed;[^"]*)"', svg)
    own = table[(table["erasure"] == "random") & (table["layer"] == "all")
                                                & (table["measure"] == "stereotype_removed")]
    assert f"estimate: {own['value'].iloc[0]:.3f}".replace("-", "−") in labels[0]
    assert _overlapping(_boxes(svg)) == []
