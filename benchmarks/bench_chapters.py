"""Benchmark: every chapter of the book against its floor, and a finished build's time per chapter beside it.

For each model (``--models``, a decoder's chapters 03, 04, 05, 10, 06, 08, 11, 12 or an encoder's 03, 04, 05, 10, in
the build's order) this script measures, in one process:

* **cold**: the chapter's library calls as its notebook makes them at its default parameters (``--limit N``: the
  first N of each input, as the QUICK book: chapter 06 at least 80 prompts per group and chapter 08 every completion
  of that audit, chapter 12 at least 10), its statistics included, its charts and cell output left out, model loading
  not timed. The chapters share one fresh cache folder per model (``BIAS_CACHE_DIR``, its ``models`` and
  ``dictionaries`` linked to the real cache), run in the build's order: each chapter's own cache is empty and the
  earlier chapters' are warm, as in a cold ``make book``. Every batch the embedding engine computes for its cache is
  recorded, with its pairs' keys;
* **floor**: the model passes the chapter needs and nothing else, without a cache, measured after it in this process:
  the distinct (context, word) pairs it embedded, once, in one length-sorted batched call; chapter 06's generation
  (``bench_generation.forward_floor``, the same prompts and tokens per row); chapter 11's next word
  (``bench_next_word.floor_seconds``) and long form (``bench_long_form.chat_floor``); chapter 12's erased conditions
  (``bench_erasure.floor_seconds``). ``cold / floor`` is what the chapter adds to its model passes: the statistics,
  the cache, padding and any pass computed twice. A chapter whose passes all came from earlier chapters' caches has
  floor 0 ("cached").

Chapters 01, 02, 07 and 09 make no model pass (floor 0); their time is the build's. ``--build RESULTS`` reads the run
manifests of a finished ``make book`` (``RESULTS/<slug>/*.run.json``: ``label``, ``wall_time_s``, which include the
notebook's kernel, imports, model loading and charts) and prints one markdown table: per chapter the build's wall
time and its share of the build's total, this run's cold time, floor and ``cold / floor``, and ``wall / floor`` where
this run measured the floor at the build's size (no ``--limit``). The machine's load average is printed: on a shared
CPU every number grows, and only the ratios of one run compare.

Run: ``HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python benchmarks/bench_chapters.py
[--models smollm2-135m-instruct minilm-l6] [--chapters 03 11] [--limit 10] [--threads 1]
[--build book/models]``
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch
from bench_erasure import floor_seconds as erasure_floor
from bench_generation import forward_floor
from bench_long_form import chat_floor
from bench_next_word import floor_seconds as next_word_floor

from bias_utils.models.embeddings import default_batch_size

DECODER_ORDER = ("03", "04", "05", "10", "06", "08", "11", "12")  # book/runs.py's order: 10 before 06
ENCODER_ORDER = ("03", "04", "05", "10")
ERASURE_MIN_LIMIT = 10  # chapter 12 refuses a smaller limit
# a smaller audit can leave a group without an occupation unit (the QUICK book's chapter 06 takes 80 for this)
AUDIT_MIN_LIMIT = 80


def limited(args, quick_value=None):
    """A notebook's ``limit``-like parameter: its default (None) unless ``--limit`` was given."""
    return None if args.limit is None else (quick_value or args.limit)


def chapter_03(m, dictionary, args, done) -> list:
    from bias_utils.profiles import axis_validity, space

    sp = space.build_space(m, dictionary, "generated", 5, 0)
    result = space.direction_prediction(m, sp, n_contexts=5, layer="mean", limit=args.limit, seed=0, n_boot=2000,
                                        term_contexts="generated")
    space.accuracy_by_term_contexts(m, sp, result, term_contexts="generated", n_contexts=5, layer="mean",
                                    limit=args.limit, seed=0, n_boot=2000)
    axis_validity.axis_validity(m, sp, n_contexts=5, seed=0, limit=args.limit, n_permutations=200,
                                term_contexts="generated")
    return []


def chapter_04(m, dictionary, args, done) -> list:
    from bias_utils.profiles import axis_validity, gender_direction, space
    from bias_utils.profiles import population_profiles as profiles
    from bias_utils.profiles.dictionaries import add_terms

    sp = space.build_space(m, add_terms(dictionary, "sociability", high=[], low=[]), "generated", 5, 0)
    axis_validity.axis_validity(m, sp, n_contexts=5, seed=0, limit=limited(args), n_permutations=200)
    res = profiles.run_profiles(m, sp.bases, ["names", "terms", "nonbinary", "occupations"], None, "mean",
                                limited(args))
    profiles.paper_finding(res.stats)
    gender_direction.occupation_validity(m, sp.bases.get("warmth_competence"), layer="mean",
                                         templates=res.embeddings.templates, n_boot=1000, seed=0)
    return []


def chapter_05(m, dictionary, args, done) -> list:
    from bias_utils.profiles import layers

    layers.layers_by_context(m, dictionary, None, populations="names", templates=None, n_contexts=5, seed=0,
                             limit=args.limit, n_boot=200)
    return []


def chapter_10(m, dictionary, args, done) -> list:
    from bias_utils.profiles import axis_validity, robustness, tokenisation
    from bias_utils.profiles.population_profiles import DEFAULT_TEMPLATES

    inputs, extras = robustness.collect_curve_inputs(m, dictionary, ["names", "terms"], sources=None,
                                                     templates=DEFAULT_TEMPLATES, n_contexts=5, seed=0,
                                                     limit=args.limit, term_limit=limited(args))
    robustness.specification_curve(inputs, n_permutations=200, n_perm_test=2000, seed=0, alpha=0.05)
    axis_validity.validity_by_source(m, extras["spaces"], n_contexts=5, seed=0, limit=limited(args),
                                     n_permutations=200, alpha=0.05)
    tokenisation.token_table(m, extras["population_embeddings"]["original"].words)
    return []


def chapter_06(m, dictionary, args, done) -> list:
    from bias_utils.audit import bold

    # every default of the notebook is run_audit's
    result = bold.run_audit(m, limit=limited(args, max(args.limit or 0, AUDIT_MIN_LIMIT)))
    done["metrics"] = metrics = result.metrics
    steps = (metrics["n_tokens"] + (metrics["finish_reason"] == "stop")).tolist()
    return [lambda: forward_floor(m, metrics["prompt"].tolist(), steps, None)[1]]


def chapter_08(m, dictionary, args, done) -> list:
    from bias_utils.audit import bold_prompts, occupation_units
    from bias_utils.intrinsic_extrinsic import completions
    from bias_utils.profiles import axis_validity, space

    # as the QUICK book: every completion of the (limited) audit
    texts = bold_prompts.subsample(occupation_units.primary_completions(done["metrics"]), None, 0)
    sp = space.build_space(m, dictionary, "generated", 5, 0)
    axis_validity.axis_validity(m, sp, n_contexts=5, seed=0, limit=limited(args), n_permutations=200)
    values, *_ = completions.completion_embeddings(m, texts, with_source=True)
    prompt_values, *_ = completions.completion_embeddings(m, texts, part="prompt", with_source=True)
    table = completions.completion_projection(sp.bases["warmth_competence"], values, texts, layer="mean",
                                              prompt_values=prompt_values)
    completions.completion_projection_stats(table, n_boot=1000, n_permutations=2000, seed=0)
    completions.category_contrasts(table)
    return []


def chapter_11(m, dictionary, args, done) -> list:
    from bias_utils.audit import long_form_table, next_word, next_word_prompts
    from bias_utils.intrinsic_extrinsic import bold_link, link
    from bias_utils.profiles import gender_direction, space

    basis = space.build_space(m, dictionary, "generated", 5, 0).bases["warmth_competence"]
    check = gender_direction.occupation_validity(m, basis, layer="mean", n_boot=1000, seed=0)
    result = bold_link.run_link(m, done["metrics"], basis, layer="mean", n_boot=1000, seed=0,
                                direction_verdict=check.verdict, n_permutations=999)
    bls, units = list(check.values["occupation"]), list(result.occupations["noun"])
    # --limit: the first N BLS nouns and units' nouns for the next word, the first N occupations written about
    nouns = bls[:args.limit] + units[:args.limit]
    exact = next_word.next_word_table(m, nouns)
    next_word.next_word_validity(exact.occupations, check.values, n_boot=1000, seed=0)
    link.next_word_link(check.values, exact.occupations, result.occupations, result.statistics,
                        direction_verdict=check.verdict, n_boot=1000, seed=0)
    exact.neutral_share(check.values, result.occupations, n_boot=1000, seed=0)
    writing = long_form_table(m, bls[:args.limit], seed=0, n_boot=1000)
    writing.link(exact.occupations, check.values, n_boot=1000, seed=0).describe()
    sentences = [t.replace("{occupation}", n) for n in dict.fromkeys(nouns) for t in next_word_prompts.TEMPLATES]
    return [lambda: next_word_floor(m, sentences, default_batch_size(m)), lambda: chat_floor(m, writing.texts)[1]]


def chapter_12(m, dictionary, args, done) -> list:
    from bias_utils.intrinsic_extrinsic import erasure
    from bias_utils.profiles import space

    limit = limited(args, max(args.limit or 0, ERASURE_MIN_LIMIT))
    basis = space.build_space(m, dictionary, "generated", 5, 0).bases["warmth_competence"]
    result = erasure.erasure_tradeoff(m, basis, layer_step=3, n_boot=1000, seed=0, limit=limit, progress=False)
    computed = list(dict.fromkeys(zip(result.tradeoff["erasure"], result.tradeoff["layer"])))
    return [lambda: erasure_floor(m, computed, 0, limit)]


CHAPTERS = {"03": chapter_03, "04": chapter_04, "05": chapter_05, "10": chapter_10, "06": chapter_06,
            "08": chapter_08, "11": chapter_11, "12": chapter_12}


class Recorder:
    """Wraps the embedding engine's batch loop (``embeddings.compute``, looked up at each call) to keep every pair it
    computes for its cache; a computation without a cache (chapter 12's hooked passes, whose floor is
    ``bench_erasure``'s) is not recorded. The real loop runs unchanged."""

    def __init__(self, embeddings):
        self.embeddings, self.compute = embeddings, embeddings.compute
        self.pending: list = []

    def __call__(self, model, pending, layer_list, values, batch_size, folder, *rest):
        if folder is not None:
            self.pending.extend(pending)
        self.compute(model, pending, layer_list, values, batch_size, folder, *rest)

    def __enter__(self):
        self.embeddings.compute = self
        return self

    def __exit__(self, *exc):
        self.embeddings.compute = self.compute

    def floor(self, model) -> float:
        """Seconds to embed the distinct recorded pairs once, in one call, without a cache."""
        import numpy as np

        from bias_utils.models.embeddings import layer_indices

        distinct: dict = {}  # key -> (row, key, token indices, inputs): each pair once, at its own row
        for _, key, idx, inputs in self.pending:
            distinct.setdefault(key, (len(distinct), key, idx, inputs))
        if not distinct:
            return 0.0
        layers = layer_indices("all", model.n_layers)
        values = np.empty((len(distinct), len(layers), model.hidden_size), dtype=np.float32)
        t0 = time.perf_counter()
        self.compute(model, list(distinct.values()), layers, values, default_batch_size(model), None, False, 0)
        return time.perf_counter() - t0


def measure(name: str, chapters: list[str], args, real_cache: Path) -> dict:
    """``{chapter: (cold seconds, floor seconds, pairs computed, distinct pairs)}``, or ``"failed (Error)"``, for one
    model (module docstring)."""
    from bias_utils.models import embeddings
    from bias_utils.models.loading import load_model
    from bias_utils.profiles import dictionaries

    measured, done = {}, {}
    with tempfile.TemporaryDirectory(prefix="bench-chapters-") as tmp:
        for sub in ("models", "dictionaries"):
            if (real_cache / sub).exists():
                os.symlink(real_cache / sub, Path(tmp) / sub)
        os.environ["BIAS_CACHE_DIR"] = tmp  # read by paths.cache_dir() at every call
        m, dictionary = load_model(name), dictionaries.load_dictionary()
        order = DECODER_ORDER if m.kind == "decoder" else ENCODER_ORDER
        for chapter in [c for c in order if c in chapters]:
            with Recorder(embeddings) as recorder:
                t0 = time.perf_counter()
                try:
                    floors = CHAPTERS[chapter](m, dictionary, args, done)
                except Exception as error:  # the table still shows the other chapters, this one as failed
                    print(f"{m.name} {chapter} failed: {error!r}", flush=True)
                    measured[chapter] = f"failed ({type(error).__name__})"
                    continue
                cold = time.perf_counter() - t0
            floor = recorder.floor(m) + sum(f() for f in floors)
            distinct = len({p[1] for p in recorder.pending})
            measured[chapter] = (cold, floor, len(recorder.pending), distinct)
            print(f"{m.name} {chapter}: cold {cold:.1f} s, floor {floor:.1f} s, embedded pairs "
                  f"{len(recorder.pending)} (distinct {distinct}); load average {os.getloadavg()[0]:.1f}", flush=True)
        return {"model_id": m.model_id, "name": m.name, "chapters": measured}


def read_build(folder: Path) -> list[dict]:
    """One row per run manifest of a finished build: slug, chapter, model name, wall seconds."""
    rows = []
    for path in sorted(folder.glob("*/*.run.json")):
        manifest = json.loads(path.read_text())
        slug, notebook = manifest["label"].split("/")
        rows.append({"slug": slug, "chapter": notebook[:2], "notebook": notebook,
                     "model": (manifest.get("model") or {}).get("name"), "wall": float(manifest["wall_time_s"])})
    return sorted(rows, key=lambda r: (r["model"] is None, r["slug"], r["chapter"]))  # each model's, then the rest


def table(build: list[dict], runs: list[dict], args) -> str:
    """The markdown table (module docstring); without ``--build``, this run's rows alone."""
    by_model = {r["name"]: r["chapters"] for r in runs}
    if not build:
        build = [{"slug": r["model_id"], "chapter": c, "notebook": c, "model": r["name"], "wall": None}
                 for r in runs for c in r["chapters"]]
    total = sum(r["wall"] or 0 for r in build)
    lines = ["| chapter | model | build wall | share | cold (this run) | floor (this run) | cold / floor | "
             "wall / floor |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in build:
        wall = "—" if r["wall"] is None else f"{r['wall']:.1f} s"
        share = f"{r['wall'] / total:.1%}" if r["wall"] and total else "—"
        got = by_model.get(r["model"], {}).get(r["chapter"])
        if isinstance(got, str):
            cells = ["—", got, "—", "—"]
        elif got is None:
            cells = ["—", "0 (no model pass)" if r["model"] is None or r["chapter"] in ("01", "02") else "not run",
                     "—", "—"]
        else:
            cold, floor = got[0], got[1]
            ratio = f"{cold / floor:.2f}" if floor else "— (cached)"
            at_size = f"{r['wall'] / floor:.2f}" if floor and r["wall"] and args.limit is None else "—"
            cells = [f"{cold:.1f} s", f"{floor:.1f} s" if floor else "0 (cached)", ratio, at_size]
        lines.append(f"| {r['notebook']} | {r['model'] or r['slug']} | {wall} | {share} | " + " | ".join(cells) + " |")
    if total:
        lines.append(f"| **all runs** | | **{total:.1f} s** | 100% | | | | |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chapters", nargs="+", default=list(CHAPTERS), choices=list(CHAPTERS))
    parser.add_argument("--models", nargs="+", default=["smollm2-135m-instruct", "minilm-l6"])
    parser.add_argument("--limit", type=int, default=None, help="the first N of each input (default: all)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--build", type=Path, default=None, help="a finished build's book/models folder")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    real_cache = Path(os.environ.get("BIAS_CACHE_DIR") or Path(__file__).resolve().parents[1] / ".cache")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; torch threads {torch.get_num_threads()}; "
          f"limit {args.limit}", flush=True)
    runs = [measure(name, args.chapters, args, real_cache) for name in args.models]
    build = read_build(args.build) if args.build else []
    if args.limit is not None:
        print(f"\n--limit {args.limit}: this run's cold and floor are of the first {args.limit} of each input "
              f"(chapter 06: {max(args.limit, AUDIT_MIN_LIMIT)} prompts per group, 12: "
              f"{max(args.limit, ERASURE_MIN_LIMIT)}), not the default build's; wall / floor is left out")
    print(f"load average {os.getloadavg()[0]:.1f} at the end\n\n{table(build, runs, args)}")


if __name__ == "__main__":
    main()
