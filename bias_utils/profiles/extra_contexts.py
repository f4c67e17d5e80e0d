"""The full dictionary's extra terms in generated contexts: the tracked data file, its reader and its CLI.

The extra terms (Table 2) are embedded in generated contexts too, as in the
paper. They are generated once, by
``python -m bias_utils.profiles.extra_contexts generate-extra --model qwen2.5-coder-0.5b-instruct --seed 0``,
into the tracked file ``data/generated/extra_terms_contexts.jsonl`` (settings in
the ``.json`` beside it; :func:`generate_extra_contexts`, read by
:func:`extra_term_contexts`, coverage by :func:`extra_coverage`). The model was
chosen by ``compare-models`` (:func:`compare_generators`, tables in
``data/generated/model_choice_*.csv``).

A term none of whose first-round samples gave a usable context gets a second
round (``--round 2``): the :data:`RETRY_INSTRUCTION` prompt variant, which asks
for the word exactly as written, into its own file
(``extra_terms_contexts_round2.jsonl`` with its settings beside it), resumable
in the same way. Why a prompt variant and not a looser matcher: on 60 dropped
samples of 12 terms the model had written another word (``humor`` for
``humour``, ``frigid`` for ``frigidity``, ``exploiting`` for ``exploitation``)
or none; capitalisation, quotes and hyphenation caused no false drop. The
reader takes a term's first-round contexts, else its second-round ones, and
records the round.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..core import precision
from ..core.cache import atomic_write_json, atomic_write_text
from ..core.errors import ParameterError
from ..core.paths import data_dir
from ..models.builtin_models import model_name
from .context_filters import FILTER_VERSION
from .contexts import (
    DEFAULT_GENERATOR,
    GENERATION_INSTRUCTION,
    GENERATION_SETTINGS,
    ContextSet,
    context_rows,
    finish,
    generate_usable,
    generation_prompt,
    prepare_dictionary,
    skip,
)
from .dictionaries import limit_terms, load_full_dictionary_terms, read_dictionary

__all__ = [
    "describe_coverage", "extra_coverage", "merged_extra_contexts", "read_model_choice",
]

_EXTRA_CONTEXTS_FILE = "generated/extra_terms_contexts.jsonl"
#: Terms per call of ``generation.generate``: the file is rewritten after each, so an interrupted run leaves a
#: usable file, and the generation cache makes the next run resume where it stopped.
_EXTRA_CHUNK = 25
#: The second round's prompt: the paper's instruction, asking for the word exactly as written.
_RETRY_INSTRUCTION = (
    'Write one short sentence that contains the exact word "{term}", spelled exactly like that and not changed '
    "into another form. Do not use any names and do not use gender-specific pronouns such as he, she, him, her, "
    "his or hers; refer to people in a gender-neutral way. Reply with the sentence only."
)
_ROUNDS = (1, 2)


def _extra_contexts_path(path=None, round: int = 1) -> Path:
    """The round's file: ``path`` (round 1) or the file beside it (round 2), default under ``data/generated``."""
    first = Path(path) if path else data_dir() / _EXTRA_CONTEXTS_FILE
    return first if round == 1 else first.with_name(first.stem + "_round2" + first.suffix)


def _settings_path(path: Path) -> Path:
    return path.with_suffix(".json")


def _extra_term_prompt(term: str) -> str:
    """The paper's instruction without a definition: the full dictionary does not say which sense a term has
    (Sec. 3.2 adds WordNet definitions for the seed dictionary only)."""
    return generation_prompt(term)


def _retry_prompt(term: str) -> str:
    """The second round's prompt for ``term`` (:data:`RETRY_INSTRUCTION`)."""
    return _RETRY_INSTRUCTION.format(term=term)


def _round2_terms(path=None) -> pd.DataFrame:
    """The first-round file's terms without a usable context, in the file's (shuffled) order."""
    table, _ = _read_extra_contexts(path)
    return table.loc[table["contexts"].str.len() == 0, ["dimension", "term", "direction"]].reset_index(drop=True)


def _generate_extra_contexts(model, terms: pd.DataFrame | None = None, *, seed: int = 0, path=None,
                            n_keep: int = 5, generation: dict | None = None, limit: int | None = None,
                            chunk: int = _EXTRA_CHUNK, progress: bool = True, round: int = 1,
                            dictionary=None) -> Path:
    """Generate, filter and write contexts for the full dictionary's extra terms (one JSON line per term).

    Terms (default ``dictionaries.load_full_dictionary_terms()``) are processed in
    an order shuffled with ``seed``, so a file cut short covers every dimension and
    pole evenly; ``limit`` stops after that many terms. Each line: ``dimension,
    term, direction, contexts`` (up to ``n_keep`` usable ones, :func:`context_filters.usable_contexts`),
    ``n_generated`` and ``dropped`` (``{reason: count}``). The settings (model id,
    seed, sampling, prompt template, filter version, order) go to the sidecar
    ``<file>.json``. Completions come from ``generation.generate`` (seeded, cached):
    a rerun reuses them and continues where an interrupted one stopped.

    ``round=2`` runs the second round on :func:`round2_terms` of the first-round
    file (``terms`` is then ignored; they keep the first round's order) with
    :func:`retry_prompt` into :func:`extra_contexts_path` ``(path, 2)``.
    ``dictionary``: a dictionary CSV whose terms are generated instead (the README
    example's file, ``data/generated/user_example_contexts.jsonl``).
    """
    if round not in _ROUNDS:
        raise ParameterError(f"round must be one of {_ROUNDS}, got {round!r}")
    from ..models.loading import load_model  # deferred: torch, only needed to generate new contexts

    if round == 2:
        order = _round2_terms(path)
    else:
        terms = read_dictionary(dictionary) if dictionary is not None else \
            load_full_dictionary_terms() if terms is None else terms
        order = terms[["dimension", "term", "direction"]].sample(frac=1.0, random_state=seed).reset_index(drop=True)
    model = load_model(model) if isinstance(model, str) else model
    settings = {**GENERATION_SETTINGS, **(generation or {})}
    n_total = len(order)
    if limit is not None:
        order = order.head(limit)
    prompt = _retry_prompt if round == 2 else _extra_term_prompt
    path = _extra_contexts_path(path, round)
    meta = {"model_id": model.model_id, "seed": seed, "generation": settings, "chat": True,
            "prompt_template": _RETRY_INSTRUCTION if round == 2 else GENERATION_INSTRUCTION,
            "sense_clause": "none (the extra terms have no known sense)",
            "filter_version": FILTER_VERSION, "n_keep": n_keep, "chunk": chunk,
            "order": ("the first round's terms without a usable context, in its order" if round == 2 else
                      "terms shuffled with pandas sample(frac=1, random_state=seed)"),
            "command": ("python -m bias_utils.profiles.extra_contexts generate-extra "
                        f"--model {model.name} --seed {seed}"
                        + (" --round 2" if round == 2 else "")
                        + (f" --dictionary {dictionary} --out {path}" if dictionary is not None else "")),
            "n_terms_total": n_total}
    if round == 2:
        meta["round"] = 2
    lines = []
    done = _reusable_extra_lines(path, meta)
    for start in range(0, len(order), chunk):
        part = order.iloc[start:start + chunk]
        todo = part[~part["term"].isin(done)]
        results = {}
        if len(todo):
            senses = todo.assign(sense_id=todo["term"])
            results = dict(zip(todo["term"], generate_usable(model, senses, [prompt(t) for t in todo["term"]],
                                                             list(todo["term"]), seed=seed, settings=settings,
                                                             progress=progress)))
        for _, row in part.iterrows():
            if row["term"] in done:
                lines.append(done[row["term"]])
                continue
            kept, n_generated, dropped = results[row["term"]]
            reasons = pd.Series([d["reason"].split(":")[0] for d in dropped], dtype=object).value_counts()
            lines.append(json.dumps({**row.to_dict(), "contexts": kept[:n_keep], "n_generated": n_generated,
                                     "dropped": {k: int(v) for k, v in reasons.items()}}, ensure_ascii=False))
        atomic_write_text(path, "\n".join(lines) + "\n")
        atomic_write_json(_settings_path(path), {**meta, "n_terms_done": len(lines)})
    return path



def known_generated_contexts(generator=DEFAULT_GENERATOR, *, seed: int = 0, n_contexts: int = 5,
                             generation: dict | None = None) -> dict[str, dict]:
    """``{term: {"contexts", "n_generated", "generator"}}`` from the project's first-round generated-contexts files
    (``data/generated/*.jsonl`` with their settings beside them: the extra terms' and the README example's) made by
    ``generator`` (a built-in name or a loaded model) with the prompt without a definition, the settings a sense's
    contexts are generated with now (``n_samples = n_contexts``, ``generation``), ``seed`` and the current filters:
    what generating them again would give, so ``contexts.build_contexts(known=...)`` uses them as made. Files made
    otherwise are not read."""
    name = generator if isinstance(generator, str) else getattr(generator, "model_id", None)
    wanted = _identity({"seed": seed, "chat": True, "prompt_template": GENERATION_INSTRUCTION,
                        "filter_version": FILTER_VERSION,
                        "generation": {**GENERATION_SETTINGS, "n_samples": n_contexts, **(generation or {})}})
    known: dict[str, dict] = {}
    for path in sorted((data_dir() / "generated").glob("*.jsonl")):
        try:
            settings = json.loads(_settings_path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        held = _identity(settings)
        same = all(held[k] == wanted[k] for k in ("seed", "chat", "prompt_template", "filter_version", "generation"))
        model_id = str(settings.get("model_id", ""))
        if not same or held["round"] not in (None, 1) or not (model_id == name or model_id.startswith(f"{name}--")):
            continue
        table, _ = _read_extra_contexts(path)
        for r in table.itertuples():
            known.setdefault(r.term, {"contexts": list(r.contexts), "n_generated": int(r.n_generated),
                                      "generator": model_id})
    return known


#: Sidecar settings that decide a line's content: a line is reused only when all of them match.
_EXTRA_IDENTITY = ("model_id", "seed", "generation", "chat", "prompt_template", "filter_version", "n_keep", "round")


def _identity(meta: dict) -> dict:
    # A sidecar written before top-k existed has no "top_k": that is top_k=None.
    generation = {k: v for k, v in (meta.get("generation") or {}).items() if v is not None}
    return {**{k: meta.get(k) for k in _EXTRA_IDENTITY}, "generation": generation}


def _reusable_extra_lines(path: Path, meta: dict) -> dict[str, str]:
    """``{term: line}`` of an existing file made with the same settings, so a rerun (even with an empty
    generation cache) generates only the terms the file lacks."""
    settings_path = _settings_path(path)
    if not (path.is_file() and settings_path.is_file()):
        return {}
    with open(settings_path, encoding="utf-8") as f:
        if _identity(json.load(f)) != _identity(meta):
            return {}
    with open(path, encoding="utf-8") as f:
        return {json.loads(line)["term"]: line.rstrip("\n") for line in f if line.strip()}

def _read_extra_contexts(path=None, round: int = 1) -> tuple[pd.DataFrame, dict]:
    """One round's generated contexts file: ``(table, settings)``; one row per term with columns
    ``dimension, term, direction, contexts, n_generated, dropped``."""
    path = _extra_contexts_path(path, round)
    if not path.is_file():
        raise ParameterError(f"no generated contexts file at {path}; make it with "
                             "python -m bias_utils.profiles.extra_contexts "
                           "generate-extra --model qwen2.5-coder-0.5b-instruct --seed 0")
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ParameterError(f"{path} line {i} is not valid JSON: {exc}") from None
    with open(_settings_path(path), encoding="utf-8") as f:
        settings = json.load(f)
    columns = ["dimension", "term", "direction", "contexts", "n_generated", "dropped"]
    return pd.DataFrame(rows, columns=columns), settings


def merged_extra_contexts(path=None) -> tuple[pd.DataFrame, dict]:
    """Both rounds as one table: a term's first-round contexts, else its second-round ones.

    Adds ``round`` (the round whose contexts the row holds: the last one attempted
    when neither gave a usable context), and sums ``n_generated`` and the
    ``dropped`` counts over the rounds. Settings: the first round's, with the
    second round's under ``"round2"`` (absent when it has not been run).
    """
    first, settings = _read_extra_contexts(path)
    first = first.assign(round=1)
    if not _extra_contexts_path(path, 2).is_file():
        return first, settings
    second, settings2 = _read_extra_contexts(path, 2)
    retry = second.set_index(["dimension", "term"])
    rows = []
    for r in first.to_dict("records"):
        key = (r["dimension"], r["term"])
        if not r["contexts"] and key in retry.index:
            s = retry.loc[key]
            dropped = dict(r["dropped"])
            for k, v in s["dropped"].items():
                dropped[k] = dropped.get(k, 0) + v
            r = {**r, "contexts": s["contexts"], "n_generated": r["n_generated"] + s["n_generated"],
                 "dropped": dropped, "round": 2}
        rows.append(r)
    return pd.DataFrame(rows, columns=list(first.columns)), {**settings, "round2": settings2}


def extra_term_contexts(terms: pd.DataFrame, n_contexts: int = 5, path=None) -> ContextSet:
    """Contexts for ``terms`` from the generated file, as a :class:`ContextSet`.

    A term missing from the file, or with no usable context in it, is a row of
    ``skipped`` with its reason (never a WordNet fallback).
    """
    table, settings = merged_extra_contexts(path)
    found = {(r.dimension, r.term): r for r in table.itertuples()}
    origin = settings["model_id"]
    rows, skipped = [], []
    for _, sense in prepare_dictionary(terms).iterrows():
        entry = found.get((sense["dimension"], sense["term"]))
        if entry is None:
            skipped.append(skip(sense, "generated", "not in the generated contexts file (generation not run for it)"))
        elif not entry.contexts:
            skipped.append(skip(sense, "generated", f"none of {entry.n_generated} generated contexts "
                                 f"({entry.round} round{'s' if entry.round > 1 else ''}) was usable "
                                 f"({', '.join(f'{k} {v}' for k, v in entry.dropped.items())})"))
        else:
            rows += context_rows(sense, list(entry.contexts)[:n_contexts], origin, "generated")
    return finish(rows, skipped)


def extra_coverage(terms: pd.DataFrame | None = None, path=None) -> pd.DataFrame:
    """Terms with at least one generated context, per dimension and pole.

    Columns: ``dimension, direction, n_terms`` (all extra terms), ``n_generated``
    (terms the first round has attempted), ``n_covered_round1`` (>= 1 usable
    context in the first round), ``n_round2`` (first-round failures the second
    round has attempted), ``n_covered_round2`` (those it covered), ``n_covered``
    (either round), ``coverage`` (``n_covered / n_terms``), ``mean_contexts``
    (per covered term); plus a ``total`` row.
    """
    if terms is None:
        terms = load_full_dictionary_terms()
    table, settings = merged_extra_contexts(path)
    table = table.assign(n=table["contexts"].str.len())
    keys = ["dimension", "direction"]
    attempted2 = set()
    if "round2" in settings:
        second, _ = _read_extra_contexts(path, 2)
        attempted2 = set(zip(second["dimension"], second["term"]))
    table["tried2"] = [k in attempted2 for k in zip(table["dimension"], table["term"])]
    out = terms.groupby(keys).size().rename("n_terms").to_frame()
    covered = table[table["n"] > 0]
    counts = {"n_generated": table, "n_covered_round1": covered[covered["round"] == 1],
              "n_round2": table[table["tried2"]], "n_covered_round2": covered[covered["round"] == 2],
              "n_covered": covered}
    for name, frame in counts.items():
        out[name] = frame.groupby(keys).size()
    out["mean_contexts"] = covered.groupby(keys)["n"].mean()
    out = out.fillna({name: 0 for name in counts}).reset_index()
    total = {"dimension": "total", "direction": "", "n_terms": out["n_terms"].sum(),
             **{name: out[name].sum() for name in counts},
             "mean_contexts": covered["n"].mean() if len(covered) else np.nan}
    out = pd.concat([out, pd.DataFrame([total])], ignore_index=True)
    out[list(counts)] = out[list(counts)].astype(int)
    out.insert(len(out.columns) - 1, "coverage", out["n_covered"] / out["n_terms"])
    return out


def describe_coverage(coverage: pd.DataFrame, settings: dict, min_terms: int) -> str:
    """Markdown reading :func:`extra_coverage` (and the first round's ``settings``, from
    :func:`merged_extra_contexts`): how the contexts were generated, how many terms each round covered (a second
    round that is not in the data is said to be absent, with the command that runs it), the least covered poles,
    and the poles with fewer than ``min_terms`` covered terms (their axis is untestable)."""
    total = coverage[coverage["dimension"] == "total"].iloc[0]
    poles = coverage[coverage["dimension"] != "total"].sort_values(["coverage", "n_terms"])
    count, share = precision.count_text, precision.percent_text
    gen = settings.get("generation", {})
    model = model_name(settings.get("model_id", "an unrecorded model"))  # the name the book gives it elsewhere
    how = (f"The contexts of the extra terms were generated by {model} with the paper's prompt: "
           f"{count(gen.get('n_samples'))} samples per term at temperature {gen.get('temperature')}, nucleus "
           f"top-p {gen.get('top_p')}" + ("" if gen.get("top_k") is None else f", top-k {gen['top_k']}")
           + f", at most {count(gen.get('max_new_tokens'))} new tokens, seed {settings.get('seed')}; at most "
           f"{count(settings.get('n_keep'))} usable samples kept per term.")
    failures = int(total.n_generated - total.n_covered_round1)
    second = (f"the second round, asking for the word exactly as written, retried {count(total.n_round2)} of its "
              f"{count(failures)} failures and covered {count(total.n_covered_round2)} of them"
              if total.n_round2 else
              f"the data holds no second-round file, so none of its {count(failures)} failures was retried "
              "(`python -m bias_utils.profiles.extra_contexts generate-extra --round 2` retries them)")
    least = "; ".join(f"{r.dimension} {r.direction} {count(r.n_covered)} of {count(r.n_terms)} "
                      f"({share(r.coverage)})" for r in poles.head(3).itertuples())
    few = poles[poles["n_covered"] < min_terms]
    text = (f"{how} The first round attempted {count(total.n_generated)} of the {count(total.n_terms)} extra terms "
            f"and gave {count(total.n_covered_round1)} of them at least one usable context; {second}. In all, "
            f"{count(total.n_covered)} terms ({share(total.coverage)}) are covered, with "
            f"{precision.number_text(total.mean_contexts)} usable contexts each on average. Least covered: {least}.")
    if len(few):
        text += (f" Fewer than {min_terms} covered terms, so that axis is untestable: "
                 + "; ".join(f"{r.dimension} {r.direction} ({count(r.n_covered)})" for r in few.itertuples()) + ".")
    return text


_MODEL_CHOICE_FILES = {"summary": "generated/model_choice_summary.csv", "reasons": "generated/model_choice_reasons.csv",
                      "kept": "generated/model_choice_kept.csv"}
_USER_EXAMPLE_DICTIONARY = "examples/user_dictionary_example.csv"


def read_model_choice() -> dict[str, pd.DataFrame]:
    """The generator comparison that ``compare-models`` wrote (``summary``, ``reasons``, ``kept``; see
    :data:`MODEL_CHOICE_FILES`), as chapter 03 shows it."""
    return {key: pd.read_csv(data_dir() / name) for key, name in _MODEL_CHOICE_FILES.items()}


def _model_choice_senses(per_pole: int = 3, seed: int = 0) -> pd.DataFrame:
    """The senses the generators are compared on: ``per_pole`` extra terms per dimension and pole
    (``dictionaries.limit_terms``) and the example user dictionary's senses (``data/examples``)."""

    extra = limit_terms(load_full_dictionary_terms(), per_pole, seed)[["dimension", "term", "direction"]]
    user = read_dictionary(data_dir() / _USER_EXAMPLE_DICTIONARY)[["dimension", "term", "direction"]]
    out = pd.concat([extra.assign(sample="extra terms"), user.assign(sample="user example")], ignore_index=True)
    return out.assign(sense_id=out["term"] + "|" + out["dimension"])


def _compare_generators(models, senses: pd.DataFrame | None = None, *, n_samples: int = 3, seed: int = 0,
                       progress: bool = True) -> dict[str, pd.DataFrame]:
    """Generate ``n_samples`` contexts per sense with each model and filter them
    (:func:`context_filters.usable_contexts`).

    Returns ``summary`` (``model_id, n_senses, n_generated, n_kept, share_kept,
    n_covered`` (senses with >= 1 kept), ``share_covered, n_first_word``),
    ``reasons`` (``model_id, reason, n, share`` of the generated) and ``kept``
    (``model_id, sample, dimension, term, direction, context``).
    """
    from ..models.loading import load_model  # deferred: torch, only needed to generate new contexts

    senses = (_model_choice_senses() if senses is None else senses).reset_index(drop=True)
    summary, reasons, kept_rows = [], [], []
    for name in models:
        model = load_model(name) if isinstance(name, str) else name
        settings = {**GENERATION_SETTINGS, "n_samples": n_samples}
        prompts = [_extra_term_prompt(t) for t in senses["term"]]
        results = generate_usable(model, senses, prompts, list(range(len(senses))), seed=seed, settings=settings,
                                  progress=progress)
        dropped = [d for _, _, drops in results for d in drops]
        n_kept, n_covered = sum(len(k) for k, _, _ in results), sum(bool(k) for k, _, _ in results)
        n_out = sum(n for _, n, _ in results)
        for (_, sense), (kept, _, _) in zip(senses.iterrows(), results):
            kept_rows += [{"model_id": model.model_id, **sense[["sample", "dimension", "term", "direction"]].to_dict(),
                           "context": c} for c in kept]
        counts = pd.Series([d["reason"].split(":")[0] for d in dropped], dtype=object).value_counts()
        reasons += [{"model_id": model.model_id, "reason": r, "n": int(k), "share": k / n_out}
                    for r, k in counts.items()]
        summary.append({"model_id": model.model_id, "n_senses": len(senses), "n_generated": n_out, "n_kept": n_kept,
                        "share_kept": n_kept / n_out, "n_covered": n_covered,
                        "share_covered": n_covered / len(senses),
                        "n_samples": n_samples, "seed": seed})
    return {"summary": pd.DataFrame(summary), "reasons": pd.DataFrame(reasons), "kept": pd.DataFrame(kept_rows)}


def _main(argv=None) -> None:


    parser = argparse.ArgumentParser(prog="python -m bias_utils.profiles.extra_contexts",
                                     description="Generated contexts for the full dictionary's extra terms.")
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate-extra", help="generate (or resume) the extra terms' contexts file")
    gen.add_argument("--model", default=DEFAULT_GENERATOR)
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--limit", type=int, default=None, help="stop after this many terms (in the shuffled order)")
    gen.add_argument("--out", default=None, help=f"output file (default data/{_EXTRA_CONTEXTS_FILE})")
    gen.add_argument("--round", type=int, default=1, choices=_ROUNDS,
                     help="2: the retry prompt for the first round's terms without a usable context")
    gen.add_argument("--dictionary", default=None, help="generate the terms of this dictionary CSV instead")
    sub.add_parser("coverage", help="print the coverage table of the extra terms' contexts file")
    cmp_ = sub.add_parser("compare-models", help="measure the share of usable contexts per generator model "
                          f"(writes data/{_MODEL_CHOICE_FILES['summary']} and its siblings)")
    cmp_.add_argument("--models", nargs="+", default=["smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct"])
    cmp_.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "compare-models":

        for key, table in _compare_generators(args.models, seed=args.seed).items():
            atomic_write_text(data_dir() / _MODEL_CHOICE_FILES[key], table.to_csv(index=False))
            print(table.to_string(index=False) if key != "kept" else f"{len(table)} kept contexts")
        return
    if args.command == "generate-extra":
        print(_generate_extra_contexts(args.model, seed=args.seed, path=args.out, limit=args.limit, round=args.round,
                                      dictionary=args.dictionary))
    print(extra_coverage(path=getattr(args, "out", None)).to_string(index=False))


if __name__ == "__main__":
    _main()
