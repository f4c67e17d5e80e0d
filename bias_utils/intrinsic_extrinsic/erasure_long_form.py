"""What a decoder writes at length under chapter 12's erasure: does the erasure that moves the next word move the
long form? (chapter 12, issue 55)

Chapter 11's long form (``audit.long_form``) asks whether the next word predicts what a model writes when it is asked
for a whole text about one person in an occupation; chapter 12 erases the gender concept and measures the next word
again. This module writes the long form again under the erasures chapter 12 reads, beside their random controls.

**Conditions** (:func:`plan`), in this order: the unhooked model; LEACE and a random subspace of its rank (chapter 12's
control for LEACE) at the curve's largest effect on the next word (``erasure_statistics.largest_effect_layer``), then
the same two at the state the rule stated before chapter 12's results names (``erasure_statistics.best_tradeoff_layer``)
when it is another; one pair where the two coincide; a state that is missing (no fall on the curve, no state meeting
the rule) writes nothing and the reading says so. Every condition writes the same prompts with the same seed through
``models.hooks.erasing``; the unhooked texts are the generation cache's where chapter 11 wrote them with the same
settings (the cache's rows are keyed by prompt and sample, so one instruction of chapter 11's three, one sample of its
two, reads them free); an erased condition is cached under the model's erased id, which ends in a hash of its
erasers (:func:`eraser_tag`): a rerun writes nothing.

**The texts** (:data:`ERASED_INSTRUCTIONS`, :data:`ERASED_SAMPLES`, ``audit.long_form.MAX_NEW_TOKENS``): one
instruction, the biography, one sample per occupation, chapter 11's length. Every condition costs a whole generation
of the occupations (the hooks cost nothing beside it); a biography names its person and refers to them most. They are
counted as chapter 11 counts them (``audit.long_form.long_form_table``).

**Per condition** (:func:`long_form_erasure_table`; :data:`LONG_FORM_MEASURES`): the long form's female share against
the BLS share of women (Spearman's ρ, the primary: what the erasure of chapter 12 moves in the next word) and against
the unhooked model's next-word log-ratio (ρ), the mean female share in the female- and in the male-majority
occupations and their gap, and the share of texts with a gendered word. Each erased condition's change from the
unhooked model, and LEACE's change beyond its random control's at the same state, with 95% percentile intervals from
resampling occupations paired across the conditions: the same occupations in all three (unhooked, LEACE, random), those
with a gendered word in each (a share needs one), so a change is never the other occupations'.

**The reading** (:func:`describe_long_form_erasure`): whether an erasure moves the long form beyond its random control
(the difference's interval excludes 0) in either of two measures, and where it moves each most: the primary ρ with the
BLS share, and the share of texts with a gendered word (an erasure that breaks the text, or stops the model naming a
gender, moves what it writes while leaving too few gendered words for a ρ). "Not shown" only where that interval
includes 0; a ρ over equal shares is said not computed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..audit import long_form
from ..audit.next_word import next_word_table
from ..core import tables
from ..core.errors import ParameterError, check_seed
from ..core.precision import count_text, interval_text, number_text, percent_text
from ..core.results import display_name, first_row, write_tables
from ..core.stats import check_n_boot, percentile_interval, resamples, rowwise_correlation
from ..models.hooks import erasing
from ..models.loading import resolve_model
from ..profiles.populations import OCCUPATION_GROUPS, load_populations, occupation_shares
from .erasers import ALL
from .erasure_measures import sentence_nll

__all__: list[str] = []

#: The instructions written under erasure: chapter 11's first, the biography (a subset: each condition costs a whole
#: generation of the occupations, and a biography names its person and refers to them most).
ERASED_INSTRUCTIONS = long_form.INSTRUCTIONS[:1]
#: One sample per occupation and instruction (chapter 11 writes two).
ERASED_SAMPLES = 1
#: The measures, the primary first, with what each is (:func:`_measures`).
LONG_FORM_MEASURES = {
    "rho_bls": "Spearman's ρ of the long-form female share with the BLS share of women",
    "rho_next_word": "Spearman's ρ of the long-form female share with the unhooked next-word log-ratio",
    "female_share_female_majority": "mean long-form female share over the female-majority occupations",
    "female_share_male_majority": "mean long-form female share over the male-majority occupations",
    "majority_gap": "the female-majority occupations' mean female share minus the male-majority ones'",
    "any_gendered_share": "share of the texts with a gendered word (mean over occupations)",
    "text_nats": "mean nats per token of the texts alone under the unhooked model (mean over occupations): how "
                 "broken they read to it",
}
#: Which place each condition reads (:func:`plan`).
ROLES = {"none": "without erasure", "largest": "where the next word moves most",
         "named": "the state chapter 12's rule names",
         "both": "where the next word moves most, and the state chapter 12's rule names"}
#: The control beside LEACE at each state.
CONTROL = "random"
_COLUMNS = ["model_id", "erasure", "layer", "role", "measure", "value", "value_ci_low", "value_ci_high", "baseline",
            "change", "ci_low", "ci_high", "beyond_control", "beyond_control_ci_low", "beyond_control_ci_high", "n",
            "n_texts", "resampled", long_form.LONG_FORM_DEFINITION]
#: The measures over every occupation (the others need a gendered word in the texts of each condition compared).
_EVERY_OCCUPATION = ("any_gendered_share", "text_nats")
#: The texts of every condition: the condition, then chapter 11's columns.
_TEXT_COLUMNS = ["erasure", "layer", *long_form.TEXT_COLUMNS]


def check_long_form_erasure(instructions=None, n_samples=ERASED_SAMPLES, max_new_tokens=long_form.MAX_NEW_TOKENS, *,
                            prefix: str = "") -> tuple[str, ...]:
    """The instructions as a tuple (None: :data:`ERASED_INSTRUCTIONS`), with ``n_samples`` and ``max_new_tokens``
    checked by chapter 11's rule (``audit.long_form.check_long_form``); a :class:`ParameterError` names the parameter
    after ``prefix`` (the notebook's ``long_form_``)."""
    return long_form.check_long_form(ERASED_INSTRUCTIONS if instructions is None else instructions, n_samples,
                                     max_new_tokens, prefix=prefix)


def plan(largest: str | None, named: str | None) -> list[tuple[str, str, str]]:
    """The conditions as ``(erasure, layer, role)`` (module docstring): the unhooked model, then LEACE and its
    control at the ``largest`` effect's state, then at the ``named`` state where it is another; a None state writes
    nothing. ``role``: a key of :data:`ROLES`."""
    places = [(largest, "both" if largest == named else "largest")] if largest is not None else []
    if named is not None and named != largest:
        places.append((named, "named"))
    return [("none", "none", "none"), *[(e, layer, role) for layer, role in places for e in ("leace", CONTROL)]]


def eraser_tag(erasure: str, layer: str, erasers: Mapping) -> str:
    """The erased model's name tag: the condition and a hash of its erasers' numbers, so that a generation cached
    under one eraser is never read for another (a refitted LEACE, another seed's random subspace)."""
    digest = hashlib.sha256()
    for state in sorted(erasers):
        digest.update(str(state).encode())
        for part in (erasers[state].proj_left, erasers[state].proj_right, erasers[state].bias):
            if part is not None:
                digest.update(np.ascontiguousarray(part.detach().cpu().numpy(), dtype=np.float64).tobytes())
    return f"longform-{erasure}-{layer}-{digest.hexdigest()[:12]}"


def texts_under(model, conditions: Mapping[tuple[str, str], Mapping], nouns: Sequence[str], *,
                instructions: Sequence[str], n_samples: int, max_new_tokens: int, seed: int, n_boot: int,
                cache: bool = True, progress: bool = True) -> dict:
    """The long form (``audit.long_form.long_form_table``) of ``nouns`` under each condition, ``{(erasure, layer):
    erasers}`` (an empty mapping: the unhooked model), every one with the same instructions, samples, length and
    seed (``models.hooks.erasing``, tagged by :func:`eraser_tag`)."""
    model = resolve_model(model, need="generate")
    found = {}
    for (erasure, layer), erasers in conditions.items():
        with erasing(model, erasers, eraser_tag(erasure, layer, erasers)) as hooked:
            found[(erasure, layer)] = long_form.long_form_table(
                hooked, nouns, instructions=instructions, n_samples=n_samples, max_new_tokens=max_new_tokens,
                seed=seed, n_boot=n_boot, cache=cache, progress=progress)
    return found


def text_nats(model, texts: pd.DataFrame) -> pd.Series:
    """Per occupation of ``texts`` (``audit.long_form``'s columns), the mean over its texts of each text's nats per
    token under the unhooked ``model``, the text read alone (``erasure_measures.sentence_nll``: every token after the
    first, over their count): an erasure that breaks what the model writes makes its texts surprising to the model
    it erased, so a fall in gendered words beside a rise here is in part a fall in text. A text of one token or none
    is NaN."""
    model = resolve_model(model)
    completions = texts["completion"].fillna("").astype(str).tolist()
    scored = [len(model.tokenizer(c)["input_ids"]) - 1 for c in completions]
    nll = sentence_nll(model, completions)
    per_token = pd.Series([n / k if k > 0 else np.nan for n, k in zip(nll, scored)], index=texts.index)
    return per_token.groupby(texts["occupation"], sort=False).mean()


# --------------------------------------------------------------------------- the statistics


def _measures(share: np.ndarray, gendered: np.ndarray, values: pd.DataFrame, kept: np.ndarray,
              draws: np.ndarray, every: np.ndarray, nats: np.ndarray) -> dict[str, tuple[float, np.ndarray]]:
    """Per measure of :data:`LONG_FORM_MEASURES`, ``(value, values over the resamples)`` of one condition: ``share`` and
    ``gendered`` its long-form female share and share of texts with a gendered word per occupation (``values``'
    order), ``kept`` the occupations the shares' measures are paired on, ``draws`` [R, kept] and ``every`` [R, all]
    the resampled positions; ``nats`` the texts' mean nats per token under the unhooked model per occupation (NaN
    where not measured)."""
    bls, ratio = values["bls_pct_female"].to_numpy(float)[kept], values["log_ratio"].to_numpy(float)[kept]
    female = (values["group"] == OCCUPATION_GROUPS[0]).to_numpy()[kept]
    f = share[kept]
    out = {}
    for measure, x in (("rho_bls", bls), ("rho_next_word", ratio)):
        out[measure] = (float(rowwise_correlation("spearman", f[None], x[None])[0]),
                        rowwise_correlation("spearman", f[draws], x[draws]))
    with np.errstate(invalid="ignore", divide="ignore"):
        for measure, side in (("female_share_female_majority", female), ("female_share_male_majority", ~female)):
            w = side[draws]
            out[measure] = (float(f[side].mean()) if side.any() else np.nan, (f[draws] * w).sum(1) / w.sum(1))
    out["majority_gap"] = tuple(a - b for a, b in zip(out["female_share_female_majority"],
                                                      out["female_share_male_majority"]))
    out["any_gendered_share"] = (float(gendered.mean()), gendered[every].mean(1))
    out["text_nats"] = ((float(nats.mean()), nats[every].mean(1)) if np.isfinite(nats).all() else
                        (np.nan, np.full(len(every), np.nan)))
    return out


def _interval(boots: np.ndarray) -> tuple[float, float]:
    finite = boots[np.isfinite(boots)]
    return percentile_interval(finite, 0.95) if len(finite) else (np.nan, np.nan)


def long_form_erasure_table(forms: Mapping[tuple[str, str], object], roles: Mapping[str, str],
                            values: pd.DataFrame, model_id: str, *, n_boot: int, seed: int,
                            nats: Mapping[tuple[str, str], pd.Series] | None = None) -> pd.DataFrame:
    """One row per condition of ``forms`` and measure of :data:`LONG_FORM_MEASURES` (module docstring). ``roles``:
    each erased state's role (:data:`ROLES`); ``values``: one row per occupation with ``occupation, group,
    bls_pct_female, log_ratio`` (the unhooked next word); ``nats``: per condition, its texts' mean nats per token
    under the unhooked model per occupation (:func:`text_nats`; None: the ``text_nats`` rows are NaN).

    Columns: ``model_id``, ``erasure`` (``none``, ``leace``, ``random``), ``layer`` (the erased hidden state, or
    ``none``), ``role``, ``measure``, ``value`` with ``value_ci_low, value_ci_high`` (95%, resampling its
    occupations), ``baseline`` (the unhooked model's value on the same occupations), ``change`` (value − baseline)
    with ``ci_low, ci_high`` (paired), ``beyond_control`` (LEACE's rows: its change minus its random control's at the
    same state, with ``beyond_control_ci_low, beyond_control_ci_high``, paired), ``n`` (the occupations the value is
    on: those with a gendered word in the unhooked, LEACE and random texts of the state, every occupation for
    ``any_gendered_share``), ``n_texts`` (of the condition), ``resampled`` and ``long_form_definition``. The unhooked
    rows are on every occupation with a gendered word; their change is 0, without an interval."""
    check_n_boot(n_boot)
    order = values["occupation"].tolist()
    per = {c: f.occupations.set_index("occupation").reindex(order) for c, f in forms.items()}
    shares = {c: p["female_share"].to_numpy(float) for c, p in per.items()}
    gendered = {c: p["any_gendered_share"].to_numpy(float) for c, p in per.items()}
    surprise = {c: nats[c].reindex(order).to_numpy(float) if nats else np.full(len(order), np.nan) for c in per}
    ratio = np.isfinite(values["log_ratio"].to_numpy(float))
    every = resamples(len(order), n_boot, seed)
    base = ("none", "none")
    definition = next(iter(forms.values())).texts[long_form.LONG_FORM_DEFINITION].iloc[0]
    rows = []

    def add(condition, role, mine, reference, control, n, n_texts):
        for measure in LONG_FORM_MEASURES:
            value, boots = mine[measure]
            low, high = _interval(boots)
            row = {"model_id": model_id, "erasure": condition[0], "layer": condition[1], "role": role,
                   "measure": measure, "value": value, "value_ci_low": low, "value_ci_high": high,
                   "n": len(order) if measure in _EVERY_OCCUPATION else n, "n_texts": n_texts,
                   "resampled": "occupations", long_form.LONG_FORM_DEFINITION: definition}
            if reference is None:
                row |= {"baseline": value, "change": 0.0}
            else:
                (ref, ref_boots) = reference[measure]
                row |= {"baseline": ref, "change": value - ref}
                row["ci_low"], row["ci_high"] = _interval(boots - ref_boots)
            if control is not None:
                ctrl, ctrl_boots = control[measure]
                row["beyond_control"] = value - ctrl
                row["beyond_control_ci_low"], row["beyond_control_ci_high"] = _interval(boots - ctrl_boots)
            rows.append(row)

    kept = np.isfinite(shares[base]) & ratio
    add(base, "none", _measures(shares[base], gendered[base], values, kept, resamples(int(kept.sum()), n_boot, seed),
                                every, surprise[base]), None, None, int(kept.sum()), len(forms[base].texts))
    for layer in dict.fromkeys(lay for e, lay in forms if e != "none"):
        pair = [c for c in (("leace", layer), (CONTROL, layer)) if c in forms]
        kept = np.logical_and.reduce([np.isfinite(shares[c]) for c in (base, *pair)]) & ratio
        draws = resamples(int(kept.sum()), n_boot, seed)
        found = {c: _measures(shares[c], gendered[c], values, kept, draws, every, surprise[c])
                 for c in (base, *pair)}
        for c in pair:
            control = found.get((CONTROL, layer)) if c[0] == "leace" else None
            add(c, roles[layer], found[c], found[base], control, int(kept.sum()), len(forms[c].texts))
    return pd.DataFrame(rows).reindex(columns=_COLUMNS)


# --------------------------------------------------------------------------- the reading


def _row(table: pd.DataFrame, erasure: str, layer: str, measure: str) -> pd.Series | None:
    return first_row(table, erasure=erasure, layer=layer, measure=measure)


def _points(share, signed: bool = False) -> str:
    """A share, or a change of one, in whole percentage points: "45", "+3" (``signed``), "−65"."""
    text = count_text(100 * share)
    return "+" + text if signed and np.isfinite(share) and round(100 * share) > 0 else text


def _change(row: pd.Series, column: str = "change") -> str:
    """A change with its interval, "−0.30 (95% CI −0.55 to −0.05)", a share's in percentage points; or, ``column``
    ``beyond_control``, LEACE's difference from its control."""
    low, high = ("ci_low", "ci_high") if column == "change" else (f"{column}_ci_low", f"{column}_ci_high")
    if row["measure"] == "any_gendered_share":
        return f"{_points(row[column], signed=True)} points (95% CI {_points(row[low])} to {_points(row[high])})"
    return f"{number_text(row[column], signed=True)} (95% CI {interval_text(row[low], row[high], row[column])})"


def _shown(row: pd.Series) -> int | None:
    """Whether LEACE's difference from its control is shown: -1 below 0, 1 above 0, 0 where its interval includes 0,
    None where either change is not computed (a ρ of equal shares, too few occupations) or has no interval."""
    low, high = row["beyond_control_ci_low"], row["beyond_control_ci_high"]
    if not all(np.isfinite(row[c]) for c in ("change", "beyond_control", "beyond_control_ci_low",
                                             "beyond_control_ci_high")):
        return None
    return -1 if high < 0 else 1 if low > 0 else 0


def _where(layer: str, depth: int | None) -> str:
    """"at hidden state 15 of 30, 50% of the way up"."""
    if layer == ALL:
        return "at every hidden state together"
    return f"at hidden state {layer}" + (f" of {depth}, {percent_text(int(layer) / depth)} of the way up"
                                         if depth else "")


#: What each measure the reading reads is, in its sentences.
_READ = {"rho_bls": "How the female share of its gendered words follows the BLS share (ρ)",
         "any_gendered_share": "The share of its texts with a gendered word"}


def _verdict(row: pd.Series) -> str:
    return {-1: "falls beyond its random control", 1: "rises beyond its random control",
            0: "is not shown to move beyond its random control (not shown is not absent)",
            None: "cannot be compared with its random control here"}[_shown(row)]


def _state_text(table: pd.DataFrame, layer: str, depth: int | None) -> str:
    """What LEACE and its control at ``layer`` do to the long form: the texts with a gendered word, the primary ρ,
    the majority gap."""
    carried, ctrl_carried = (_row(table, e, layer, "any_gendered_share") for e in ("leace", CONTROL))
    rho, ctrl = (_row(table, e, layer, "rho_bls") for e in ("leace", CONTROL))
    gap, ctrl_gap = (_row(table, e, layer, "majority_gap") for e in ("leace", CONTROL))
    nats, ctrl_nats = (_row(table, e, layer, "text_nats") for e in ("leace", CONTROL))
    text = (f" LEACE {_where(layer, depth)} ({ROLES[rho['role']]}): the share of texts with a gendered word goes "
            f"from {percent_text(carried['baseline'])} to {percent_text(carried['value'])}, a change of "
            f"{_change(carried)}, where a random subspace of the same rank changes it by {_change(ctrl_carried)}; "
            f"LEACE beyond its control {_change(carried, 'beyond_control')}: it {_verdict(carried)}.")
    where = f"over the {count_text(int(rho['n']))} occupations with a gendered word in all three conditions"
    if _shown(rho) is None or not np.isfinite(ctrl["change"]):
        text += (f" ρ with the BLS share cannot be compared {where}: the unhooked, erased or random texts give "
                 "them equal female shares.")
    else:
        text += (f" ρ with the BLS share, {where}, goes from {number_text(rho['baseline'])} to "
                 f"{number_text(rho['value'])}, a change of {_change(rho)}, where the random subspace changes it by "
                 f"{_change(ctrl)}; LEACE beyond its control {_change(rho, 'beyond_control')}: it {_verdict(rho)}.")
    text += (f" The female-majority occupations' female share minus the male-majority ones' is "
             f"{_points(gap['baseline'])} percentage points without erasure and {_points(gap['value'])} with "
             f"it (random: {_points(ctrl_gap['value'])}).")
    return text + _broken(nats, ctrl_nats)


def _broken(nats: pd.Series | None, ctrl: pd.Series | None) -> str:
    """How surprising LEACE's texts at a state are to the unhooked model beside its control's, and, where they are
    shown to be more so, that the erasure breaks the text (its gendered-word changes are then partly that)."""
    if nats is None or ctrl is None or not np.isfinite(nats["value"]):
        return ""
    text = (f" To the unhooked model, LEACE's texts read at {number_text(nats['value'])} nats per token, against "
            f"{number_text(nats['baseline'])} without erasure and {number_text(ctrl['value'])} under the random "
            f"subspace; beyond its control {_change(nats, 'beyond_control')}")
    if _shown(nats) == 1:
        return text + (": **LEACE's texts are shown to read as more broken than its control's**, so part of what it "
                       "takes from the texts' gender is the text itself.")
    return text + "."


def _answer(table: pd.DataFrame, name: str, layers: list[str], depth: int | None) -> str:
    """The plain answer: whether an erasure moves the long form beyond its random control, and per measure of
    :data:`_READ` where it moves the most (or the largest difference, not shown)."""
    found = {m: [r for r in (_row(table, "leace", layer, m) for layer in layers) if _shown(r) is not None]
             for m in _READ}
    moved = {m: [r for r in rows if _shown(r) != 0] for m, rows in found.items()}
    if any(moved.values()):
        text = f"**Erasing the gender concept moves what {name} writes at length beyond its random control.**"
    else:
        text = (f"**No erasure is shown to move what {name} writes at length beyond its random control** (not shown "
                "is not absent).")
    for measure, what in _READ.items():
        if moved[measure]:
            most = max(moved[measure], key=lambda r: abs(r["beyond_control"]))
            text += (f" {what} moves the most {_where(most['layer'], depth)}: LEACE's change minus "
                     f"the random subspace's is {_change(most, 'beyond_control')}.")
        elif found[measure]:
            most = max(found[measure], key=lambda r: abs(r["beyond_control"]))
            text += (f" {what} is not shown to move beyond the control at any state read; the largest "
                     f"difference, {_where(most['layer'], depth)}, is {_change(most, 'beyond_control')}.")
        else:
            text += f" {what} cannot be compared with the control at any state read."
    return text


def describe_long_form_erasure(table: pd.DataFrame, model_id: str, procedure: str = "",
                               depth: int | None = None) -> str:
    """Markdown reading :func:`long_form_erasure_table` for ``model_id``: how the texts were written (``procedure``,
    ``audit.long_form.procedure_text``), the unhooked long form, then in plain words whether an erasure moves it
    beyond its random control, and where the most, in the share of texts with a gendered word and in how the female
    share follows the BLS share (the primary); then each state's erasure, and a note for each state chapter 12 did not
    give (``depth``: the model's hidden states, to say how far up a state is)."""
    name = display_name(model_id)
    if not len(table):
        return (f"Chapter 12 gives no state to write {name}'s long form under: ρ falls at no single hidden state on "
                "its curve, and no state meets its rule.")
    layers = list(dict.fromkeys(table.loc[table["erasure"] == "leace", "layer"]))
    text = procedure + (f"The same prompts and seeds under {count_text(1 + 2 * len(layers))} conditions: without "
                        "erasure, and LEACE with a random subspace of its rank at each state below. ")
    rho, nxt = _row(table, "none", "none", "rho_bls"), _row(table, "none", "none", "rho_next_word")
    fem, male = (_row(table, "none", "none", f"female_share_{g}_majority") for g in ("female", "male"))
    carried = _row(table, "none", "none", "any_gendered_share")
    text += (f"Without erasure, the female share of the gendered words {name} writes follows the BLS share of women "
             f"with ρ = {number_text(rho['value'])} (95% CI {interval_text(rho['value_ci_low'], rho['value_ci_high'])}"
             f") over the {count_text(int(rho['n']))} occupations with a gendered word, and its unhooked next word's "
             f"log-ratio with ρ = {number_text(nxt['value'])} (95% CI "
             f"{interval_text(nxt['value_ci_low'], nxt['value_ci_high'])}); the female share is "
             f"{percent_text(fem['value'])} in the female-majority occupations and {percent_text(male['value'])} in "
             f"the male-majority ones; {percent_text(carried['value'])} of its texts carry a gendered word. ")
    text += _answer(table, name, layers, depth)
    for layer in layers:
        text += _state_text(table, layer, depth)
    roles = set(table["role"])
    if not roles & {"named", "both"}:
        text += " No state meets chapter 12's rule, so there is no named erasure to write under."
    if not roles & {"largest", "both"}:
        text += " ρ falls at no single hidden state on chapter 12's curve, so it has no largest effect to write under."
    return text + " Intervals: 95%, resampling occupations, paired across the conditions."


@dataclass
class _LongFormErasure:
    """What :func:`long_form_under_erasure` finds: the ``table`` (:func:`long_form_erasure_table`), every condition's
    ``texts`` (``audit.long_form``'s columns after ``erasure, layer``), the ``model_id``, whether the texts went
    through a chat template (``chat``), their most new tokens (``max_new_tokens``) and the model's ``depth``."""

    table: pd.DataFrame
    texts: pd.DataFrame
    model_id: str
    chat: bool
    max_new_tokens: int
    depth: int

    def write(self, folder: str | Path) -> list[Path]:
        """Write both tables as parquet + CSV under ``folder``."""
        return write_tables(folder, {tables.NAMES.ERASURE_LONG_FORM: self.table,
                                     tables.NAMES.ERASURE_LONG_FORM_TEXTS: self.texts})

    def describe(self) -> str:
        """The chapter's reading (:func:`describe_long_form_erasure`)."""
        unhooked = self.texts[self.texts["erasure"] == "none"]
        procedure = long_form.procedure_text(unhooked, self.chat, self.max_new_tokens) if len(unhooked) else ""
        return describe_long_form_erasure(self.table, self.model_id, procedure, self.depth)


def long_form_under_erasure(model, erasure, *, occupations: Sequence[str], instructions: Sequence[str] | None = None,
                            n_samples: int = ERASED_SAMPLES, max_new_tokens: int = long_form.MAX_NEW_TOKENS,
                            seed: int = 0, n_boot: int = 1000, cache: bool = True,
                            progress: bool = True) -> _LongFormErasure:
    """The long form of ``occupations`` (BLS nouns) under the erasures of ``erasure`` (chapter 12's result: its
    ``erasers``, ``largest_layer`` and ``best_layer``) that :func:`plan` picks, by ``model`` (the decoder it was
    fitted on), with the unhooked next word's log-ratio (``audit.next_word.next_word_table``, its cache chapter 11's)
    and the table of :func:`long_form_erasure_table`. ``instructions`` (None: :data:`ERASED_INSTRUCTIONS`),
    ``n_samples``, ``max_new_tokens``, ``seed`` and ``n_boot`` are checked first (:func:`check_long_form_erasure`)."""
    instructions = check_long_form_erasure(instructions, n_samples, max_new_tokens)
    check_seed(seed)
    check_n_boot(n_boot)
    shares = occupation_shares().set_index("occupation")
    unknown = [o for o in occupations if o not in shares.index]
    if unknown or not len(occupations):
        raise ParameterError(f"occupations: {'no occupation' if not unknown else unknown[:5]} given where BLS "
                             "occupation nouns are needed (the long form under erasure is read against their share "
                             "of women)")
    model = resolve_model(model, need="generate")
    conditions = plan(erasure.largest_layer, erasure.best_layer)
    roles = {layer: role for _, layer, role in conditions}
    if len(conditions) == 1:
        return _LongFormErasure(pd.DataFrame(columns=_COLUMNS), pd.DataFrame(columns=_TEXT_COLUMNS), model.model_id,
                                False, max_new_tokens, model.n_layers)
    forms = texts_under(model, {(e, layer): erasure.erasers(e, layer) for e, layer, _ in conditions},
                        list(occupations), instructions=instructions, n_samples=n_samples,
                        max_new_tokens=max_new_tokens, seed=seed, n_boot=n_boot, cache=cache, progress=progress)
    group = {noun: g for g, nouns in load_populations("occupations").items() for noun in nouns}
    exact = next_word_table(model, list(occupations), progress=False).occupations.set_index("occupation")
    values = pd.DataFrame({"occupation": list(occupations), "group": [group[o] for o in occupations],
                           "bls_pct_female": shares.loc[list(occupations), "bls_pct_female"].to_numpy(float),
                           "log_ratio": exact.loc[list(occupations), "log_ratio"].to_numpy(float)})
    # scored outside every hook: the unhooked model reads each condition's texts
    nats = {c: text_nats(model, f.texts) for c, f in forms.items()}
    table = long_form_erasure_table(forms, roles, values, model.model_id, n_boot=n_boot, seed=seed, nats=nats)
    texts = pd.concat([f.texts.assign(erasure=e, layer=layer) for (e, layer), f in forms.items()],
                      ignore_index=True)[_TEXT_COLUMNS]
    chat = next(iter(forms.values())).chat
    return _LongFormErasure(table, texts, model.model_id, chat, max_new_tokens, model.n_layers)
