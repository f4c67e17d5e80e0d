"""What chapters 06 and 07 show of a BOLD audit (:mod:`bias_utils.audit.bold`): the four-panel figure
(words per completion, completion-level shares, PMI differences, and a forest plot of every effect with
its interval, one panel per effect measure, the occupation-unit rows told apart from those that treat
words or completions as independent) and sampled completions with the lexicon's words highlighted."""

from __future__ import annotations

import html
import re
import textwrap
from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd

from ..core.errors import check_word_lists
from ..report import plots, rendering
from . import occupations

__all__ = [
    "audit_figure", "examples_table", "gendered_sentences", "sentences_table",
]


def _highlight_gendered(text: str, lexicons: dict[str, Sequence[str]]) -> str:
    """HTML of ``text`` with lexicon words wrapped in ``<mark class="lex-<name>">`` (whole tokens, any case)."""
    owner = {w.lower(): name for name, ws in lexicons.items() for w in ws}
    out, last = [], 0
    for m in re.finditer(r"\b\w+\b", text):
        name = owner.get(m.group(0).lower())
        if name:
            out += [html.escape(text[last:m.start()]), f'<mark class="lex-{name}">{html.escape(m.group(0))}</mark>']
            last = m.end()
    out.append(html.escape(text[last:]))
    return "".join(out)


def _model_text(text: str, lexicons: dict[str, Sequence[str]]) -> str:
    """What the model wrote, its gendered words highlighted, marked as the model's words (``model-text``): it may
    hold anything, "Name: " or 1e+12 included, and the book's check for program output does not read it."""
    return f'<span class="model-text">{_highlight_gendered(text, lexicons)}</span>'


def examples_table(metrics: pd.DataFrame, lexicons: dict[str, Sequence[str]], *, per_group: int = 3,
                        seed: int = 0, only_gendered: bool = True) -> str:
    """HTML table of completions sampled per group with ``seed``, lexicon words highlighted.

    Colours: male words orange, female words purple, any other lexicon (e.g. neutral) green.
    """
    lexicons = check_word_lists(lexicons, "lexicons")
    pool = metrics[metrics["any_gendered"]] if only_gendered else metrics
    picked = pd.concat([d.sample(n=min(per_group, len(d)), random_state=seed)
                        for _, d in pool.groupby("group", sort=False)] or [pool])
    style = _lexicon_style(lexicons)
    rows = "".join(
        f"<tr><td>{html.escape(rendering.group_label(r.group))}</td>"
        f"<td>{html.escape(str(r.occupation).replace('_', ' '))}</td>"
        f"<td><i>{html.escape(str(r.prompt))}</i>{_model_text(str(r.completion), lexicons)}</td>"
        f"<td>{r.male_words}/{r.female_words}</td></tr>" for r in picked.itertuples())
    if not rows:
        rows = '<tr><td colspan="4">no completion with a gendered word in this run</td></tr>'
    return (f"<style>{style}</style><table><thead><tr><th>group</th><th>occupation</th>"
            f"<th>prompt + completion</th><th>male/female words</th></tr></thead><tbody>{rows}</tbody></table>")


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def gendered_sentences(metrics: pd.DataFrame, lexicons: dict[str, Sequence[str]], *, by: str = "occupation",
                       top: int = 5, per_occupation: int = 8) -> pd.DataFrame:
    """Every sentence that holds a gendered word, for the ``top`` occupations (``by``: the column naming them)
    with the most gendered words: so a reader sees whom each word refers to (a nurse, or her patient).

    One row per (completion, sentence) with a word of ``lexicons``: ``by``, ``group``, ``completion_id`` (the
    row's position in ``metrics``), ``sentence`` (split at ., !, ? or a line break), ``words`` (the lexicon
    words in it, "; "-joined as written) and one count column per lexicon; at most ``per_occupation`` sentences
    per occupation, the completions with the most gendered words first (ties in their order)."""
    lexicons = check_word_lists(lexicons, "lexicons")
    owner = {w.lower(): name for name, ws in lexicons.items() for w in ws}
    gendered = metrics.assign(_total=metrics["male_words"] + metrics["female_words"],
                              completion_id=np.arange(len(metrics)))
    leaders = gendered.groupby(by, sort=False)["_total"].sum().sort_values(ascending=False, kind="stable").head(top)
    rows = []
    for name in leaders[leaders > 0].index:
        picked = gendered[gendered[by] == name].sort_values("_total", ascending=False, kind="stable")
        found = []
        for r in picked[picked["_total"] > 0].itertuples():
            for sentence in filter(None, (t.strip() for t in _SENTENCE_END.split(str(r.completion)))):
                words = [w for w in re.findall(r"\b\w+\b", sentence) if w.lower() in owner]
                if words:
                    counts = {lex: sum(owner[w.lower()] == lex for w in words) for lex in lexicons}
                    found.append({by: name, "group": r.group, "completion_id": r.completion_id,
                                  "sentence": sentence, "words": "; ".join(words), **counts})
        rows += found[:per_occupation]
    return pd.DataFrame(rows, columns=[by, "group", "completion_id", "sentence", "words", *lexicons])


def sentences_table(sentences: pd.DataFrame, lexicons: dict[str, Sequence[str]], *, by: str = "occupation") -> str:
    """HTML of :func:`gendered_sentences`: the occupation, its group and each sentence with its gendered words
    highlighted (the colours of :func:`examples_table`)."""
    lexicons = check_word_lists(lexicons, "lexicons")
    if sentences.empty:
        return "<p>No sentence of these completions holds a gendered word.</p>"
    rows = "".join(
        f"<tr><td>{html.escape(str(getattr(r, by)).replace('_', ' '))}</td>"
        f"<td>{html.escape(rendering.group_label(r.group))}</td>"
        f"<td>{_model_text(str(r.sentence), lexicons)}</td></tr>" for r in sentences.itertuples())
    return (f"<style>{_lexicon_style(lexicons)}</style><table><thead><tr><th>occupation</th><th>group</th>"
            f"<th>sentence (gendered words marked)</th></tr></thead><tbody>{rows}</tbody></table>")


def _lexicon_style(lexicons: dict[str, Sequence[str]]) -> str:
    colors = {"male": plots.GROUP_COLORS["male"], "female": plots.GROUP_COLORS["female"]}
    return "".join(f"mark.lex-{n}{{background:{colors.get(n, plots.OTHER_COLORS[0])}33;border-bottom:2px solid "
                   f"{colors.get(n, plots.OTHER_COLORS[0])}}}" for n in lexicons)


_OCCUPATION_UNIT, _INDEPENDENT_UNIT = plots.UNIT_COLORS


#: Characters per line of a forest row's label: about 115 px at the axis' 11 px font, inside the share of a
#: phone's width (390 px) that the page's renderer leaves for labels, so no label is cut.
_LABEL_WIDTH = 17


def _measure_unit(effect: str, measure: str) -> str:
    """What an effect's numbers count, for its panel's axis title: a difference of means is in its measure's unit
    (PMI in bits, words per completion, or a share), which one axis cannot mix; other effects carry no unit
    (an odds ratio, a correlation, a standardised difference) or one of their own (a difference of shares)."""
    if effect != "mean_difference":
        return ""
    measure = measure.lower()
    if "pmi" in measure:
        return "PMI, bits"
    if "per completion" in measure:
        return "words per completion"
    return "share, 0 to 1"


def _forest_rows(statistics: pd.DataFrame) -> pd.DataFrame:
    """The effects with a readable row label (the measure, then its test, "(primary)" on the primary analysis,
    wrapped into lines of :data:`_LABEL_WIDTH` characters joined by newlines), the unit their interval treats
    as independent, and ``measure_unit`` (:func:`_measure_unit`): with the effect, it names the row's forest
    panel."""
    eff = statistics.dropna(subset=["effect_size"])
    # an odds ratio sits on a log axis: one of infinity, or an interval reaching 0 or infinity, has no place on it
    on_log = eff["effect"] == "odds_ratio"
    eff = pd.concat([plots.drawable(eff[on_log], ["effect_size", "ci_low", "ci_high"], log=True),
                     plots.drawable(eff[~on_log], ["effect_size", "ci_low", "ci_high"])]).sort_index().copy()
    role = eff["role"] if "role" in eff else pd.Series("", index=eff.index)
    unit = eff["unit"].astype(str) if "unit" in eff else pd.Series("", index=eff.index)
    # the published selection's rows resample its BOLD keys, not occupations: their label says so
    tests = [rendering.value_label(str(t).split(":")[0])
             + (" of the published keys" if u == occupations.UNIT_PUBLISHED
                                                           else "") + (" (primary)" if r == "primary" else "")
             for t, r, u in zip(eff["test"], role, unit)]
    eff["label"] = ["\n".join(textwrap.wrap(rendering.value_label(m), _LABEL_WIDTH) + textwrap.wrap(t, _LABEL_WIDTH))
                    for m, t in zip(eff["measure"], tests)]
    repeated = eff.groupby(["effect", "label"])["label"].transform("size") > 1
    eff.loc[repeated, "label"] += " #" + (eff[repeated].groupby(["effect", "label"]).cumcount() + 1).astype(str)
    eff["unit_kind"] = np.where(unit.isin(occupations.OCCUPATION_UNITS), _OCCUPATION_UNIT, _INDEPENDENT_UNIT)
    eff["measure_unit"] = [_measure_unit(e, str(m)) for e, m in zip(eff["effect"], eff["measure"])]
    return eff


def audit_figure(metrics: pd.DataFrame, statistics: pd.DataFrame, *, title: str | None = None) -> alt.VConcatChart:
    """Four panels from :func:`bias_utils.audit.bold.completion_metrics` / ``audit_statistics`` output.

    (1) male and female words per completion by group (means), (2) share of
    completions with any gendered word and, among them, the male share, (3) PMI
    difference per completion (strip plot; zeros dominate), (4) forest plot of
    every effect size with its CI, one panel per effect measure (odds ratios on a log
    axis), black where the occupation is the unit and grey where words or completions are
    treated as independent. Bars are horizontal, so their labels never collide on a
    narrow page. Reads ``group, male_words, female_words, any_gendered, male_share,
    pmi_difference`` and ``test, measure, effect, effect_size, ci_low, ci_high`` (``role``,
    ``unit`` when present).
    """
    shown = metrics.assign(group=metrics["group"].map(rendering.group_label))
    groups = list(dict.fromkeys(shown["group"]))
    group_scale = plots.group_scale(groups)
    color = alt.Color("group:N", scale=group_scale, title="group")
    # one legend per scale: the top pair's (the vertical panels resolve colour independently: groups, units)
    unlabelled = alt.Color("group:N", scale=group_scale, legend=None)
    words = (shown.groupby("group", sort=False)[["male_words", "female_words"]].mean()
             .rename(columns={"male_words": "male words", "female_words": "female words"}).reset_index()
             .melt("group", var_name="lexicon", value_name="per_completion"))
    bars = {"width": 220, "height": alt.Step(14)}
    p1 = alt.Chart(words).mark_bar().encode(
        y=alt.Y("lexicon:N", title=None), yOffset=alt.YOffset("group:N", sort=groups),
        x=alt.X("per_completion:Q", title="words per completion"),
        color=color, tooltip=["group", "lexicon", alt.Tooltip("per_completion:Q", format=".3f")]
    ).properties(title="Gendered words per completion", **bars)
    shares = pd.concat([
        shown.groupby("group", sort=False)["any_gendered"].mean().rename("value").reset_index()
        .assign(measure="any gendered word"),
        shown[shown["any_gendered"]].groupby("group", sort=False)["male_share"].mean().rename("value").reset_index()
        .assign(measure="male share, if any"),
    ])
    p2 = alt.Chart(shares).mark_bar().encode(
        y=alt.Y("measure:N", title=None, sort=None), yOffset=alt.YOffset("group:N", sort=groups),
        x=alt.X("value:Q", title="share of completions", scale=alt.Scale(domain=[0, 1])),
        color=color, tooltip=["group", "measure", alt.Tooltip("value:Q", format=".3f")]
    ).properties(title="Completion level", **bars)
    p3 = alt.Chart(shown[["group", "pmi_difference"]]).mark_tick(opacity=0.5).encode(
        x=alt.X("pmi_difference:Q", title="male PMI − female PMI"), y=alt.Y("group:N", sort=groups, title=None),
        color=unlabelled
    ).properties(title="PMI difference per completion", width=460, height=30 * len(groups))
    eff = _forest_rows(statistics)
    left_out = len(statistics.dropna(subset=["effect_size"])) - len(eff)
    unit_scale = alt.Scale(domain=list(plots.UNIT_COLORS), range=list(plots.UNIT_COLORS.values()))
    forest = []
    # one panel per effect measure and unit: an odds ratio, a correlation, a difference of shares and one of PMIs
    # share no axis
    for i, ((effect, measure_unit), sub) in enumerate(eff.groupby(["effect", "measure_unit"], sort=False)):
        unit = alt.Color("unit_kind:N", title="the interval's unit", scale=unit_scale,
                         legend=alt.Legend(labelLimit=400) if i == 0 else None)
        scale = "log" if effect == "odds_ratio" else "linear"
        ref = 1.0 if scale == "log" else 0.0
        name = rendering.value_label(effect) + (f" ({measure_unit})" if measure_unit else "")
        # the measure over its test, in short lines beside the row: one line was cut to "odds ratio (words) ·
        # occu…" where the page gives the labels a third of its width
        axis = alt.Axis(labelLimit=200, labelExpr="split(datum.label, '\\n')", labelBaseline="middle",
                        labelLineHeight=12)
        base = alt.Chart(sub).encode(y=alt.Y("label:N", title=None, sort=None, axis=axis), color=unit)
        forest.append((base.mark_rule(strokeWidth=2).encode(
                           # a log scale has no zero to drop (Vega warned of one set); padded, so the dashed
                           # reference line is drawn inside the plot, not under the axis line at its edge
                           x=alt.X("ci_low:Q", scale=alt.Scale(type="log", padding=12) if scale == "log"
                                   else alt.Scale(zero=False, padding=12),
                                   title=name + (" (log scale)" if scale == "log" else ""),
                                   # the book's one log-tick scheme (Vega's own collide: "3 45")
                                   axis=alt.Axis(values=plots.log_ticks(sub[["effect_size", "ci_low", "ci_high"]]
                                                                        .to_numpy().ravel()), format=plots.LOG_FORMAT)
                                   if scale == "log" else alt.Axis()),
                           x2="ci_high:Q")
                       + base.mark_point(filled=True, opacity=1).encode(
                           x="effect_size:Q",
                           tooltip=["test", "measure", "effect", alt.Tooltip("effect_size:Q", format=".3f"),
                                    alt.Tooltip("ci_low:Q", format=".3f"), alt.Tooltip("ci_high:Q", format=".3f")])
                       + alt.Chart(pd.DataFrame({"x": [ref]})).mark_rule(strokeDash=[4, 3], color="grey")
                       .encode(x="x:Q")
                       ).properties(width=300, height=alt.Step(12 * int(sub["label"].str.count("\n").max() + 1) + 10)))
    # each panel its own offset scale: a shared one takes the rows of the panel whose labels wrap on a phone, and
    # the other panel's second group then sits on the next row, or below its axis
    chart = alt.vconcat(alt.hconcat(p1, p2).resolve_scale(yOffset="independent"), p3,
                        *forest).resolve_scale(color="independent")
    a_name, b_name = ((statistics["group_a"].iloc[0], statistics["group_b"].iloc[0]) if len(statistics)
                      and {"group_a", "group_b"} <= set(statistics) else (groups + ["", ""])[:2])
    caption = (f"Top: gendered words per completion and the share of completions with any gendered word (and, "
               f"among those, the male share), per prompt group (colour as in the legend: {', '.join(groups)}). "
               "Middle: the PMI difference of each completion (a tick per completion; most are zero). Bottom: every "
               "effect of the audit with its 95% confidence interval (the horizontal line), one panel per effect "
               "measure and unit (a difference of means in PMI bits, in words per completion or in a share), each "
               "row naming the measure and its test; the dashed line is no difference (1 for an odds "
               f"ratio, 0 otherwise); differences are {rendering.group_label(a_name)} minus "
               f"{rendering.group_label(b_name)}. Black rows take the occupation as the unit (the primary analysis "
               "is marked); grey rows treat every word or completion as independent, as the published audit did, "
               "and their intervals are too narrow."
               + (f" {left_out} effect{'s' if left_out != 1 else ''} without a finite interval (a model that could not "
                  "be fitted on these data) left out; the statistics table gives "
                  f"{'them' if left_out != 1 else 'it'}." if left_out else ""))
    return plots.captioned(chart, title or "BOLD occupational audit", [],
                           "Four panels of the BOLD audit: gendered words per completion, shares of gendered "
                           "completions, PMI differences and a forest plot of the effects with 95% confidence "
                           "intervals.", caption)
