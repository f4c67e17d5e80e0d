"""Charts render offline to SVG/PNG/Vega-Lite JSON and show what they claim:
pole labels, significance marks, individual non-binary terms."""

import json
import re

import altair as alt
import numpy as np
import pandas as pd
import pytest
import vl_convert as vlc

from bias_utils.profiles import population_profiles as pr
from bias_utils.profiles.populations import load_populations
from bias_utils.report import plots, rendering

DIMS7 = ["sociability", "morality", "ability", "agency", "status", "politics", "religion"]


@pytest.fixture(scope="module")
def table():
    """Real population words with seeded values; female names clearly warmer/more sociable."""
    rng = np.random.default_rng(1)
    rows = []
    for pop in ("names", "terms", "nonbinary"):
        for gi, (group, words) in enumerate(load_populations(pop).items()):
            for w in words[:30]:
                for space, dims in (("dimensions", DIMS7), ("warmth_competence", ["warmth", "competence"])):
                    for d in dims:
                        shift = 1.0 if (pop == "names" and gi == 0 and d in ("warmth", "sociability")) else 0.0
                        rows.append((pop, group, w, space, "mean", d, rng.normal(shift, 1)))
    tab = pd.DataFrame(rows, columns=["population", "group", "word", "space", "layer", "dimension", "value"])
    return pr._standardise(tab, {"nonbinary": "terms"})


def _png_size(data: bytes):
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_profile_chart_labels_and_significance(table, tmp_path):
    st, gm = pr.profile_stats(table), pr._group_means(table)
    names = gm[(gm.population == "names") & (gm.space == "dimensions")]
    files = plots.save(plots.profile_chart(names, st), tmp_path / "profile.svg")
    assert sorted(files) == ["png", "svg", "vl.json"]
    svg = files["svg"].read_text()
    assert "high sociability *" in svg and "low sociability *" in svg
    assert "traditional" in svg and "progressive" in svg and "non-religious" in svg
    for r in st[(st.population == "names") & (st.space == "dimensions")].itertuples():
        label = plots._pole_labels(r.dimension)[1]
        assert (f">{label} *<" in svg) == (r.p_holm < 0.05) and (f">{label}<" in svg) == (r.p_holm >= 0.05)
    w, h = _png_size(files["png"].read_bytes())
    assert w > 600 and h > 300
    spec = json.loads(files["vl.json"].read_text())
    assert {r["group"] for d in spec["datasets"].values() for r in d if "group" in r} == {"female", "male"}


def test_warmth_competence_chart_shows_nonbinary_terms(table, tmp_path):
    gm = pr._group_means(table)
    nb = pr._nonbinary_table(table)
    chart = plots.warmth_competence_chart(gm[gm.population == "terms"], nb, stats=pr.profile_stats(table))
    svg = plots.save(chart, tmp_path / "wc")["svg"].read_text()
    for word in load_populations("nonbinary")["nonbinary"][:3]:
        assert f">{word}<" in svg
    assert "high warmth" in svg
    st = pr.profile_stats(table)
    names_only = st[st.population == "names"].assign(p_holm=0.0)
    chart = plots.warmth_competence_chart(gm[gm.population == "terms"], stats=names_only)
    assert "(* names)" not in plots.save(chart, tmp_path / "wc_terms")["svg"].read_text()
    chart = plots.warmth_competence_chart(gm[gm.population == "names"], stats=names_only)
    assert "high warmth → (* names)" in plots.save(chart, tmp_path / "wc_names")["svg"].read_text()
    with pytest.raises(ValueError, match="competence"):
        plots.warmth_competence_chart(gm[gm.dimension == "warmth"])


def test_profile_chart_refuses_mixed_populations(table):
    gm = pr._group_means(table)
    with pytest.raises(ValueError, match="population"):
        plots.profile_chart(gm[gm.space == "dimensions"])


def test_heatmap_and_layer_curves_render(tmp_path):
    rng = np.random.default_rng(2)
    acc = pd.DataFrame([(m, c, d, rng.uniform(0.3, 0.95), 40) for m in ("smollm2", "minilm")
                        for c in ("raw", "centred") for d in DIMS7 + ["warmth", "competence"]],
                       columns=["model_id", "cutoff", "dimension", "accuracy", "n"])
    svg = plots.save(plots.accuracy_heatmap(acc), tmp_path / "heat")["svg"].read_text()
    assert "smollm2 · centred" in svg and f"{acc.accuracy.iloc[0]:.2f}" in svg
    curves = pd.DataFrame([(s, layer, m, d, rng.normal(), np.nan, np.nan) for s in ("dictionary", "none")
                           for layer in range(7) for m in ("accuracy_raw", "female_minus_male")
                           for d in ("warmth", "competence")],
                          columns=["context_source", "layer", "measure", "dimension", "value", "ci_low", "ci_high"])
    files = plots.save(plots.layer_curves_chart(curves), tmp_path / "curves.png")
    svg = files["svg"].read_text()
    assert ">Female − male<" in svg and ">Accuracy (raw)<" in svg and "female_minus_male" not in svg
    assert _png_size(files["png"].read_bytes())[0] > 500
    # each source keeps its fixed colour, and the legend shows it at full strength (not the band's pale fill)
    spec = json.loads(files["vl.json"].read_text())
    colours = [layer["encoding"]["color"] for layer in spec["spec"]["layer"]]
    assert all(c["scale"]["range"] == [plots._SOURCE_COLORS["dictionary"], plots._SOURCE_COLORS["none"]]
               for c in colours)
    assert all(c["legend"]["symbolOpacity"] == 1 for c in colours)


@pytest.mark.parametrize("seed", range(20))
def test_repel_is_the_nearest_placement_with_the_gap(seed):
    """Against an independent solver (SLSQP on the same quadratic programme): the labels keep the gap,
    stay within the bounds, and move no more than they must."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 9))
    values = rng.normal(0, 1, n) * rng.choice([0.05, 1.0])
    gap, low, high = 0.2, -1.5, 1.5
    got = plots.repel(values, gap, low, high)
    order = np.argsort(values, kind="stable")
    assert np.all(np.diff(got[order]) >= gap - 1e-9) and got.min() >= low - 1e-9 and got.max() <= high + 1e-9
    cons = [{"type": "ineq", "fun": (lambda p, i=i: p[order[i + 1]] - p[order[i]] - gap)} for i in range(n - 1)]
    ref = minimize(lambda p: ((p - values) ** 2).sum(), np.clip(values, low, high), method="SLSQP",
                   bounds=[(low, high)] * n, constraints=cons, options={"ftol": 1e-12, "maxiter": 500})
    assert ref.success
    assert ((got - values) ** 2).sum() <= ((ref.x - values) ** 2).sum() + 1e-7
    np.testing.assert_allclose(got, ref.x, atol=1e-4)


def test_nonbinary_term_names_never_overprint(table, tmp_path):
    """The single terms cluster (on the real chart 17 names sat within a few pixels): their names stand in a
    column at least one line apart, each joined to its diamond."""
    gm, nb = pr._group_means(table), pr._nonbinary_table(table)
    chart = plots.warmth_competence_chart(gm[gm.population == "terms"], nb)
    spec = json.loads(plots.save(chart, tmp_path / "wc")["vl.json"].read_text())
    rows = next(d for d in spec["datasets"].values() if d and "label_y" in d[0])
    assert {r["word"] for r in rows} == set(nb.loc[nb["series"] == "term", "word"])
    ys = np.sort([r["label_y"] for r in rows])
    domain = next(layer["encoding"]["y"]["scale"]["domain"] for layer in spec["layer"]
                  if "scale" in layer["encoding"].get("y", {}))
    px = np.diff(ys) * spec["height"] / (domain[1] - domain[0])
    assert px.min() >= 13 - 1e-6
    assert len({r["label_x"] for r in rows}) == 1  # one column


def test_pole_labels():
    assert plots._pole_labels("politics") == ("progressive", "traditional")
    assert plots._pole_labels("religion") == ("non-religious", "religious")
    assert plots._pole_labels("warmth") == ("low warmth", "high warmth")


def test_warmth_competence_charts_adapt_to_the_populations_present(table, tmp_path):
    """A user population of three groups (not called 'names') gets its own chart; the
    non-binary terms are drawn over the terms' chart and get none of their own."""
    three = table[table.population == "terms"].copy()
    three["population"] = "my_groups"
    words = list(dict.fromkeys(three["word"]))
    three["group"] = three["word"].map({w: ("alpha", "beta", "gamma")[i % 3] for i, w in enumerate(words)})
    gm = pr._group_means(pd.concat([table, three], ignore_index=True))
    charts = plots.warmth_competence_charts(gm, pr._nonbinary_table(table), title="m")
    assert list(charts) == ["warmth_competence_names", "warmth_competence_nonbinary", "warmth_competence_my_groups"]
    svg = plots.save(charts["warmth_competence_my_groups"], tmp_path / "mine")["svg"].read_text()
    assert all(f">{g}<" in svg for g in ("alpha", "beta", "gamma")) and "m: my_groups" in svg
    only_mine = plots.warmth_competence_charts(pr._group_means(three))
    assert list(only_mine) == ["warmth_competence_my_groups"]
    assert plots.warmth_competence_charts(gm[gm.space == "dimensions"]) == {}


def _fills(svg: str) -> set[str]:
    return set(re.findall(r'fill="(#[0-9a-fA-F]{6})"', svg)) | set(re.findall(r'stroke="(#[0-9a-fA-F]{6})"', svg))


@pytest.mark.slow
def test_invalid_axes_are_greyed_and_never_starred(table, tmp_path):
    """An axis that fails its null is drawn grey with a dagger, loses its star, and the subtitle says why."""
    st, gm = pr.profile_stats(table), pr._group_means(table)
    names = gm[(gm.population == "names") & (gm.space == "dimensions")]
    st = st.assign(p_holm=0.0)  # every axis would be starred
    svg = plots.save(plots.profile_chart(names, st, invalid_axes=["sociability", "not-a-dimension"]),
                     tmp_path / "p")["svg"].read_text()
    assert ">high sociability †<" in svg and ">low sociability †<" in svg and "sociability *" not in svg
    assert ">high morality *<" in svg and plots.INVALID_NOTE in svg
    assert plots.INVALID_GREY in _fills(svg)
    plain = plots.save(plots.profile_chart(names, st), tmp_path / "q")["svg"].read_text()
    assert plots.INVALID_GREY not in _fills(plain) and plots.INVALID_NOTE not in plain
    wc = gm[(gm.population == "names") & (gm.space == "warmth_competence")]
    svg = plots.save(plots.warmth_competence_chart(wc, stats=st, invalid_axes=["competence"]),
                     tmp_path / "wc")["svg"].read_text()
    assert "high competence → †" in svg and "high warmth → (* names)" in svg and plots.INVALID_NOTE in svg
    acc = pd.DataFrame([("m", c, d, 0.7, 40) for c in ("raw", "centred") for d in ("status", "religion")],
                       columns=["model_id", "cutoff", "dimension", "accuracy", "n"])
    bad = pd.DataFrame({"model_id": ["m"], "dimension": ["religion"]})
    svg = plots.save(plots.accuracy_heatmap(acc, invalid_axes=bad), tmp_path / "h")["svg"].read_text()
    assert svg.count(">0.70†<") == 2 and svg.count(">0.70<") == 2 and plots.INVALID_NOTE in svg
    every_row = plots.save(plots.accuracy_heatmap(acc, invalid_axes=["status"]), tmp_path / "r")["svg"].read_text()
    assert every_row.count(">0.70†<") == 2


def test_every_chart_has_alt_text_and_a_caption_that_explains_its_marks(table):
    st, gm = pr.profile_stats(table), pr._group_means(table)
    names = gm[(gm.population == "names") & (gm.space == "dimensions")]
    profile = json.loads(plots.profile_chart(names, st, title="minilm-l6--53aa51172d14--fp32: names").to_json())
    assert profile["title"] == "minilm-l6: names"
    alt_text, caption = rendering._figure_text(profile)
    assert "95% confidence interval" in caption and "Holm" in caption
    assert alt_text.startswith("Dot plot") and "names groups (female, male)" in alt_text
    charts = [plots.warmth_competence_chart(gm[gm.population == "terms"]),
              plots.accuracy_heatmap(pd.DataFrame({"cutoff": ["0.1"] * 2, "dimension": ["warmth", "competence"],
                                                   "accuracy": [0.8, 0.4], "n": [10, 10]})),
              plots.layer_curves_chart(pd.DataFrame({"context_source": ["dictionary"] * 2, "layer": [0, 1],
                                                     "measure": ["accuracy"] * 2, "dimension": ["warmth"] * 2,
                                                     "value": [0.6, 0.7]}))]
    for chart in charts:
        alt_text, caption = rendering._figure_text(json.loads(chart.to_json()))
        assert len(alt_text) > 30 and len(caption) > 80, alt_text
    # composed with others (as crossmodel.profile_grid does), the charts stay valid Vega-Lite
    assert json.loads(__import__("altair").vconcat(*charts).to_json())["vconcat"][0]["description"]


def test_a_group_has_one_colour_by_its_name_never_by_its_position():
    female = plots.group_scale(["female_dominated", "male_dominated"])
    male_first = plots.group_scale(["male-dominated", "female-dominated"])
    assert female.domain == ["female-dominated", "male-dominated"]  # the display labels the data must hold
    assert dict(zip(female.domain, female.range)) == dict(zip(male_first.domain, male_first.range))
    assert plots._group_color("female-majority") == plots._group_color("female") != plots._group_color("male")
    # a group without a fixed colour gets one by its name: the same in any chart
    assert plots.group_scale(["nonbinary", "male"]).range[0] == plots.group_scale(["female", "nonbinary"]).range[1]


def test_linear_ticks_are_the_fewest_round_steps_inside_the_data():
    """The link chart's axis runs on past the points (a column of names): its ticks stay within the data, at the
    smallest step of 1, 2 or 5 times a power of ten that gives at most six of them, a bound on the step a tick."""
    rng = np.random.default_rng(3)
    cases = [(0.0, 1.0), (-0.35, 0.62), (0.4963, 0.5041), (-120.0, 3.0)] + [
        tuple(sorted(rng.normal(0, 10.0 ** rng.integers(-3, 3), 2))) for _ in range(200)]
    for low, high in cases:
        ticks = plots.linear_ticks(low, high)
        steps = np.diff(ticks)
        step = steps[0]
        mantissa = step / 10 ** np.floor(np.log10(step) + 1e-9)
        assert round(mantissa, 9) in (1, 2, 5), (low, high, ticks)
        assert np.allclose(steps, step, rtol=1e-6) and 2 <= len(ticks) <= 6, (low, high, ticks)
        assert low - 1e-9 * step <= ticks[0] < low + step and high - step < ticks[-1] <= high + 1e-9 * step
        assert np.allclose(np.array(ticks) / step, np.round(np.array(ticks) / step), atol=1e-6)
        smaller = {1: 0.5, 2: 0.5, 5: 0.4}[round(mantissa)] * step  # the next round step down
        assert (high - low) / smaller > 6 - 1e-9 or np.floor(high / smaller) - np.ceil(low / smaller) + 1 > 6
    assert plots.linear_ticks(0.0, 1.0) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]


def test_log_ticks_are_one_two_five_times_powers_of_ten_around_the_data_and_one():
    """One scheme for every log axis: 1-2-5 per decade while few, else decades (every second or third when there
    are many); 1 always; at most 7; the data and 1 within a decade of the ticks' range; printed with thousands
    separators (cases: the published audit's Wald interval 10.07 to 60.37, a gap around 1, the headline's 14.2 to
    23,617, eleven decades)."""
    def mantissas(ticks):
        return {round(t / 10 ** np.floor(np.log10(t) + 1e-9), 6) for t in ticks}

    for values, allowed in (([10.07, 24.65, 60.37], {1, 2, 5}), ([0.2, 3, np.nan, 0], {1, 2, 5}),
                            ([14.2, 199.6, 23617], {1}), ([1e-4, 1e7], {1})):
        ticks = plots.log_ticks(values)
        finite = [v for v in values if np.isfinite(v) and v > 0]
        assert 1.0 in ticks and len(ticks) <= 7 and ticks == sorted(ticks), (values, ticks)
        assert mantissas(ticks) == allowed, (values, ticks)
        assert min(ticks) <= 10 * min(finite + [1]) and max(ticks) >= max(finite + [1]) / 10, (values, ticks)
    assert plots.log_ticks([]) == [1.0]
    wide = plots.log_ticks([14.2, 199.6, 23617])
    svg = vlc.vegalite_to_svg(alt.Chart(pd.DataFrame({"x": [14.2, 23617.0]})).mark_point().encode(
        x=alt.X("x:Q", scale=alt.Scale(type="log"), axis=alt.Axis(values=wide, format=plots.LOG_FORMAT))).to_dict())
    assert ">10,000<" in svg and ">1,000<" in svg
    # a separated fit's bound (1e12) and a small ratio print in full, never as an exponent
    far = plots.log_ticks([1e-3, 1e12])
    svg = vlc.vegalite_to_svg(alt.Chart(pd.DataFrame({"x": [1e-3, 1e12]})).mark_point().encode(
        x=alt.X("x:Q", scale=alt.Scale(type="log"), axis=alt.Axis(values=far, format=plots.LOG_FORMAT))).to_dict())
    labels = re.findall(r">([^<>]+)</text>", svg)
    assert "1,000,000,000,000" in labels and not [t for t in labels if re.search(r"\de[+-]?\d", t)], labels


def test_layer_curves_promise_a_band_only_where_they_draw_one():
    """A measure without intervals (the female − male difference) gets no band and the caption says which rows have
    one; no panel hands Vega a field without a finite value (its "Infinite extent" warning)."""
    rows = [{"context_source": source, "layer": layer, "measure": measure, "dimension": dim, "value": 0.1 * layer,
             "ci_low": 0.1 * layer - 0.05 if measure == "accuracy_raw" else np.nan,
             "ci_high": 0.1 * layer + 0.05 if measure == "accuracy_raw" else np.nan}
            for source in ("dictionary", "generated") for layer in range(3)
            for measure in ("accuracy_raw", "female_minus_male") for dim in ("warmth", "competence")]
    spec = plots.layer_curves_chart(pd.DataFrame(rows)).to_dict()
    data = pd.DataFrame(next(iter(spec["datasets"].values())))
    assert np.isfinite(data[["ci_low", "ci_high"]].to_numpy(float)).all()
    moved = data[data["measure"] == rendering.column_label("female_minus_male")]
    assert (moved["ci_low"] == moved["value"]).all() and (moved["ci_high"] == moved["value"]).all()
    _, caption = rendering._figure_text(spec)
    banded, plain = rendering.column_label("accuracy_raw"), rendering.column_label("female_minus_male")
    assert (f"the shaded band its 95% confidence interval (on the {banded} row only; the {plain} row has none)"
            in caption)
    everywhere = plots.layer_curves_chart(pd.DataFrame(rows).query("measure == 'accuracy_raw'")).to_dict()
    assert "row only" not in rendering._figure_text(everywhere)[1]


def test_heatmap_caption_names_what_its_columns_are():
    acc = pd.DataFrame({"cutoff": ["0.1"] * 2, "dimension": ["warmth", "competence"], "accuracy": [0.7, 0.4],
                        "n": [10, 10], "model_id": ["generated contexts", "wordnet contexts"]})
    _, caption = rendering._figure_text(plots.accuracy_heatmap(acc, columns="context source of the extra terms")
                                        .to_dict())
    assert "per dimension (rows) and context source of the extra terms and cut-off (columns)" in caption
    assert "model and cut-off" in rendering._figure_text(plots.accuracy_heatmap(acc).to_dict())[1]


def test_axis_labels_keep_a_gap_between_them():
    """Tick labels never touch ("0.00.1" read as one number on a phone): Vega hides those closer than the gap."""
    assert plots._theme()["config"]["axis"]["labelSeparation"] >= 4
