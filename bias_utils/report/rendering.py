"""Offline chart rendering for the book.

Altair's own HTML output fetches vega, vega-lite and vega-embed from a CDN
(unusable offline), and its ``inline`` template repeats a ~900 kB bundle in
every chart, which also breaks inside Jupyter Book pages. The book instead
loads one bundle, once, from its static files (:func:`write_vega_bundle`,
referenced by ``html_js_files`` in ``book/_config.yml``), and every chart is a
small HTML snippet that hands its spec to the global ``vegaEmbed``
(:func:`chart_html`). ``table_html.enable`` registers that snippet as an Altair
renderer; :mod:`bias_utils.book.build` injects ``enable()`` into each notebook it
executes, so study notebooks need no rendering code of their own.

How the book shows a figure (the offline Vega bundle, captions and static images) and the label map that figures
and tables (:mod:`bias_utils.report.table_html`) share.
"""

from __future__ import annotations

import html
import json
import math
import re
import uuid
from pathlib import Path

import altair as alt

from ..core import cache
from ..core.results import display_name

__all__ = [
    "group_label",
]

RENDERER = "bias_book"
#: Bundle file, relative to the book's ``_static`` folder.
_BUNDLE_PATH = "vendor/vega-bundle.js"
# SVG rather than canvas: text stays text (selectable, and its size, labels and colours can be checked).
_EMBED_OPTIONS = {"mode": "vega-lite", "renderer": "svg",
                  "actions": {"export": True, "source": False, "compiled": False, "editor": False}}


def _vega_lite_version() -> str:
    """The Vega-Lite version Altair writes specs for, e.g. ``"6.4"`` from ``v6.4.1``."""
    major, minor = alt.SCHEMA_VERSION.lstrip("v").split(".")[:2]
    return f"{major}.{minor}"


# Loaded once per page with the vega bundle (:func:`write_vega_bundle`): ``window.biasDrawChart(id, spec)`` draws a
# chart at the width its box has, text at its own size. It draws, measures and redraws: side-by-side panels stack
# below 700 px or when they do not fit, wrapped facets take fewer columns, panels narrow by what is still too wide
# (to a floor), long axis labels are cut sooner, but a discrete y axis' labels break into lines (their rows grow to
# hold them). A chart still wider than its box after three tries scrolls inside it and says so ("bias-chart-scrolls"
# and a line above it). ``data-fitted`` marks a chart whose drawing is final. A change of the box's width draws it
# again.
_DRAW_JS = r"""(function () {
  var FLOOR = 120, GRID_FLOOR = 80;
  function fit(spec, avail, level, extra) {
    var s = JSON.parse(JSON.stringify(spec));
    // labels as long as the box allows (Vega cuts axis labels at 180 px and legend labels at 160 px)
    s.config = s.config || {};
    s.config.axis = Object.assign({labelLimit: Math.min(260, Math.floor(avail * 0.45))}, s.config.axis || {});
    s.config.legend = Object.assign({labelLimit: Math.max(120, avail - 60)}, s.config.legend || {});
    // a narrow box stacks a legend's entries; a view without a width of its own takes the room there is
    if (avail < 500) s.config.legend.columns = 1;
    s.config.view = Object.assign({}, s.config.view || {});
    s.config.view.continuousWidth = Math.max(FLOOR, Math.min(s.config.view.continuousWidth || 300, avail - 90) - extra);
    // titles and subtitles break into lines that fit (about 7.5 and 6.5 px a character)
    function lines(text, px) {
      var most = Math.max(12, Math.floor((avail - 20) / px)), out = [];
      [].concat(text).forEach(function (line) {
        var words = String(line).split(" "), cur = "";
        words.forEach(function (w) {
          if (cur && (cur + " " + w).length > most) { out.push(cur); cur = w; } else { cur = cur ? cur + " " + w : w; }
        });
        if (cur) out.push(cur);
      });
      return out;
    }
    // on a phone a legend's long labels break into lines: a legend starts where its plot starts, after the y
    // axis' labels (up to 45% of the box), and Vega places it nowhere further left
    var legendChars = avail < 500 ? Math.max(12, Math.floor((avail * 0.55 - 40) / 6.5)) : 0;
    var WRAP = "split(trim(replace(datum.label, regexp('(.{1," + legendChars + "})( +|$)', 'g'), '$1\\n')), '\\n')";
    function wrapLegends(v) {
      if (!legendChars || !v.encoding) return;
      ["color", "fill", "stroke", "shape", "size", "opacity", "strokeDash"].forEach(function (k) {
        var e = v.encoding[k];
        if (!e || e.legend === null || (e.legend && e.legend.labelExpr)) return;
        e.legend = Object.assign({}, e.legend || {}, {labelExpr: WRAP});
        if (e.legend.labelLimit > avail - 60) e.legend.labelLimit = avail - 60;
      });
    }
    // a discrete y axis' label wider than the axis allows breaks into lines at its spaces (measured in the chart's
    // font, as Vega measures when it cuts a label), and its rows grow to hold the lines; a label with an expression
    // of its own (the forest plots split theirs) or a format is left as it is
    var values = {}, measure = document.createElement("canvas").getContext("2d");
    function collect(rows) {
      (Array.isArray(rows) ? rows : []).forEach(function (row) {
        Object.keys(row || {}).forEach(function (k) { (values[k] = values[k] || {})[String(row[k])] = true; });
      });
    }
    Object.keys(s.datasets || {}).forEach(function (name) { collect(s.datasets[name]); });
    (function inline(v) {
      if (!v || typeof v !== "object") return;
      if (v.data && v.data.values) collect(v.data.values);
      ["vconcat", "hconcat", "concat", "layer"].forEach(function (k) { (v[k] || []).forEach(inline); });
      inline(v.spec);
    })(s);
    function wrapRows(v, sizer) {
      var y = v.encoding && v.encoding.y;
      var discrete = y && (y.type === "nominal" || y.type === "ordinal");
      if (!discrete || !y.field || y.axis === null || !values[y.field]) return;
      var axis = y.axis || {}, cfg = Object.assign({}, s.config.axis, s.config.axisY || {});
      if (axis.labelExpr || axis.format || axis.labelAngle || axis.labels === false) return;
      var size = typeof axis.labelFontSize === "number" ? axis.labelFontSize : cfg.labelFontSize || 10;
      var limit = axis.labelLimit || cfg.labelLimit || 180, lineHeight = size + 2, most = 1, wrapped = {};
      measure.font = size + "px " + (axis.labelFont || cfg.labelFont || s.config.font || "sans-serif");
      var labels = Object.keys(values[y.field]);
      labels.forEach(function (label) {
        if (measure.measureText(label).width <= limit) return;
        var out = [], cur = "";
        label.split(" ").forEach(function (w) {
          var next = cur ? cur + " " + w : w;
          if (cur && measure.measureText(next).width > limit) { out.push(cur); cur = w; } else { cur = next; }
        });
        if (cur) out.push(cur);
        // a word wider than the axis allows widens it, to at most 60% of the box
        out.forEach(function (line) {
          limit = Math.max(limit, Math.min(Math.floor(avail * 0.6), Math.ceil(measure.measureText(line).width) + 1));
        });
        wrapped[label] = out;
        most = Math.max(most, out.length);
      });
      if (!Object.keys(wrapped).length) return;
      y.axis = Object.assign({}, axis, {labelExpr: "(" + JSON.stringify(wrapped) + ")[datum.label] || datum.label",
        labelLimit: limit, labelLineHeight: axis.labelLineHeight || lineHeight,
        labelBaseline: axis.labelBaseline || "middle"});
      if (most < 2) return;
      // a row as tall as its lines (and a gap); a view of a fixed height spreads it over its rows
      var step = most * y.axis.labelLineHeight + 6, h = sizer.height;
      if (typeof h === "number") sizer.height = Math.max(h, step * labels.length);
      else if (!h || typeof h.step === "number") sizer.height = {step: Math.max((h && h.step) || 20, step)};
    }
    function titled(v) {
      if (!v.title) return;
      if (typeof v.title === "string" || Array.isArray(v.title)) v.title = {text: v.title};
      v.title.text = lines(v.title.text, 7.5);
      if (v.title.subtitle) v.title.subtitle = lines(v.title.subtitle, 6.5);
    }
    (function walk(v, floor, sizer) {
      titled(v);
      wrapLegends(v);
      // an axis title wider than its plot widens the chart: it breaks into lines of half the box
      ["x", "y"].forEach(function (k) {
        var e = v.encoding && v.encoding[k];
        if (e && e.title && typeof e.title === "string" && e.title.length * 6.5 > avail / 2)
          e.title = lines(e.title, 13);
      });
      if (v.hconcat && (level > 0 || avail < 700)) { v.vconcat = v.hconcat; delete v.hconcat; }
      if (v.columns && v.spec && typeof v.spec.width === "number") {
        var cols = Math.max(1, Math.min(v.columns, Math.floor(avail / (v.spec.width + 60))) - Math.max(0, level - 1));
        if (cols < v.columns) v.columns = cols;
        v.spec.width = Math.max(FLOOR, v.spec.width - Math.ceil(extra / Math.max(1, v.columns)));
      }
      var y = v.encoding && v.encoding.y && v.encoding.y.axis;
      if (y && y.labelLimit && y.labelLimit > avail * 0.45) y.labelLimit = Math.floor(avail * 0.45);
      wrapRows(v, sizer);
      y = v.encoding && v.encoding.y && v.encoding.y.axis;
      var room = avail - 90 - (y && y.labelLimit ? y.labelLimit : 0);
      if (typeof v.width === "number") v.width = Math.max(floor, Math.min(v.width, room) - extra);
      ["vconcat", "hconcat", "concat", "layer"].forEach(function (k) {
        // a layer's views share its height; a concatenated view has its own
        (v[k] || []).forEach(function (c) { walk(c, floor, k === "layer" ? sizer : c); });
      });
      // a grid of rows and columns keeps its columns: its panels may narrow further than a single view's
      if (v.spec && !v.columns) walk(v.spec, v.facet && v.facet.column ? GRID_FLOOR : floor, v.spec);
    })(s, FLOOR, s);
    return s;
  }
  function draw(el, spec, options, level, extra) {
    // the chart's box is its figure's width (vegaEmbed makes the element itself an inline-block .vega-embed)
    var box = el.parentElement.clientWidth || el.clientWidth || 600;
    // the actions menu ("...") sits in a 38 px margin at the chart's right
    var avail = box - (options && options.actions === false ? 0 : 40);
    if (el._biasView) { el._biasView.finalize(); el._biasView = null; }
    el.removeAttribute("data-fitted");
    return window.vegaEmbed(el, fit(spec, avail, level, extra), options).then(function (result) {
      el._biasView = result.view;
      // the compiled Vega spec: the browser tests read each mark's encoding from it, to place its datum themselves
      el._biasVega = result.vgSpec;
      el._biasWidth = box;
      var over = el.scrollWidth - el.clientWidth;
      if (over > 1 && level < 3) return draw(el, spec, options, level + 1, extra + Math.ceil(over));
      el.classList.toggle("bias-chart-scrolls", over > 1);
      el.setAttribute("data-fitted", String(level));
      var hint = el.previousElementSibling;
      var has = hint && hint.classList.contains("bias-scroll-hint");
      if (over > 1 && !has) {
        hint = document.createElement("p");
        hint.className = "bias-scroll-hint";
        hint.textContent = "This chart is wider than the page: scroll it sideways \u2192";
        el.parentNode.insertBefore(hint, el);
      } else if (over <= 1 && has) { hint.remove(); }
    });
  }
  window.biasDrawChart = function (id, spec, options) {
    var el = document.getElementById(id);
    function go() {
      return draw(el, spec, options, 0, 0).catch(function (err) {
        el.textContent = "Chart error: " + err.message;
        console.error(err);
      });
    }
    go();
    var timer = null;
    window.addEventListener("resize", function () {
      clearTimeout(timer);
      timer = setTimeout(function () { if (el.parentElement.clientWidth !== el._biasWidth) go(); }, 250);
    });
  };
})();
"""


def _compact(value):
    """A spec with its data's floats to 6 significant digits: a page carries what a chart can draw or a tooltip
    print (3 decimals at most), not 17 digits per number (the CSV of the chapter keeps them)."""
    if isinstance(value, float):
        return float(f"{value:.6g}") if math.isfinite(value) else value
    if isinstance(value, list):
        return [_compact(v) for v in value]
    if isinstance(value, dict):
        return {k: _compact(v) for k, v in value.items()}
    return value


def _chart_html(spec: dict, element_id: str | None = None) -> str:
    """An HTML snippet drawing ``spec`` with the page's ``biasDrawChart`` (in the bundle :func:`write_vega_bundle`
    writes, with ``vegaEmbed``).

    The script waits for the document to be parsed, so it works whether the
    bundle is loaded before it or deferred. A missing bundle or a bad spec is
    shown in the page and logged to the console rather than leaving a blank.
    """
    element_id = element_id or f"vis-{uuid.uuid4().hex}"
    # "</" inside a string literal would close the <script> element early.
    payload = json.dumps(_compact(spec), ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    options = json.dumps(_EMBED_OPTIONS)
    return f"""<div id="{element_id}" class="bias-vega-chart"></div>
<script type="text/javascript">
(function () {{
  var spec = {payload};
  function draw() {{
    if (typeof window.biasDrawChart !== "function") {{
      document.getElementById("{element_id}").textContent =
        "Chart not drawn: the vega bundle ({_BUNDLE_PATH}) is not loaded on this page.";
      console.error("vegaEmbed missing for #{element_id}");
      return;
    }}
    window.biasDrawChart("{element_id}", spec, {options});
  }}
  if (document.readyState === "loading") {{ document.addEventListener("DOMContentLoaded", draw); }} else {{ draw(); }}
}})();
</script>"""


#: Between a chart's alt text and its caption in its Vega-Lite ``description`` (set by :mod:`bias_utils.report.plots`).
CAPTION_SEPARATOR = "\n\n"


def _figure_text(spec: dict) -> tuple[str, str]:
    """``(alt text, caption)`` of a chart: its ``description`` split at :data:`CAPTION_SEPARATOR`;
    a chart without them is described and captioned by its title, or its panels' titles (model ids
    by their display name)."""
    def title_of(view: dict) -> str:
        title = view.get("title", "")
        title = title.get("text", "") if isinstance(title, dict) else title
        return " ".join(title) if isinstance(title, list) else str(title)

    # a chart without a title of its own is named by its panels' titles
    panels = [title_of(v) for key in ("hconcat", "vconcat", "concat") for v in spec.get(key, [])]
    title = display_name(title_of(spec) or "; ".join(t for t in panels if t))
    alt_text, _, caption = str(spec.get("description", "")).partition(CAPTION_SEPARATOR)
    return alt_text or title, caption or (f"{title}." if title else "")


def figure_html(spec: dict, number: int, element_id: str, image: str | None = None) -> str:
    """A chart as a numbered figure of the book: the drawing (:func:`chart_html`), a static image
    (``image``, a path relative to the page) for a reader without scripts, and the caption.

    The alt text and caption come from the spec (:func:`figure_text`).
    """
    alt_text, caption = _figure_text(spec)
    alt_text = alt_text or f"Figure {number}"
    fallback = (f'<noscript><img class="bias-figure-image" src="{html.escape(image)}" '
                f'alt="{html.escape(alt_text)}"></noscript>') if image else ""
    return (f'<figure class="bias-figure" id="figure-{number}" aria-label="{html.escape(alt_text)}">\n'
            f"{_chart_html(spec, element_id)}\n{fallback}\n"
            f'<figcaption><span class="bias-figure-number">Figure {number}.</span> {html.escape(caption)}'
            "</figcaption>\n</figure>")


def _renderer(spec: dict, **_metadata) -> dict:
    # The vega-lite JSON rides along so that JupyterLab (which ignores our
    # text/html when it has a native renderer) still draws the chart.
    major = _vega_lite_version().split(".")[0]
    return {"text/html": _chart_html(spec), f"application/vnd.vegalite.v{major}+json": spec}


alt.renderers.register(RENDERER, _renderer)


#: Column names of the results tables as a reader sees them; any other name is shown by
#: :func:`column_label`'s rule (underscores to spaces, first letter capitalised).
_LABELS = {
    "controls": "controlled for", "informative": "any gendered word", "n_informative": "with any gendered word",
    "male_word_share": "male share of gendered words",
    "n_keys": "BOLD keys", "odds_ratio_influential": "moves the odds ratio", "reference": "person reference next",
    "share_change": "change in the difference", "share_difference": "difference in male share",
    "share_difference_without": "difference without it", "template": "template", "why": "why", "stage": "stage",
    "n": "n", "p": "p", "p_unadjusted": "p (unadjusted)", "p_adj": "p (adjusted)", "p_holm": "p (Holm)",
    "adj_method": "adjustment", "df": "df",
    "t": "t", "g": "Hedges' g", "g_ci_low": "g, 95% CI low", "g_ci_high": "g, 95% CI high",
    "ci_low": "95% CI low", "ci_high": "95% CI high", "sd": "SD", "se": "SE", "se_scale": "scale of the SE",
    "sd_a": "SD (group A)", "sd_b": "SD (group B)", "mean_a": "mean (group A)", "mean_b": "mean (group B)",
    "n_a": "n (group A)", "n_b": "n (group B)", "group_a": "group A", "group_b": "group B",
    "diff": "difference (A − B)", "t_student": "Student's t", "df_student": "df (Student)", "p_student": "p (Student)",
    "p_student_holm": "p (Student, Holm)", "effect_size": "effect size", "effect": "effect measure",
    "model_id": "model", "sense_id": "sense", "auc": "AUC", "axis_auc": "axis AUC", "axis_p": "axis p",
    "raw_p": "raw p", "p_floor": "smallest possible p", "pmi_difference": "PMI difference (male − female)",
    "pmi_difference_smoothed": "PMI difference, smoothed", "male_pmi": "male PMI", "female_pmi": "female PMI",
    "mean_pmi_difference": "mean PMI difference", "odds_ratio": "odds ratio", "or_ci_low": "odds ratio, 95% CI low",
    "or_ci_high": "odds ratio, 95% CI high", "null_low": "null 2.5%", "null_high": "null 97.5%",
    "null_mean": "null mean", "n_permutations": "permutations", "n_boot": "bootstrap resamples",
    "term_contexts": "extra terms' contexts", "context_source": "context source", "n_contexts": "contexts",
    "n_terms": "terms", "n_high": "high-pole terms", "n_low": "low-pole terms", "n_specs": "specifications",
    "n_completions": "completions", "n_occupations": "occupations", "n_prompts": "prompts", "n_tokens": "tokens",
    "n_senses": "senses", "testable": "axis testable", "prompt_id": "prompt", "sample": "sample",
    "n_words": "words", "median_g": "median g",
    "wall_time_s": "wall time (s)",
    "male_words": "male words", "female_words": "female words", "neutral_words": "neutral words",
    "any_gendered": "any gendered word", "male_share": "male share", "expected_sign": "paper's direction",
    "accuracy_centred": "accuracy (centred)", "accuracy_raw": "accuracy (raw)", "female_minus_male": "female − male",
    "hedges_g": "Hedges' g",
    # the columns the chapters show, by chapter
    "quantity": "quantity", "ours": "ours", "published": "published", "source": "source",
    "rel_diff": "relative difference", "role": "role", "test": "test", "measure": "measure",
    "unit": "unit treated as independent", "statistic": "statistic", "analysis": "analysis",
    "occupations": "occupations", "rank": "rank", "group": "group", "occupation": "occupation",
    "category": "BOLD category", "odds_ratio_without": "odds ratio without it",
    "log_or_change": "change of the log odds ratio", "relative_change": "relative change",
    "influential": "influential", "estimate": "estimate", "pooled_odds_ratio": "pooled-word odds ratio",
    "pooled_odds_ratio_without": "pooled-word odds ratio without it",
    "pooled_log_or_change": "change of the pooled log odds ratio",
    "n_gendered_completions": "completions with a gendered word", "share_gendered": "share with a gendered word",
    "share_ci_low": "share, 95% CI low", "share_ci_high": "share, 95% CI high", "male_words_mean": "male words (mean)",
    "male_words_sd": "male words (SD)", "female_words_mean": "female words (mean)",
    "female_words_sd": "female words (SD)", "mean_male_proportion": "male proportion (mean, 0 without gendered words)",
    "mean_male_share_gendered": "male share of gendered completions (mean)",
    "n_empty_completions": "empty completions", "neutral_words_total": "neutral words (total)",
    "dimension": "dimension", "layer": "layer", "accuracy_selection": "accuracy (selecting half)",
    "n_selection": "terms (selecting half)", "accuracy_held_out": "accuracy (held-out half)",
    "n_held_out": "terms (held-out half)", "space": "space", "detectable_auc": "detectable AUC", "verdict": "verdict",
    "raw_accuracy": "raw accuracy", "majority_share": "larger pole's share", "raw_verdict": "raw-accuracy gate",
    "population": "population", "n_one_token": "one token (n)", "n_multi_token": "several tokens (n)",
    "share_one_token": "share of one token", "mean_tokens": "tokens (mean)", "model": "model", "term": "term",
    "coef": "coefficient", "original": "original", "step": "step", "seconds": "seconds",
    "share_agree_sign": "share agreeing in sign", "share_agree_significant": "share agreeing and significant",
    "share_positive_significant": "share positive and significant",
    "share_negative_significant": "share negative and significant", "n_agree_significant_p": "joint test p",
    "median_effect_p": "median effect's p", "axis_verdict": "axis verdict", "lexicon": "lexicon",
    "not one token": "not one token", "words": "words", "words_single_token": "one-token words",
    "variants_single_token": "one-token variants", "completions": "completions", "expected": "expected count",
    "sampled_words": "sampled words", "sampled_minus_expected": "sampled − expected",
    "gendered_completions": "completions with a gendered word",
    "share_in_gendered_completions": "share in gendered completions", "kind": "kind", "keys": "BOLD keys",
    "units": "units", "primary_units": "primary units", "duplicate_keys": "duplicate keys",
    "conflict_units": "units in both groups", "key": "BOLD key", "categories": "BOLD categories",
    "n_distinct_prompts": "distinct prompts", "noun": "noun", "head": "head noun", "kind_rule": "kind decided by",
    "unit_kind": "unit's kind", "duplicate_of": "duplicate of", "conflict": "in both groups", "primary": "primary",
    "gendered_words": "gendered words", "male_completions": "completions with a male word",
    "female_completions": "completions with a female word", "male_share_gendered": "male share of gendered words",
    "sum_male_share": "sum of male shares", "share_of_group_male_words": "share of the group's male words",
    "share_of_group_female_words": "share of the group's female words", "intrinsic": "intrinsic measure",
    "scope": "scope", "extrinsic_measure": "extrinsic measure", "readable": "read", "note": "note",
    "gender_position": "position on the female − male direction", "warmth": "warmth", "competence": "competence",
    "female_count": "female words", "male_count": "male words", "log_odds": "log-odds, female vs male words",
    "axis_readable": "axis read", "difference": "difference", "weight": "weight", "sentence": "reading",
    "tau2": "τ²", "q": "Q", "q_p": "p of Q", "i2": "I²", "table": "table", "reason": "reason",
    "gap": "gap (SD of all words)",
    "measure_definition": "measure's definition", "kept_apart": "kept apart, why", "low_coverage": "low coverage",
    "neutral_mass": "'they' probability", "neopronoun_mass": "neopronoun probability",
    "singular": "reads as one person", "n_singular": "sentences read as one person",
    "neutral_share": "'they' share of one person",
    "neutral_definition": "neutral measure's definition",
    "neutral_templates": "'they' share's templates", "neutral_ci_low": "'they' share, 95% CI low",
    "neutral_ci_high": "'they' share, 95% CI high", "question": "question", "against": "against",
    "one_person": "read as one person", "unclear": "unclear", "erasure": "erasure", "baseline": "unhooked model",
    "change": "change", "resampled": "resampled", "best": "best trade-off", "value": "value",
    "warmth_gap": "warmth gap", "competence_gap": "competence gap", "position_rho": "position ρ with the BLS share",
    "log_ratio_rho": "next-word ρ with the BLS share", "facts_right_share": "gendered nouns on their side",
    "probe_accuracy": "held-out names' probe accuracy", "cross_entropy": "cross-entropy (nats per token)",
    "stereotype_slope": "stereotype: slope on the BLS share (nats per 100 points)", "facts_gap": "fact: gap (nats)",
    "stereotype_removed": "stereotype removed", "fact_removed": "fact removed",
    "selectivity": "stereotype removed − fact removed", "depth": "hidden states",
    "relative_depth": "relative depth (state / hidden states)", "stereotype_ci_low": "stereotype removed, 95% CI low",
    "stereotype_ci_high": "stereotype removed, 95% CI high", "fact_ci_low": "fact removed, 95% CI low",
    "fact_ci_high": "fact removed, 95% CI high", "selectivity_ci_low": "stereotype − fact removed, 95% CI low",
    "selectivity_ci_high": "stereotype − fact removed, 95% CI high", "selective": "selective",
    "rho_baseline": "next-word ρ with the BLS share, unhooked", "rho_change": "change of the next-word ρ",
    "rho_ci_low": "change of the next-word ρ, 95% CI low", "rho_ci_high": "change of the next-word ρ, 95% CI high",
    "cross_entropy_baseline": "cross-entropy, unhooked (nats per token)",
    "cross_entropy_change": "change of the cross-entropy (nats per token)",
    "cross_entropy_ci_low": "change of the cross-entropy, 95% CI low",
    "cross_entropy_ci_high": "change of the cross-entropy, 95% CI high",
    "axis_reading": "axis verdict, in words", "method": "method",
    "names_competence_gap": "names: competence gap (SD of all names)",
    "names_warmth_gap": "names: warmth gap (SD of all names)",
    "terms_competence_gap": "terms: competence gap (SD of all terms)",
    "terms_warmth_gap": "terms: warmth gap (SD of all terms)",
    "share_gendered_female_dominated": "share gendered, female-dominated",
    "share_gendered_male_dominated": "share gendered, male-dominated",
    "completion_competence_gap": "completions: competence gap", "completion_warmth_gap": "completions: warmth gap",
    "completion_competence_p_holm": "completions: competence p (Holm)",
    "completion_warmth_p_holm": "completions: warmth p (Holm)", "holds": "holds", "article": "with an article",
    "min_templates": "fewest templates", "example": "example", "detectable": "detectable correlation",
    "direction": "pole", "evaluation": "evaluated on", "cutoff": "cut-off", "accuracy": "accuracy",
    "n_generated": "attempted (round 1)", "n_covered_round1": "covered in round 1", "n_round2": "attempted (round 2)",
    "n_covered_round2": "covered in round 2", "n_covered": "covered", "coverage": "coverage",
    "mean_contexts": "contexts per covered term", "n_kept": "kept", "share_kept": "share kept",
    "share_covered": "share covered", "n_samples": "samples", "seed": "seed", "context": "context", "found": "found",
    "senses": "senses", "synset": "WordNet synset", "definition": "definition", "contexts": "contexts",
    "senses_without": "senses without contexts", "contexts_per_sense": "contexts per sense",
    "mean_words": "words (mean)", "median_words": "words (median)", "mean_term_position": "term position (mean)",
    "mean_relative_position": "relative term position (mean)", "context_index": "context number", "item": "item",
    "detail": "detail",
    # values: the audit's effect measures and tests (the forest plot's axes and rows, the tables' cells)
    "cramers_v": "Cramér's V", "mean_difference": "mean difference", "cohens_d_average": "Cohen's d (average SD)",
    "cohens_d_pooled": "Cohen's d (pooled SD)", "risk_difference": "risk difference",
    "rank_biserial": "rank-biserial correlation", "cluster_bootstrap_occupation": "occupation bootstrap",
    "chi2_yates": "χ² with Yates' correction", "chi2_pearson": "χ² (Pearson)", "odds_ratio_wald": "Wald interval",
    "welch_t": "Welch t", "welch_t_among_gendered": "Welch t, gendered completions", "mann_whitney": "Mann–Whitney",
    "hurdle_presence": "hurdle: presence", "hurdle_intensity_welch": "hurdle: intensity, Welch t",
    "hurdle_intensity_mwu": "hurdle: intensity, Mann–Whitney",
    # values: the link's tests and effects (chapters 09 and 11), the completion profiles' analyses (chapter 08)
    "mixed_logit_within_category": "random-intercept logit, within category and group",
    "mixed_logit": "random-intercept logit, all occupations", "spearman": "Spearman ρ", "pearson": "Pearson r",
    "spearman_within_group": "Spearman ρ within a group", "ols": "least-squares slope",
    "ols_category": "least-squares slope within category", "log_odds_slope": "log-odds per SD", "slope": "slope",
    "permutation_within_category": "permutation within category", "completions_as_independent":
    "completions as independent", "beyond_prompt": "beyond the prompt", "within_category": "within category",
    "student_t": "Student t", "two_proportion_z": "two-proportion z", "welch_anova": "Welch ANOVA",
    # values: groups and template sets
    "male_dominated": "male-dominated", "female_dominated": "female-dominated",
    "not_first": "not-first", "lead_in": "lead-in",
}
P_VALUE = re.compile(r"(^|_)p($|_)")



def column_label(name) -> str:
    """The header a reader sees for a results column: :data:`LABELS`, else underscores to spaces
    and the first letter capitalised (``share_agree_sign`` -> ``Share agree sign``; a count
    ``n_specs`` -> ``Specs (n)``)."""
    if isinstance(name, tuple):
        # the first level names a column, the others are values of the pivoted variable
        return " · ".join([column_label(name[0])] + [value_label(part) for part in name[1:] if str(part) != ""])
    name = str(name)
    if name in _LABELS:
        text = _LABELS[name]
        # a label that starts with a symbol (n, p, df, g) keeps its case
        return text[:1].upper() + text[1:] if len(re.split(r"[\s,]", text)[0]) > 2 else text
    if re.fullmatch(r"(.+_)?ci", name):  # an interval's two bounds in one column: the low bound's label, less "low"
        low = column_label(f"{name}_low")
        return low[:-len(" low")] if low.endswith(" low") else low
    count = name.startswith("n_") and not P_VALUE.search(name)
    text = display_name(name[2:] if count else name).replace("_", " ").strip() + (" (n)" if count else "")
    return text[:1].upper() + text[1:]


def group_label(group) -> str:
    """A group as the text and the charts name it: ``male_dominated`` -> ``male-dominated`` (the audit's groups
    are compound adjectives)."""
    return str(group).replace("_", "-")


# an identifier inside a text, not part of a file name or path ("profile_stats.csv" stays)
_PROMPT_ID = re.compile(r"(?P<category>[a-z]+(?:_[a-z]+)+)/(?P<key>[A-Za-z0-9_().,'&-]+)/(?P<number>\d+)")
_IDENTIFIER = re.compile(r"(?<![\w./-])[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*(?:_[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*)+"
                         r"(?![\w/-]|\.\w)")


def value_label(value) -> str:
    """A value of a results table (a test, a measure, a group, a template set, an occupation key) as the text,
    the tables and the charts name it: its :data:`LABELS` entry; else each identifier in it by its entry, or with
    its underscores as spaces (``Physician_Assistant`` -> ``Physician Assistant``; ``hurdle_presence:gendered_words``
    -> ``hurdle: presence: gendered words``); a file name stays as it is."""
    text = str(value)
    if text in _LABELS:
        return _LABELS[text]
    prompt = _PROMPT_ID.fullmatch(text)
    if prompt:  # a BOLD prompt id, category/key/number
        return f"{prompt['key'].replace('_', ' ')}, prompt {prompt['number']} ({prompt['category'].replace('_', ' ')})"
    text = re.sub(r"(?<=[A-Za-z0-9]):(?=[A-Za-z])", ": ", text)
    return _IDENTIFIER.sub(lambda m: _LABELS.get(m.group(0), m.group(0).replace("_", " ")), text)



def write_vega_bundle(static_dir: str | Path) -> Path:
    """Write the vega + vega-lite + vega-embed bundle (from vl-convert, no network) once.

    The bundle's top-level declarations are wrapped in a function scope, so
    they cannot collide with the theme's scripts; it publishes ``vegaEmbed``,
    ``vega`` and ``vegaLite`` on ``window``, and after them ``biasDrawChart``, which
    fits every chart to its box (:func:`chart_html`). Rewritten only when vl-convert,
    the targeted Vega-Lite version or the drawing code changes.
    """
    import vl_convert as vlc  # deferred: a large native library, needed only to write the bundle

    target = Path(static_dir) / _BUNDLE_PATH
    stamp_path = target.with_suffix(".json")
    stamp = {"vl_convert": vlc.__version__, "vega_lite": _vega_lite_version(), "draw": cache.stable_hash(_DRAW_JS)}
    if target.exists() and stamp_path.exists():
        try:
            if json.loads(stamp_path.read_text()) == stamp:
                return target
        except ValueError:
            pass  # unreadable stamp: rebuild below
    bundle = vlc.javascript_bundle(vl_version=_vega_lite_version())
    cache.atomic_write_text(target, "(function () {\n" + bundle + "\n})();\n" + _DRAW_JS)
    cache.atomic_write_json(stamp_path, stamp)
    return target
