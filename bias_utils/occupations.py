"""Study 2 with the occupation as the unit: intervals, p values and influence by occupation.

The audit samples prompts *per occupation* (224 in its selection, 52 of them
female-dominated), and most completions contain no gendered word at all, so
a handful of occupations supply most of the words. Its word-level tests treat
every gendered word as independent; their intervals are far too narrow, and
one occupation can carry the result. Here the occupation is the unit:

* **Primary analysis.** The audit's pooled odds ratio (male over female words,
  first group over second, +0.5 in every cell) with a 95% percentile interval
  from the occupation cluster bootstrap (whole occupations resampled within each
  group, :func:`bias_utils.stats.cluster_bootstrap_ci`; :func:`cluster_interval`
  draws the same replicates, vectorised) and a two-sided **permutation p**:
  the group labels are shuffled across occupations (group sizes kept) and the
  share of relabellings with ``|statistic|`` at least the observed one is
  ``(1 + hits) / (1 + K)``, so its floor is ``1/(K+1)``. The same two are
  computed for the share of completions with any gendered word and the male
  share among gendered completions. In the audit's statistics table these are
  the rows with ``unit ==`` :data:`UNIT_OCCUPATIONS`; the odds ratio's is the
  one ``role == "primary"`` row (unadjusted: one pre-specified test), the
  other two are Holm-adjusted with the rest of the table.
* **Robustness.** :func:`influence_table`: the odds ratio without each occupation
  (leave one occupation out), ranked by how far it moves the log odds ratio.
* The audit's own intervals (Wald on independent words, independent
  completions) stay in the statistics table, labelled in its ``unit`` column,
  and are never the headline.

Every statistic here is a ratio of group totals of per-occupation sums, so a
replicate or a relabelling is a sum over occupations; nothing is refitted.
"""

from __future__ import annotations

from typing import Callable, Mapping

import altair as alt
import numpy as np
import pandas as pd

from . import plots, rendering, stats, tables

__all__ = [
    "HEADLINE_COLUMNS", "HEADLINE_TABLE", "INFLUENCE_COLUMNS", "INFLUENCE_SHIFT", "INFLUENCE_TABLE", "MEASURES",
    "N_PERMUTATIONS", "OCCUPATIONS_TABLE", "UNIT_OCCUPATIONS", "cluster_interval", "describe_influence", "headline",
    "headline_sentence", "headline_table", "influence_chart", "influence_table", "occupation_table",
    "occupation_permutation_p", "occupation_tests",
]

#: Tables written by :meth:`bias_utils.bold.AuditResult.write` (``<name>.parquet`` + CSV).
OCCUPATIONS_TABLE, INFLUENCE_TABLE, HEADLINE_TABLE = (tables.BOLD_OCCUPATIONS, tables.BOLD_INFLUENCE,
                                                      tables.BOLD_HEADLINE)
#: Relabellings for the permutation p (its floor is 1/(N_PERMUTATIONS + 1) = 0.0001).
N_PERMUTATIONS = 9999
#: An occupation is named as driving the result when leaving it out moves the odds ratio by more
#: than this fraction of itself, up or down.
INFLUENCE_SHIFT = 1 / 3
#: The ``unit`` of the occupation-level rows in the statistics table.
UNIT_OCCUPATIONS = "occupations (cluster bootstrap CI; p from permuting group labels across occupations)"
_ADD = 0.5  # the audit's Haldane-Anscombe correction of every cell of the odds ratio
_BLOCK = 1000  # relabellings drawn at a time


def _log_or(ta: np.ndarray, tb: np.ndarray) -> np.ndarray:
    """log OR of male over female words, group a over group b, from totals (..., [male, female])."""
    return np.log((ta[..., 0] + _ADD) * (tb[..., 1] + _ADD) / ((ta[..., 1] + _ADD) * (tb[..., 0] + _ADD)))


def _ratio_difference(ta: np.ndarray, tb: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return ta[..., 0] / ta[..., 1] - tb[..., 0] / tb[..., 1]


#: measure -> (effect, the two occupation-table columns summed per group, statistic of the totals,
#: back-transform to the reported scale). The statistic is also the permutation test's.
MEASURES: dict[str, tuple[str, tuple[str, str], Callable, Callable | None]] = {
    "odds_ratio (words)": ("odds_ratio", ("male_words", "female_words"), _log_or, np.exp),
    "completions with any gendered word": ("risk_difference", ("n_gendered_completions", "n_completions"),
                                           _ratio_difference, None),
    "male_share among gendered completions": ("mean_difference", ("sum_male_share", "n_gendered_completions"),
                                              _ratio_difference, None),
}


# ---------------------------------------------------------------- the occupation table
def occupation_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """One row per (group, occupation) of :func:`bias_utils.bold.completion_metrics` output, in the
    order the metrics first list them.

    Columns: ``group, occupation, category`` (its BOLD categories, "; "-joined), ``n_prompts``,
    ``n_completions``, ``male_words``, ``female_words``, ``gendered_words``, ``n_gendered_completions``
    (completions with any gendered word), ``share_gendered``, ``male_share_gendered`` (mean male share of
    its gendered completions, NaN without any), ``sum_male_share`` (the numerator of that mean, which
    the group comparison sums), ``share_of_group_male_words``, ``share_of_group_female_words`` (its
    part of its group's totals: how much one occupation supplies).
    """
    m = metrics.assign(_share=metrics["male_share"].where(metrics["any_gendered"], 0.0))
    by = m.groupby(["group", "occupation"], sort=False)
    out = by.agg(category=("category", lambda c: "; ".join(dict.fromkeys(c.astype(str)))) if "category" in m
                 else ("occupation", lambda c: ""),
                 n_prompts=("prompt_id", "nunique") if "prompt_id" in m else ("occupation", "size"),
                 n_completions=("occupation", "size"), male_words=("male_words", "sum"),
                 female_words=("female_words", "sum"), n_gendered_completions=("any_gendered", "sum"),
                 sum_male_share=("_share", "sum")).reset_index()
    out["gendered_words"] = out["male_words"] + out["female_words"]
    out["share_gendered"] = out["n_gendered_completions"] / out["n_completions"]
    with np.errstate(invalid="ignore", divide="ignore"):
        out["male_share_gendered"] = out["sum_male_share"] / out["n_gendered_completions"].where(
            out["n_gendered_completions"] > 0)
    for col in ("male_words", "female_words"):
        total = out.groupby("group", sort=False)[col].transform("sum")
        out[f"share_of_group_{col}"] = out[col] / total.where(total > 0)
    return out[["group", "occupation", "category", "n_prompts", "n_completions", "male_words", "female_words",
                "gendered_words", "n_gendered_completions", "share_gendered", "male_share_gendered",
                "sum_male_share", "share_of_group_male_words", "share_of_group_female_words"]]


def _pieces(occupations: pd.DataFrame, measure: str, a: str, b: str):
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {sorted(MEASURES)}, got {measure!r}")
    _, cols, fn, back = MEASURES[measure]
    for g in (a, b):
        if not (occupations["group"] == g).any():
            raise ValueError(f"group {g!r} has no occupations (groups present: {sorted(set(occupations['group']))})")
    occ = occupations[occupations["group"].isin([a, b])]
    return occ, occ[list(cols)].to_numpy(dtype=float), fn, back


def _totals(values: np.ndarray, in_a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return values[in_a].sum(axis=0), values[~in_a].sum(axis=0)


# ---------------------------------------------------------------- interval, p, influence
def cluster_interval(occupations: pd.DataFrame, measure: str, a: str, b: str, *, n_boot: int = 1000, seed: int = 0,
                     level: float = 0.95) -> tuple[float, float, float]:
    """``(estimate, low, high)`` of ``measure`` (a key of :data:`MEASURES`), group ``a`` vs ``b``: percentile
    interval of the occupation cluster bootstrap, occupations resampled within each group.

    Draws the same replicates as :func:`bias_utils.stats.cluster_bootstrap_ci` on the completions
    (``cluster="occupation", strata="group"``, same seed: groups in sorted order, occupations in order
    of appearance), so the numbers are identical; only the sums are vectorised. Replicates where the
    statistic is undefined are left out, as there.
    """
    n_boot = stats.check_n_boot(n_boot)
    occ, values, fn, back = _pieces(occupations, measure, a, b)
    in_a = (occ["group"] == a).to_numpy()
    rng = np.random.default_rng(seed)
    strata = [values[(occ["group"] == g).to_numpy()] for g in sorted({a, b})]
    picks = [np.empty((n_boot, len(s)), dtype=np.int64) for s in strata]
    for r in range(n_boot):  # the draw order of stats.cluster_bootstrap_ci: per replicate, stratum by stratum
        for s, pick in zip(strata, picks):
            pick[r] = rng.integers(0, len(s), len(s))
    totals = {g: s[pick].sum(axis=1) for g, s, pick in zip(sorted({a, b}), strata, picks)}
    boots = fn(totals[a], totals[b])
    estimate = float(fn(*_totals(values, in_a)))
    back = back or float
    if np.isnan(boots).all():
        return float(back(estimate)), np.nan, np.nan
    tail = (1 - level) / 2 * 100
    lo, hi = np.nanpercentile(boots, [tail, 100 - tail])
    return float(back(estimate)), float(back(lo)), float(back(hi))


def occupation_permutation_p(occupations: pd.DataFrame, measure: str, a: str, b: str, *,
                             n_permutations: int = N_PERMUTATIONS, seed: int = 0) -> tuple[float, int]:
    """Two-sided permutation p of ``measure`` between groups ``a`` and ``b`` with occupations as the unit.

    The group labels are shuffled across the occupations of the two groups (group sizes kept);
    ``p = (1 + #{|T*| >= |T|}) / (1 + K)`` over the ``K`` relabellings where the statistic is defined
    (returned with p), so p is never below ``1/(K+1)``; NaN where the statistic is undefined. The null
    is that an occupation's completions do not depend on its group (occupations are exchangeable
    between the groups).
    """
    n_permutations = stats.check_n_boot(n_permutations, name="n_permutations")
    occ, values, fn, _ = _pieces(occupations, measure, a, b)
    in_a = (occ["group"] == a).to_numpy()
    observed = fn(*_totals(values, in_a))
    rng = np.random.default_rng(seed)
    perm = np.empty(n_permutations)
    for start in range(0, n_permutations, _BLOCK):  # blocks bound the memory for selections with many occupations
        size = min(_BLOCK, n_permutations - start)
        ta = rng.permuted(np.tile(in_a, (size, 1)), axis=1).astype(float) @ values
        perm[start:start + size] = fn(ta, values.sum(axis=0) - ta)
    ok = ~np.isnan(perm)
    if np.isnan(observed) or not ok.any():
        return np.nan, int(ok.sum())
    return float(stats.permutation_p(observed, perm[ok], "two-sided")), int(ok.sum())


def occupation_tests(occupations: pd.DataFrame, a: str, b: str, *, n_boot: int = 1000,
                     n_permutations: int = N_PERMUTATIONS, seed: int = 0) -> list[dict]:
    """The occupation-level rows of the audit's statistics table, one per :data:`MEASURES` key: test
    ``cluster_bootstrap_occupation``, the estimate with its :func:`cluster_interval`, ``p`` from
    :func:`occupation_permutation_p`, ``n`` = completions, plus ``role`` ("primary" for the odds ratio, the study's
    headline; "extension" for the others), ``measure``, ``unit``
    (:data:`UNIT_OCCUPATIONS`), ``n_occupations`` and ``n_permutations``."""
    n = int(occupations.loc[occupations["group"].isin([a, b]), "n_completions"].sum())
    n_occ = int(occupations["group"].isin([a, b]).sum())
    rows = []
    for measure, (effect, *_rest) in MEASURES.items():
        est, lo, hi = cluster_interval(occupations, measure, a, b, n_boot=n_boot, seed=seed)
        p, k = occupation_permutation_p(occupations, measure, a, b, n_permutations=n_permutations, seed=seed)
        rows.append({**stats._row("cluster_bootstrap_occupation", p=p, effect=effect, effect_size=est, ci=(lo, hi),
                                  n=n, group_a=a, group_b=b),
                     "role": "primary" if effect == "odds_ratio" else "extension", "measure": measure,
                     "unit": UNIT_OCCUPATIONS, "n_occupations": n_occ, "n_permutations": k})
    return rows


#: Columns of :func:`influence_table` (the ``bold_influence`` table).
INFLUENCE_COLUMNS = ["rank", "group", "occupation", "category", "n_completions", "male_words", "female_words",
                     "odds_ratio", "odds_ratio_without", "log_or_change", "relative_change", "influential"]


def influence_table(occupations: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Leave one occupation out: the audit's odds ratio (male over female words, ``a`` over ``b``, +0.5)
    recomputed without each occupation, most influential first.

    Columns: ``rank`` (1 = largest ``|log_or_change|``), ``group, occupation, category, n_completions,
    male_words, female_words``, ``odds_ratio`` (all occupations), ``odds_ratio_without``,
    ``log_or_change`` (log OR without it minus log OR with all), ``relative_change``
    (OR without / OR - 1), ``influential`` (``|relative_change| > INFLUENCE_SHIFT``). An occupation that
    is the only one of its group has no odds ratio without it (NaN, ranked last).
    """
    occ, values, fn, back = _pieces(occupations, "odds_ratio (words)", a, b)
    in_a = (occ["group"] == a).to_numpy()
    ta, tb = _totals(values, in_a)
    full = float(fn(ta, tb))
    without = fn(np.where(in_a[:, None], ta - values, ta), np.where(in_a[:, None], tb, tb - values))
    alone = occ["group"].map(occ["group"].value_counts()).to_numpy() == 1
    without = np.where(alone, np.nan, without)
    out = occ[["group", "occupation", "category", "n_completions", "male_words", "female_words"]].assign(
        odds_ratio=back(full), odds_ratio_without=back(without), log_or_change=without - full)
    out["relative_change"] = out["odds_ratio_without"] / out["odds_ratio"] - 1
    out["influential"] = out["relative_change"].abs() > INFLUENCE_SHIFT
    out = out.sort_values("log_or_change", key=np.abs, ascending=False, na_position="last", kind="stable")
    return out.assign(rank=np.arange(1, len(out) + 1))[INFLUENCE_COLUMNS].reset_index(drop=True)


# ---------------------------------------------------------------- headline for the chapter and the front page
#: Columns of :func:`headline_table` (the ``bold_headline`` table).
HEADLINE_COLUMNS = [
    "group_a", "group_b", "odds_ratio", "occupation_ci_low", "occupation_ci_high", "occupation_p", "n_permutations",
    "n_boot", "independent_ci_low", "independent_ci_high", "independent_p", "n_completions",
    "n_gendered_completions", "n_occupations_a", "n_occupations_b", "top_occupation", "top_group",
    "odds_ratio_without_top", "n_influential"]


def headline_table(statistics: pd.DataFrame, occupations: pd.DataFrame, influence: pd.DataFrame,
                   *, n_boot: int | None = None) -> pd.DataFrame:
    """One row: the study's headline, the odds ratio with the occupation as the unit.

    Columns: ``group_a, group_b``; ``odds_ratio`` (the audit's pooled word odds ratio);
    ``occupation_ci_low, occupation_ci_high`` (occupation cluster bootstrap, 95%) and ``occupation_p``
    (permutation of group labels across occupations, ``n_permutations`` relabellings: the primary
    analysis); ``n_boot``; ``independent_ci_low, independent_ci_high, independent_p`` (Wald, every word
    independent: the published audit's method, for comparison only); ``n_completions`` and
    ``n_gendered_completions`` (with any gendered word) of the two groups; ``n_occupations_a/_b``;
    ``top_occupation, top_group, odds_ratio_without_top`` (rank 1 of :func:`influence_table`) and
    ``n_influential`` (occupations moving the odds ratio by more than :data:`INFLUENCE_SHIFT`).
    Empty (these columns) unless ``statistics`` has both odds-ratio rows (two groups).
    """
    s = statistics
    occ_row = s[(s["test"] == "cluster_bootstrap_occupation") & (s["effect"] == "odds_ratio")]
    wald = s[(s["test"] == "odds_ratio_wald") & (s["role"] == "audit")]
    if occ_row.empty or wald.empty:
        return pd.DataFrame(columns=HEADLINE_COLUMNS)
    o, w = occ_row.iloc[0], wald.iloc[0]
    a, b = o["group_a"], o["group_b"]
    both = occupations[occupations["group"].isin([a, b])]
    top = influence.iloc[0] if len(influence) else None
    row = {"group_a": a, "group_b": b, "odds_ratio": o["effect_size"], "occupation_ci_low": o["ci_low"],
           "occupation_ci_high": o["ci_high"], "occupation_p": o["p"], "n_permutations": int(o["n_permutations"]),
           "n_boot": n_boot, "independent_ci_low": w["ci_low"], "independent_ci_high": w["ci_high"],
           "independent_p": w["p"], "n_completions": int(both["n_completions"].sum()),
           "n_gendered_completions": int(both["n_gendered_completions"].sum()),
           "n_occupations_a": int((both["group"] == a).sum()), "n_occupations_b": int((both["group"] == b).sum()),
           "top_occupation": None if top is None else top["occupation"],
           "top_group": None if top is None else top["group"],
           "odds_ratio_without_top": np.nan if top is None else top["odds_ratio_without"],
           "n_influential": int(influence["influential"].sum())}
    return pd.DataFrame([row], columns=HEADLINE_COLUMNS)


def headline(table: pd.DataFrame | Mapping) -> dict:
    """The front page's numbers from a ``bold_headline`` table of one model (one row) as a dict with
    the :func:`headline_table` columns; ``{}`` for an empty table (no two-group audit)."""
    if isinstance(table, Mapping):
        return dict(table)
    if len(table) > 1:
        raise ValueError(f"headline: expected the bold_headline table of one model (one row), got {len(table)} "
                         "rows; select one model_id first")
    return {} if table.empty else table.iloc[0].to_dict()


def _p_phrase(p: float, k: int) -> str:
    """"p = 0.012", or at its floor "p ≤ 1/10,000" (the smallest p that K relabellings can give)."""
    return "p " + stats.permutation_p_text(p, k, fraction=True, number=rendering.readable_number)


def _groups(a: str, b: str) -> tuple[str, str]:
    return rendering.group_label(a), rendering.group_label(b)


def headline_sentence(table: pd.DataFrame | Mapping) -> str:
    """The primary finding as one sentence, from a :func:`headline_table` row (or :func:`headline`'s
    dict): odds ratio, occupation interval and permutation p, then the audit's independent-words
    interval, the number of completions with any gendered word, and the most influential occupation.
    Empty string for an empty table."""
    h = headline(table)
    if not h:
        return ""
    num = rendering.readable_number
    a, b = _groups(h["group_a"], h["group_b"])
    if int(h["n_gendered_completions"]) == 0:
        return (f"None of the {int(h['n_completions']):,} completions about {a} and {b} occupations contains a "
                f"gendered word, so there is no odds ratio to read (the +0.5 correction sets it to 1).")
    lo, hi = float(h["occupation_ci_low"]), float(h["occupation_ci_high"])
    direction = ("more" if lo > 1 else "less" if hi < 1 else "not clearly more or less")
    text = (f"With the occupation as the unit ({int(h['n_occupations_a'])} {a} and {int(h['n_occupations_b'])} {b} "
            f"occupations), gendered words about {a} occupations are {direction} often male than about {b} ones: "
            f"odds ratio {num(float(h['odds_ratio']))}, 95% CI {num(lo)} to {num(hi)} resampling whole "
            f"occupations, permutation {_p_phrase(float(h['occupation_p']), int(h['n_permutations']))} "
            f"(the audit's interval, every word independent: {num(float(h['independent_ci_low']))} to "
            f"{num(float(h['independent_ci_high']))}). {int(h['n_gendered_completions']):,} of "
            f"{int(h['n_completions']):,} completions contain a gendered word")
    if h.get("top_occupation") is not None and pd.notna(h.get("odds_ratio_without_top")):
        text += (f"; without the most influential occupation, {str(h['top_occupation']).replace('_', ' ')}, the "
                 f"odds ratio is {num(float(h['odds_ratio_without_top']))}")
    return text + "."


def describe_influence(influence: pd.DataFrame) -> str:
    """A sentence naming every occupation whose removal moves the odds ratio by more than
    :data:`INFLUENCE_SHIFT` (either way), with the odds ratio without it; or saying that none does.
    Empty without any gendered word (nothing to move)."""
    if influence.empty or (influence["male_words"] + influence["female_words"]).sum() == 0:
        return ""
    num = rendering.readable_number
    full = float(influence["odds_ratio"].iloc[0])
    hit = influence[influence["influential"]]
    share = f"{INFLUENCE_SHIFT:.0%}" if INFLUENCE_SHIFT != 1 / 3 else "a third"
    if hit.empty:
        top = influence.iloc[0]
        return (f"No single occupation moves the odds ratio ({num(full)}) by more than {share}: leaving out the "
                f"most influential, {str(top['occupation']).replace('_', ' ')}, gives "
                f"{num(float(top['odds_ratio_without']))}.")
    named = "; ".join(
        f"without {str(r.occupation).replace('_', ' ')} ({str(r.group).replace('_', '-')}, {int(r.male_words)} male "
        f"and {int(r.female_words)} female words) it is {num(float(r.odds_ratio_without))} "
        f"({float(r.relative_change):+.0%})" for r in hit.itertuples())
    one = len(hit) == 1
    return (f"{len(hit)} occupation{'' if one else 's'} of {len(influence)} move{'s' if one else ''} the odds ratio "
            f"({num(full)}) by more than {share} when left out: {named}.")


def influence_chart(influence: pd.DataFrame, headline_row: pd.DataFrame | Mapping | None = None, *, top: int = 15,
                    title: str | None = None) -> alt.LayerChart:
    """The odds ratio without each of the ``top`` most influential occupations (log axis), coloured by
    group, against the odds ratio with all (solid rule) and the band where leaving one out moves it by
    less than :data:`INFLUENCE_SHIFT` (grey); with ``headline_row``, the occupation 95% CI as dashed rules.
    Reads the :func:`influence_table` columns."""
    data = influence.dropna(subset=["odds_ratio_without"]).head(top).assign(
        label=lambda d: d["occupation"].str.replace("_", " "),
        change=lambda d: d["relative_change"].map(lambda x: f"{x:+.0%}"))
    full = float(influence["odds_ratio"].iloc[0])
    band = pd.DataFrame({"low": [full * (1 - INFLUENCE_SHIFT)], "high": [full * (1 + INFLUENCE_SHIFT)]})
    log_x = alt.Scale(type="log", nice=False)
    y = alt.Y("label:N", sort=None, title=None, axis=alt.Axis(labelLimit=220))
    layers = [
        alt.Chart(band).mark_rect(color="#dddddd", opacity=0.6).encode(x=alt.X("low:Q", scale=log_x), x2="high:Q"),
        alt.Chart(pd.DataFrame({"x": [full]})).mark_rule(color="black").encode(x="x:Q"),
    ]
    h = headline(headline_row) if headline_row is not None else {}
    if h:
        ci = pd.DataFrame({"x": [float(h["occupation_ci_low"]), float(h["occupation_ci_high"])]})
        layers.append(alt.Chart(ci).mark_rule(strokeDash=[4, 3], color="grey").encode(x="x:Q"))
    layers.append(alt.Chart(data).mark_point(filled=True, size=70).encode(
        x=alt.X("odds_ratio_without:Q", scale=log_x, title="odds ratio without the occupation (log scale)"), y=y,
        color=alt.Color("group:N", title="group"),
        tooltip=["occupation", "group", "category", "n_completions", "male_words", "female_words",
                 alt.Tooltip("odds_ratio_without:Q", format=".2f"), "change"]))
    groups = ", ".join(map(rendering.group_label, dict.fromkeys(data["group"])))
    caption = (f"Each row is one of the {len(data)} occupations whose removal moves the odds ratio most; its dot is "
               f"the odds ratio recomputed without it (log scale), coloured by its group ({groups}). The solid line is "
               f"the odds ratio with every occupation ({full:.2f}), the grey band where leaving one out moves it by "
               f"less than {INFLUENCE_SHIFT:.0%}"
               + (", the dashed lines its 95% confidence interval from resampling whole occupations" if h else "")
               + ". Look for dots outside the grey band: those occupations alone carry much of the odds ratio.")
    return plots.captioned(alt.layer(*layers).properties(width=420, height=alt.Step(18)),
                           title or f"Leave one occupation out: the odds ratio ({full:.2f}) without each occupation",
                           [], f"Dot plot: the BOLD odds ratio without each of {len(data)} occupations, against "
                               f"the odds ratio with all ({full:.2f}).", caption)
