"""The book: papermill runs per model and the Jupyter Book build.

``python -m bias_utils.book --models "smollm2-135m-instruct minilm-l6" [--quick]``

1. For each model, the study notebooks that apply to it are executed with
   papermill into ``book/models/<model-slug>/`` (:mod:`~bias_utils.book.runs` plans
   them and decides which are current, :mod:`~bias_utils.book.execution` executes
   them); their tables go to ``results/<model-slug>/``. A run that failed
   stays failed (and ``make book`` exits non-zero, naming it) until its
   inputs change.
2. The executed notebooks are prepared for reading
   (:mod:`~bias_utils.book.presentation`).
3. ``book/_toc.yml`` (each model's part in the order of its chapters' numbers; the chapters
   that do not depend on the model appear once, in the background) and the
   reproducibility appendix (:mod:`~bias_utils.book.reproducibility`) are generated
   from the manifests, the vega bundle is written once into
   ``book/_static/vendor/``, and ``jupyter-book build`` runs — unless no file
   of the book changed since the last successful build (a warm ``make book``
   then does no Sphinx work).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from ..core import cache, paths
from ..core.results import CROSS_MODEL_FOLDER as CROSS_SLUG
from ..core.results import REPLICATION_FOLDER as REPLICATION_SLUG
from ..core.results import display_name
from ..models.builtin_models import model_name
from ..report import rendering
from . import findings, summary
from .execution import execute_runs
from .presentation import path_replacements, present_notebook, write_if_changed
from .reproducibility import (
    REPRODUCIBILITY_PAGE,
    precision_note,
    write_model_limitations,
    write_reproducibility_page,
)
from .runs import (
    BOOK_DIR,
    QUICK_PARAMETERS,
    Environment,
    Run,
    describe_model,
    format_seconds,
    plan_runs,
    resolve_dependency_keys,
)

__all__: list[str] = []

#: Generated folders inside a book directory (git-ignored; rebuilt from runs).
_GENERATED_DIRS = ("_build", "models", "_generated")
#: The findings of this build, generated from the results and included by ``index.md``.
_SUMMARY_PAGE = Path("_generated") / "summary.md"


# --------------------------------------------------------------------------- book sources


#: Hand-written chapters (in ``book/``), in reading order, by toc part.
_INTRO_CHAPTERS = ("data", "methods_profiles", "methods_bold")
_CLOSING_CHAPTERS = ("limitations", "references")


def _file_entry(book_dir: Path, path: Path) -> str:
    return path.relative_to(book_dir).with_suffix("").as_posix()


#: Chapters whose content does not depend on the model (it only names their results folder):
#: executed for every model (later chapters read their tables) but shown once, in the
#: background part, from the first model of the build.
_SHARED_CHAPTERS = ("01_dictionaries", "02_contexts")
#: The caption of a model's part begins so; the book's Sphinx extension (``book/_ext``) finds the model parts by it.
_MODEL_PART = "Model: "
#: A chapter's number: the two digits its notebook's name starts with, which its title and the text refer to.
_CHAPTER_NUMBER = re.compile(r"^(\d{2})_")


def _by_number(run: Run) -> tuple[int, int]:
    """A run's place in its part: its chapter number (a notebook without one after the numbered, in execution
    order)."""
    number = _CHAPTER_NUMBER.match(run.notebook.stem)
    return (0, int(number.group(1))) if number else (1, 0)


def _make_toc(book_dir: Path, models: list[dict], runs: list[Run], *,
             shared: tuple[str, ...] = _SHARED_CHAPTERS) -> dict:
    """The ``_toc.yml`` structure: background (with the chapters shared by every model), replication, one part per
    model (its chapters in the order of their numbers, so the sidebar reads 03, 04, 05, …), cross-model, closing,
    reproducibility. A model's part is captioned :data:`_MODEL_PART` and its name."""
    def present(names):
        return [{"file": n} for n in names if (book_dir / f"{n}.md").exists()]

    def executed(selected):
        return [{"file": _file_entry(book_dir, r.output)} for r in selected if r.output.exists()]

    by_model = {m["slug"]: [r for r in runs if r.model.get("slug") == m["slug"]] for m in models}
    background = present(_INTRO_CHAPTERS)
    for stem in shared:
        first = next((r for m in models for r in by_model[m["slug"]]
                      if r.notebook.stem == stem and r.output.exists()), None)
        background += executed([first] if first else [])
    parts = [{"caption": "Background", "chapters": background}]
    replication = executed([r for r in runs if r.label.startswith(f"{REPLICATION_SLUG}/")])
    if replication:
        parts.append({"caption": "Replication of the published BOLD audit", "chapters": replication})
    for model in models:
        own = [r for r in by_model[model["slug"]] if r.notebook.stem not in shared]
        chapters = executed(sorted(own, key=_by_number))
        if chapters:
            parts.append({"caption": f"{_MODEL_PART}{model_name(model['name'])}", "chapters": chapters})
    cross = executed([r for r in runs if r.label.startswith(f"{CROSS_SLUG}/")])
    if cross:
        parts.append({"caption": "Across models", "chapters": cross})
    closing = present(_CLOSING_CHAPTERS)
    if closing:
        parts.append({"caption": "Discussion", "chapters": closing})
    if (book_dir / REPRODUCIBILITY_PAGE).exists():
        parts.append({"caption": "Appendix", "chapters": [{"file": REPRODUCIBILITY_PAGE.with_suffix("").as_posix()}]})
    return {"format": "jb-book", "root": "index", "parts": [p for p in parts if p["chapters"]]}


def _write_toc(book_dir: Path, models: list[dict], runs: list[Run]) -> Path:
    toc = _make_toc(book_dir, models, runs)
    text = "# Generated by bias_utils.book.build from the runs; do not edit.\n" + yaml.safe_dump(toc, sort_keys=False)
    return write_if_changed(book_dir / "_toc.yml", text)


def _sync_sources(book_dir: Path, source_dir: Path = BOOK_DIR) -> None:
    """Copy the hand-written book sources into another book directory (tests, previews)."""
    if book_dir.resolve() == source_dir.resolve():
        return
    for src in source_dir.rglob("*"):
        rel = src.relative_to(source_dir)
        if not src.is_file() or rel.parts[0] in _GENERATED_DIRS or rel.parts[:2] == ("_static", "vendor") \
                or rel.name == "_toc.yml" or "__pycache__" in rel.parts:
            continue
        dst = book_dir / rel
        if not dst.exists() or dst.read_bytes() != src.read_bytes():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)


def _book_content_hashes(book_dir: Path) -> dict[str, str]:
    """Hashes of the book's pages (``pages``) and of everything else: config, extensions, static files."""
    files = sorted(p for p in book_dir.rglob("*")
                   if p.is_file() and not {"_build", "__pycache__"} & set(p.relative_to(book_dir).parts))
    digests = {p.relative_to(book_dir).as_posix(): cache.sha256_file(p) for p in files}
    is_page = lambda name: name.endswith((".md", ".ipynb"))  # noqa: E731
    return {
        "pages": cache.stable_hash({k: v for k, v in digests.items() if is_page(k)}, length=64),
        "other": cache.stable_hash({k: v for k, v in digests.items() if not is_page(k)}, length=64),
    }


def _build_html(book_dir: Path, force: bool = False, log=print) -> bool:
    """Run ``jupyter-book build`` unless the book's files are unchanged since the last build.

    Sphinx rebuilds changed pages incrementally, but it does not notice a
    changed local extension or static file, so any change outside the pages
    rebuilds everything. Returns whether Sphinx ran; raises ``RuntimeError``
    with Sphinx's output tail on failure.
    """
    stamp = book_dir / "_build" / ".book-content-key.json"
    keys = _book_content_hashes(book_dir)
    index = book_dir / "_build" / "html" / "index.html"
    try:
        old = json.loads(stamp.read_text())
    except (OSError, ValueError):
        old = {}
    if not force and index.exists() and old == keys:
        log("book: no source changed since the last build; HTML is up to date")
        return False
    exe = Path(sys.executable).parent / "jupyter-book"
    cmd = [str(exe) if exe.exists() else "jupyter-book", "build", str(book_dir), "--builder", "html", "--keep-going"]
    if force or old.get("other") != keys["other"]:
        cmd.append("--all")
    log("book: " + " ".join(cmd))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    warnings = [ln for ln in proc.stdout.splitlines() + proc.stderr.splitlines() if "WARNING" in ln or "ERROR" in ln]
    for ln in warnings[:40]:
        log("    " + ln)
    if proc.returncode != 0 or not index.exists():
        raise RuntimeError(f"jupyter-book build failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-4000:]}")
    cache.atomic_write_json(stamp, keys)
    log(f"book: HTML built in {format_seconds(time.perf_counter() - t0)} ({len(warnings)} warnings) -> {index}")
    return True


# --------------------------------------------------------------------------- main


def _make_book(
    model_names: list[str],
    *,
    quick: bool = False,
    book_dir: Path = BOOK_DIR,
    results_dir: Path | None = None,
    force: bool = False,
    build: bool = True,
    dtype: str | None = None,
    jobs: int | None = None,
    log=print,
) -> int:
    """Run the notebooks for ``model_names`` and build the book; returns a process exit code. ``dtype``: ``None``
    (float32, the default on every device) or a lower precision for every model (``models.DTYPES``), said on the
    front page and in the reproducibility appendix. ``jobs``: how many runs side by side
    (:func:`~bias_utils.book.execution.execute_runs`; ``None``: its default)."""
    t0 = time.perf_counter()
    book_dir = Path(book_dir)
    if results_dir is not None:
        # notebooks without an output_dir parameter (and library defaults) follow this
        os.environ["BIAS_RESULTS_DIR"] = str(Path(results_dir).resolve())
    _sync_sources(book_dir)
    env = Environment.current()
    models = []
    for name in model_names:
        log(f"book: loading {name} to identify it")
        models.append(describe_model(name, dtype))
    runs = plan_runs(models, quick=quick, book_dir=book_dir, results_dir=results_dir, log=log)
    resolve_dependency_keys(runs, env)
    manifests = execute_runs(runs, env, force=force, log=log, jobs=jobs)
    replacements = path_replacements(book_dir, Path(results_dir or paths.results_dir()))
    # every chapter names every model as the front page does (the cross-model chapter all of them)
    names = {display_name(model): name
             for model, name in findings.model_names([m["model_id"] for m in models]).items()}
    for run in runs:
        if run.output.exists():
            present_notebook(run, replacements, name_model=run.notebook.stem not in _SHARED_CHAPTERS, names=names)
    summary.write_summary_page(
        book_dir / _SUMMARY_PAGE, [m["slug"] for m in models], results_dir or paths.results_dir(),
        can_generate={m["slug"]: m["can_generate"] for m in models},
        note=" ".join(n for n in ("*QUICK build: a small slice of every data set, so intervals are wide.*" if quick
                                  else "", precision_note(models)) if n))
    summary.write_units_page(book_dir / _SUMMARY_PAGE.parent / summary.UNITS_PAGE, [m["slug"] for m in models],
                              results_dir or paths.results_dir())
    write_reproducibility_page(book_dir, models, runs, replacements, quick=quick)
    write_model_limitations(book_dir, models)
    _write_toc(book_dir, models, runs)
    rendering.write_vega_bundle(book_dir / "_static")
    if build:
        _build_html(book_dir, force=force, log=log)
    failing = {r.label: r.previous_manifest() or {} for r in runs}
    failing = {label: m for label, m in failing.items() if m.get("status") != "ok"}
    log(f"book: done in {format_seconds(time.perf_counter() - t0)}; executed {len(manifests)} of {len(runs)} runs")
    for label, m in failing.items():
        if m.get("status") == "skipped":
            log(f"book: SKIPPED {label}: {m['error']} (it runs once that run succeeds)")
        else:
            log(f"book: FAILED {label}: {m.get('error', 'no manifest')} (its chapter shows the traceback; "
                "it runs again when its inputs change, or with --force)")
    return 1 if failing else 0


def book_cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bias_utils.book", description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", required=True,
                        help="space-separated model names (built-in short names, hub ids or folders)")
    parser.add_argument("--quick", action="store_true", help=f"small but real configuration: {QUICK_PARAMETERS}")
    parser.add_argument("--book-dir", type=Path, default=BOOK_DIR)
    parser.add_argument("--results-dir", type=Path, default=None, help="default: results/ (BIAS_RESULTS_DIR)")
    parser.add_argument("--force", action="store_true", help="re-execute every run and rebuild the HTML")
    parser.add_argument("--no-build", action="store_true", help="run the notebooks but skip jupyter-book")
    parser.add_argument("--dtype", default=None,
                        help="a lower precision for every model, bfloat16 or float16 (default: float32 on every "
                             "device; models.load_model rejects an unknown name before anything loads)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="notebooks run side by side, each kernel on cores // jobs torch threads; a chapter waits "
                             "for those whose tables it reads (default: 2 where there are two cores or more; 1 runs "
                             "them one after another, as planned: the same sampled text, on one torch thread either "
                             "way, and other numbers equal to float32 rounding, which a kernel's thread count moves)")
    args = parser.parse_args(argv)
    names = args.models.split()
    if not names:
        parser.error("--models is empty")
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs must be 1 or more, not {args.jobs}")
    return _make_book(names, quick=args.quick, book_dir=args.book_dir, results_dir=args.results_dir,
                     force=args.force, build=not args.no_build, dtype=args.dtype, jobs=args.jobs)

