"""The full dictionary's extra terms in generated contexts: the tracked data file, its reader and its CLI.

The extra terms (Table 2) are embedded in generated contexts too, as in the
paper. They are generated once, by
``python -m bias_utils.extra_contexts generate-extra --model qwen2.5-coder-0.5b-instruct --seed 0``,
into the tracked file ``data/generated/extra_terms_contexts.jsonl`` (settings in
the ``.json`` beside it; :func:`generate_extra_contexts`, read by
:func:`extra_term_contexts`, coverage by :func:`extra_coverage`). The model was
chosen by ``compare-models`` (:func:`compare_generators`, tables in
``data/generated/model_choice_*.csv``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from .cache import atomic_write_json, atomic_write_text
from .context_filters import FILTER_VERSION, _names, usable_contexts
from .contexts import (
    GENERATION_INSTRUCTION,
    GENERATION_SETTINGS,
    ContextError,
    ContextSet,
    _finish,
    _rows,
    _skip,
    generation_prompt,
    prepare_dictionary,
)
from .dictionaries import limit_terms, load_full_dictionary_terms, read_dictionary
from .paths import data_dir

__all__ = [
    "compare_generators", "extra_contexts_path", "extra_coverage", "extra_term_contexts", "extra_term_prompt",
    "generate_extra_contexts", "model_choice_senses", "read_extra_contexts",
]

EXTRA_CONTEXTS_FILE = "generated/extra_terms_contexts.jsonl"
#: Terms per call of ``generation.generate``: the file is rewritten after each, so an interrupted run leaves a
#: usable file, and the generation cache makes the next run resume where it stopped.
EXTRA_CHUNK = 25


def extra_contexts_path(path=None) -> Path:

    return Path(path) if path else data_dir() / EXTRA_CONTEXTS_FILE


def _settings_path(path: Path) -> Path:
    return path.with_suffix(".json")


def extra_term_prompt(term: str) -> str:
    """The paper's instruction without a definition: the full dictionary does not say which sense a term has
    (Sec. 3.2 adds WordNet definitions for the seed dictionary only)."""
    return generation_prompt(term)


def generate_extra_contexts(model, terms: pd.DataFrame | None = None, *, seed: int = 0, path=None,
                            n_keep: int = 5, generation: dict | None = None, limit: int | None = None,
                            chunk: int = EXTRA_CHUNK, progress: bool = True) -> Path:
    """Generate, filter and write contexts for the full dictionary's extra terms (one JSON line per term).

    Terms (default ``dictionaries.load_full_dictionary_terms()``) are processed in
    an order shuffled with ``seed``, so a file cut short covers every dimension and
    pole evenly; ``limit`` stops after that many terms. Each line: ``dimension,
    term, direction, contexts`` (up to ``n_keep`` usable ones, :func:`usable_contexts`),
    ``n_generated`` and ``dropped`` (``{reason: count}``). The settings (model id,
    seed, sampling, prompt template, filter version, order) go to the sidecar
    ``<file>.json``. Completions come from ``generation.generate`` (seeded, cached):
    a rerun reuses them and continues where an interrupted one stopped.
    """
    # deferred: torch, only needed to generate new contexts
    from .generation import generate
    from .models import load_model

    if terms is None:

        terms = load_full_dictionary_terms()
    model = load_model(model) if isinstance(model, str) else model
    settings = {**GENERATION_SETTINGS, **(generation or {})}
    order = terms[["dimension", "term", "direction"]].sample(frac=1.0, random_state=seed).reset_index(drop=True)
    n_total = len(order)
    if limit is not None:
        order = order.head(limit)
    path = extra_contexts_path(path)
    meta = {"model_id": model.model_id, "seed": seed, "generation": settings, "chat": True,
            "prompt_template": GENERATION_INSTRUCTION, "sense_clause": "none (the extra terms have no known sense)",
            "filter_version": FILTER_VERSION, "n_keep": n_keep, "chunk": chunk,
            "order": "terms shuffled with pandas sample(frac=1, random_state=seed)",
            "command": f"python -m bias_utils.extra_contexts generate-extra --model {model.name} --seed {seed}",
            "n_terms_total": n_total}
    names, lines = _names(), []
    done = _reusable_extra_lines(path, meta)
    for start in range(0, len(order), chunk):
        part = order.iloc[start:start + chunk]
        todo = part[~part["term"].isin(done)]
        by_term = {}
        if len(todo):
            out = generate(model, [extra_term_prompt(t) for t in todo["term"]], prompt_ids=list(todo["term"]),
                           seed=seed, chat=True, progress=progress, **settings)
            by_term = out.groupby("prompt_id", sort=False)["completion"].apply(list).to_dict()
        for _, row in part.iterrows():
            if row["term"] in done:
                lines.append(done[row["term"]])
                continue
            sense = {**row.to_dict(), "sense_id": row["term"]}
            dropped: list = []
            kept = usable_contexts(sense, by_term[row["term"]], model.model_id, names, dropped)
            reasons = pd.Series([d["reason"].split(":")[0] for d in dropped], dtype=object).value_counts()
            lines.append(json.dumps({**row.to_dict(), "contexts": kept[:n_keep],
                                     "n_generated": len(by_term[row["term"]]),
                                     "dropped": {k: int(v) for k, v in reasons.items()}}, ensure_ascii=False))
        atomic_write_text(path, "\n".join(lines) + "\n")
        atomic_write_json(_settings_path(path), {**meta, "n_terms_done": len(lines)})
    return path



#: Sidecar settings that decide a line's content: a line is reused only when all of them match.
_EXTRA_IDENTITY = ("model_id", "seed", "generation", "chat", "prompt_template", "filter_version", "n_keep")


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

def read_extra_contexts(path=None) -> tuple[pd.DataFrame, dict]:
    """The extra terms' generated contexts file: ``(table, settings)``; one row per term with columns
    ``dimension, term, direction, contexts, n_generated, dropped``."""
    path = extra_contexts_path(path)
    if not path.is_file():
        raise ContextError(f"no generated contexts file at {path}; make it with python -m bias_utils.extra_contexts "
                           "generate-extra --model qwen2.5-coder-0.5b-instruct --seed 0")
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ContextError(f"{path} line {i} is not valid JSON: {exc}") from None
    with open(_settings_path(path), encoding="utf-8") as f:
        settings = json.load(f)
    columns = ["dimension", "term", "direction", "contexts", "n_generated", "dropped"]
    return pd.DataFrame(rows, columns=columns), settings


def extra_term_contexts(terms: pd.DataFrame, n_contexts: int = 5, path=None) -> ContextSet:
    """Contexts for ``terms`` from the generated file, as a :class:`ContextSet`.

    A term missing from the file, or with no usable context in it, is a row of
    ``skipped`` with its reason (never a WordNet fallback).
    """
    table, settings = read_extra_contexts(path)
    found = {(r.dimension, r.term): r for r in table.itertuples()}
    origin = settings["model_id"]
    rows, skipped = [], []
    for _, sense in prepare_dictionary(terms).iterrows():
        entry = found.get((sense["dimension"], sense["term"]))
        if entry is None:
            skipped.append(_skip(sense, "generated", "not in the generated contexts file (generation not run for it)"))
        elif not entry.contexts:
            skipped.append(_skip(sense, "generated", f"none of {entry.n_generated} generated contexts was usable "
                                 f"({', '.join(f'{k} {v}' for k, v in entry.dropped.items())})"))
        else:
            rows += _rows(sense, list(entry.contexts)[:n_contexts], origin, "generated")
    return _finish(rows, skipped)


def extra_coverage(terms: pd.DataFrame | None = None, path=None) -> pd.DataFrame:
    """Terms with at least one generated context, per dimension and pole.

    Columns: ``dimension, direction, n_terms`` (all extra terms), ``n_generated``
    (terms the generation has reached), ``n_covered`` (>= 1 usable context),
    ``coverage`` (``n_covered / n_terms``), ``mean_contexts`` (per covered term);
    plus a ``total`` row.
    """
    if terms is None:

        terms = load_full_dictionary_terms()
    table, _ = read_extra_contexts(path)
    table = table.assign(n=table["contexts"].str.len())
    keys = ["dimension", "direction"]
    out = terms.groupby(keys).size().rename("n_terms").to_frame()
    out["n_generated"] = table.groupby(keys).size()
    covered = table[table["n"] > 0]
    out["n_covered"] = covered.groupby(keys).size()
    out["mean_contexts"] = covered.groupby(keys)["n"].mean()
    out = out.fillna({"n_generated": 0, "n_covered": 0}).reset_index()
    total = {"dimension": "total", "direction": "", "n_terms": out["n_terms"].sum(),
             "n_generated": out["n_generated"].sum(), "n_covered": out["n_covered"].sum(),
             "mean_contexts": covered["n"].mean() if len(covered) else np.nan}
    out = pd.concat([out, pd.DataFrame([total])], ignore_index=True)
    out[["n_generated", "n_covered"]] = out[["n_generated", "n_covered"]].astype(int)
    out.insert(5, "coverage", out["n_covered"] / out["n_terms"])
    return out


MODEL_CHOICE_FILES = {"summary": "generated/model_choice_summary.csv", "reasons": "generated/model_choice_reasons.csv",
                      "kept": "generated/model_choice_kept.csv"}
USER_EXAMPLE_DICTIONARY = "examples/user_dictionary_example.csv"


def model_choice_senses(per_pole: int = 3, seed: int = 0) -> pd.DataFrame:
    """The senses the generators are compared on: ``per_pole`` extra terms per dimension and pole
    (``dictionaries.limit_terms``) and the example user dictionary's senses (``data/examples``)."""

    extra = limit_terms(load_full_dictionary_terms(), per_pole, seed)[["dimension", "term", "direction"]]
    user = read_dictionary(data_dir() / USER_EXAMPLE_DICTIONARY)[["dimension", "term", "direction"]]
    out = pd.concat([extra.assign(sample="extra terms"), user.assign(sample="user example")], ignore_index=True)
    return out.assign(sense_id=out["term"] + "|" + out["dimension"])


def compare_generators(models, senses: pd.DataFrame | None = None, *, n_samples: int = 3, seed: int = 0,
                       progress: bool = True) -> dict[str, pd.DataFrame]:
    """Generate ``n_samples`` contexts per sense with each model and filter them (:func:`usable_contexts`).

    Returns ``summary`` (``model_id, n_senses, n_generated, n_kept, share_kept,
    n_covered`` (senses with >= 1 kept), ``share_covered, n_first_word``),
    ``reasons`` (``model_id, reason, n, share`` of the generated) and ``kept``
    (``model_id, sample, dimension, term, direction, context``).
    """
    # deferred: torch, only needed to generate new contexts
    from .generation import generate
    from .models import load_model

    senses = model_choice_senses() if senses is None else senses
    names = _names()
    summary, reasons, kept_rows = [], [], []
    for name in models:
        model = load_model(name) if isinstance(name, str) else name
        settings = {**GENERATION_SETTINGS, "n_samples": n_samples}
        out = generate(model, [extra_term_prompt(t) for t in senses["term"]], seed=seed, chat=True,
                       progress=progress, **settings)
        by_id = out.groupby("prompt_id", sort=True)["completion"].apply(list)
        dropped, n_kept, n_covered = [], 0, 0
        for i, sense in senses.reset_index(drop=True).iterrows():
            kept = usable_contexts(sense, by_id[i], model.model_id, names, dropped)
            n_kept, n_covered = n_kept + len(kept), n_covered + bool(kept)
            kept_rows += [{"model_id": model.model_id, **sense[["sample", "dimension", "term", "direction"]].to_dict(),
                           "context": c} for c in kept]
        counts = pd.Series([d["reason"].split(":")[0] for d in dropped], dtype=object).value_counts()
        reasons += [{"model_id": model.model_id, "reason": r, "n": int(k), "share": k / len(out)}
                    for r, k in counts.items()]
        summary.append({"model_id": model.model_id, "n_senses": len(senses), "n_generated": len(out), "n_kept": n_kept,
                        "share_kept": n_kept / len(out), "n_covered": n_covered,
                        "share_covered": n_covered / len(senses),
                        "n_samples": n_samples, "seed": seed})
    return {"summary": pd.DataFrame(summary), "reasons": pd.DataFrame(reasons), "kept": pd.DataFrame(kept_rows)}


def _main(argv=None) -> None:


    parser = argparse.ArgumentParser(prog="python -m bias_utils.extra_contexts",
                                     description="Generated contexts for the full dictionary's extra terms.")
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate-extra", help="generate (or resume) the extra terms' contexts file")
    gen.add_argument("--model", default="smollm2-135m-instruct")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--limit", type=int, default=None, help="stop after this many terms (in the shuffled order)")
    gen.add_argument("--out", default=None, help=f"output file (default data/{EXTRA_CONTEXTS_FILE})")
    sub.add_parser("coverage", help="print the coverage table of the extra terms' contexts file")
    cmp_ = sub.add_parser("compare-models", help="measure the share of usable contexts per generator model "
                          f"(writes data/{MODEL_CHOICE_FILES['summary']} and its siblings)")
    cmp_.add_argument("--models", nargs="+", default=["smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct"])
    cmp_.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "compare-models":

        for key, table in compare_generators(args.models, seed=args.seed).items():
            atomic_write_text(data_dir() / MODEL_CHOICE_FILES[key], table.to_csv(index=False))
            print(table.to_string(index=False) if key != "kept" else f"{len(table)} kept contexts")
        return
    if args.command == "generate-extra":
        print(generate_extra_contexts(args.model, seed=args.seed, path=args.out, limit=args.limit))
    print(extra_coverage(path=getattr(args, "out", None)).to_string(index=False))


if __name__ == "__main__":
    _main()
