"""Which runs the book needs and when a run is current: notebooks, parameters, run keys.

1. For each model, the study notebooks that apply to it (encoders cannot
   generate, so the BOLD notebooks run for decoders only) are planned as runs
   writing into ``book/models/<model-slug>/``, their tables into
   ``results/<model-slug>/``. Model-independent notebooks (the replication of
   the published audit) run once, and the cross-model notebook runs last.
2. A run is skipped when its *run key* is unchanged: a hash of the notebook
   file, the parameters, the model id, the source of the ``bias_utils``
   modules the notebook imports (transitively) and the tracked data lists,
   the package versions, the sha256s in ``data/manifest.csv`` and the keys of
   the runs it reads from (the chapters whose tables it reads, ``_NotebookSpec.reads``; they
   run first, and chapters that read nothing of each other may run side by side).
   A run counts as done only once its manifest (``<notebook>.run.json``)
   records that key, so an interrupted run is executed again next time and
   nothing half-written is trusted. A run that failed stays failed until its
   inputs change.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import nbformat

from ..core import cache, data, paths
from ..core.results import CROSS_MODEL_FOLDER as CROSS_SLUG
from ..core.results import REPLICATION_FOLDER as REPLICATION_SLUG
from ..core.results import model_slug
from ..models.builtin_models import BUILTIN_MODELS

__all__: list[str] = []

BOOK_DIR = paths.ROOT / "book"
_NOTEBOOKS_DIR = paths.ROOT / "notebooks"
#: Code injected as the first cell of every executed notebook (hidden in the
#: book by its tag): charts then draw offline from the book's vega bundle.
RENDER_CELL = "import bias_utils.report.table_html\nbias_utils.report.table_html.enable()"

#: Distributions whose versions enter the run key and the manifest.
_PACKAGES = (
    "bias-profiles", "torch", "transformers", "gguf", "numpy", "pandas", "pyarrow", "scipy",
    "pingouin", "altair", "vl-convert-python", "nltk", "papermill", "jupyter-book",
)
#: Environment variables that change what a run computes (``models.generation``'s sampling threads): when set, they
#: enter the run key and the manifest.
RESULT_SETTINGS = ("BIAS_GENERATION_THREADS",)

#: QUICK mode: a small but real configuration, passed to the notebooks that
#: declare these parameters (a notebook only receives the ones it declares).
QUICK_PARAMETERS = {"limit": 12, "n_contexts": 2, "n_boot": 200, "n_samples": 1}
#: Per-notebook QUICK overrides: 12 prompts would leave ~2 female-dominated
#: completions, too few for the audit's tests to say anything (and gendered
#: words are rare: the audit's full 100 new tokens are kept); the completion
#: profiles use every completion the quick audit wrote; the profiles' axis null
#: (in 04 and 08) and the robustness chapter keep 12 extra terms per dimension and pole, as
#: chapter 03 does with ``limit`` (so all three share one embedding of them); the erasure erases the last hidden
#: state alone and every state together (a step beyond the layer count), on ``limit`` of each of its inputs (its
#: seven conditions took 6 of the QUICK book's 14.5 minutes over every input); chapter 11's long form writes one
#: sample of the first instruction (the biography, the one chapter 12 writes under erasure), up to 40 tokens (a
#: twelfth of the default's 28,800 new tokens), and 199 relabellings for its primary test (the default 999 set the
#: p's floor for a reader; a QUICK page only needs the test run); chapter 12 writes the long form under erasure (off
#: by default: its cost) on its ``limit`` occupations at chapter 11's QUICK length, so that its unhooked texts are
#: chapter 11's (at most 5 conditions x 12 texts x 40 tokens).
_QUICK_OVERRIDES = {"04_profiles": {"term_limit": 12}, "06_bold_audit": {"limit": 80},
                   "08_completion_profiles": {"limit": None, "term_limit": 12}, "10_robustness": {"term_limit": 12},
                   "11_intrinsic_extrinsic": {"long_form_n_samples": 1, "long_form_max_new_tokens": 40,
                                              "n_permutations": 199},
                   "12_erasure": {"layer_step": 1000, "long_form_erasure": True, "long_form_max_new_tokens": 40}}


def _quick_overrides(stem: str) -> dict:
    """A notebook's QUICK overrides (:data:`_QUICK_OVERRIDES`), with chapter 11's first long-form instruction."""
    found = dict(_QUICK_OVERRIDES.get(stem, {}))
    if stem == "11_intrinsic_extrinsic":
        from ..audit.long_form import INSTRUCTIONS  # deferred: it imports torch, which planning a build does not need

        found["long_form_instructions"] = [INSTRUCTIONS[0]]
    return found


@dataclass(frozen=True)
class _NotebookSpec:
    """A study notebook and where it applies.

    ``scope`` is ``"model"`` (run per model), ``"once"`` (model-independent) or
    ``"cross"`` (reads every model's results). ``generates`` marks notebooks
    that need a model able to generate text. ``reads``: the chapters of the same model whose tables (or whose
    cache, where reading it instead of computing it again is what keeps the numbers a sequential build gives) the
    notebook reads, so it waits for them; ``reads_if``: ``(chapter, parameter)`` pairs read only when that
    parameter of the run is true. ``embeds``: the notebook reads and fills the model's embedding cache; such
    chapters of one model run one after another in one order, those that read no other chapter first, each group
    in the planned order (a run waits for the one before it, but its key does not name it), so that on a cold cache
    each pair is embedded by the same chapter, in the same batch, in lanes as one at a time: the embedding engine
    batches the pairs a call needs, and a float32 batch of other rows may differ in the last bits. ``estimate_s``:
    its wall time in seconds on the default build (SmolLM2, one torch thread; 11's with its long form written ahead,
    ``book.prefill``), the scheduler's guess until a manifest records one.
    """

    stem: str
    title: str
    scope: str = "model"
    generates: bool = False
    reads: tuple[str, ...] = ()
    reads_if: tuple[tuple[str, str], ...] = ()
    embeds: bool = False
    estimate_s: float = 60.0


#: What each reads (found in the notebooks and the library calls they make): 08 and 11 read 06's BOLD metrics
#: (08 also the hidden states 06's decoding stored in the generation cache); 12 reads chapter 11's long-form texts
#: from the generation cache when it writes the long form under erasure (generating them itself would batch other
#: prompts together, and a padded batch may change a sampled token); 09 reads every other run's tables (its
#: dependencies are set in :func:`plan_runs`). 03, 04, 05, 10, 08, 11 and 12 read and fill one embedding cache
#: (``embeds``), so they keep one order: those that read no other chapter first (03, 04, 05, 10 and 12 without its
#: long form), 06, the longest, beside them; then 08 and 11. That order also keeps 12 before 11 on the next word's
#: cache, which both fill and read (the 60 occupations' next-word values). 01, 02, 06 and 07 read only the data.
_STUDY_NOTEBOOKS = (
    _NotebookSpec("01_dictionaries", "Stereotype dictionaries", estimate_s=8),
    _NotebookSpec("02_contexts", "Context sentences", estimate_s=8),
    _NotebookSpec("03_projection_accuracy", "Projection and direction accuracy", embeds=True, estimate_s=187),
    _NotebookSpec("04_profiles", "Stereotype profiles", embeds=True, estimate_s=37),
    _NotebookSpec("05_layers", "Layers and context sources", embeds=True, estimate_s=91),
    _NotebookSpec("10_robustness", "How robust is this profile?", embeds=True, estimate_s=147),
    _NotebookSpec("06_bold_audit", "BOLD occupational audit", generates=True, estimate_s=816),
    _NotebookSpec("08_completion_profiles", "Stereotype profiles of the model's own completions", generates=True,
                  reads=("06_bold_audit",), embeds=True, estimate_s=27),
    _NotebookSpec("11_intrinsic_extrinsic", "Does the bias inside predict the bias it writes?", generates=True,
                  reads=("06_bold_audit",), embeds=True, estimate_s=45),
    _NotebookSpec("12_erasure", "Erasing the concept", generates=True,
                  reads_if=(("11_intrinsic_extrinsic", "long_form_erasure"),), embeds=True, estimate_s=654),
    _NotebookSpec("07_bold_replication", "Replication of the published audit", scope="once", estimate_s=27),
    _NotebookSpec("09_cross_model", "Across models", scope="cross", estimate_s=5),
)


# --------------------------------------------------------------------------- run keys


_PACKAGE_DIR = paths.ROOT / "bias_utils"
#: The modules that build the book: they decide *whether* a notebook runs, not what a run computes.
_BUILDER_MODULES = ("book.__init__", "book.__main__", "book.runs", "book.execution", "book.presentation",
                   "book.reproducibility", "book.build")


def _package_modules() -> dict[str, Path]:
    """Every module of the package by its dotted name below ``bias_utils`` (``profiles.space``; a package's own
    file is ``profiles.__init__``, the top one ``__init__``)."""
    return {".".join(p.relative_to(_PACKAGE_DIR).with_suffix("").parts): p for p in sorted(_PACKAGE_DIR.rglob("*.py"))}


def _module_hashes() -> dict[str, str]:
    """sha256 of every ``bias_utils`` module, by its dotted name (:func:`package_modules`)."""
    return {name: cache.sha256_file(p) for name, p in _package_modules().items()}


def _data_list_hash() -> str:
    """Hash of the project-authored data lists under ``data/`` (not the verified external files)."""
    data_root = paths.data_dir()
    skip = {data_root / "raw", data_root / "nltk_data"}
    files = [p for p in data_root.rglob("*")
             if p.is_file() and not any(s in p.parents for s in skip) and p.name != "manifest.csv"]
    digests = {str(p.relative_to(paths.ROOT)): cache.sha256_file(p) for p in sorted(files)}
    return cache.stable_hash(digests, length=64)


def _with_parents(name: str, modules) -> set[str]:
    """A module and the ``__init__`` of every package above it (importing ``a.b`` runs ``a/__init__`` first)."""
    parts = name.split(".")[:-1] if name.endswith(".__init__") else name.split(".")
    found = {name}
    for i in range(len(parts)):
        init = ".".join(parts[:i] + ["__init__"])
        if init in modules:
            found.add(init)
    return found


def _resolve(dotted: str, modules) -> str | None:
    """The module a dotted name below ``bias_utils`` reaches: a module file, else a package's ``__init__``."""
    if dotted in modules:
        return dotted
    init = f"{dotted}.__init__" if dotted else "__init__"
    return init if init in modules else None


@lru_cache(maxsize=512)
def _import_targets(source: str, package: str) -> tuple[tuple[str, ...], ...] | None:
    """The dotted paths below ``bias_utils`` that ``source`` imports (unresolved), or None if it cannot be parsed.
    Cached by the source text: every notebook's closure parses the same modules again (an edited file is a new
    key)."""
    # IPython magics and shell escapes are not Python
    lines = [ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return None
    targets = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets += [a.name.split(".")[1:] for a in node.names if a.name.startswith("bias_utils.")]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                parts = (node.module or "").split(".")
                if parts[0] != "bias_utils":
                    continue
                base = parts[1:]
            else:
                above = package.split(".") if package else []
                base = above[:len(above) - (node.level - 1)] + ((node.module or "").split(".") if node.module else [])
            targets.append(base)
            targets += [base + [a.name] for a in node.names]
        elif isinstance(node, ast.Assign) and [getattr(x, "id", None) for x in node.targets] == ["_EXPORTS"]:
            # a subpackage's public API, imported on first use (core.exports): its modules count as imports
            above = package.split(".") if package else []
            targets += [above + [k.value] for k in getattr(node.value, "keys", []) if isinstance(k, ast.Constant)]
    return tuple(tuple(parts) for parts in targets)


def _imported_modules(source: str, package: str = "", modules=None) -> set[str] | None:
    """``bias_utils`` modules (dotted names, :func:`package_modules`) a piece of code imports, with the package
    ``__init__`` files that importing them runs; ``None`` if it cannot be parsed.

    Catches imports anywhere, including the lazy ones inside functions and the modules a subpackage's
    ``_EXPORTS`` names; ``package`` (dotted, below ``bias_utils``) resolves relative imports of a module
    inside the package.
    """
    modules = _package_modules() if modules is None else modules
    targets = _import_targets(source, package)
    if targets is None:
        return None
    found = set()
    for parts in targets:
        name = _resolve(".".join(parts), modules)
        if name is not None:
            found |= _with_parents(name, modules)
    return found


def _code_modules(notebook: Path) -> list[str]:
    """The ``bias_utils`` modules a notebook's results can depend on: what it imports, transitively.

    Always includes the package ``__init__`` and :mod:`~bias_utils.report.rendering`
    (the injected cell); the :data:`BUILDER_MODULES` are left out. Code that
    cannot be parsed depends on every module.
    """
    modules = _package_modules()
    nb = nbformat.read(notebook, as_version=4)
    seen = _imported_modules("\n".join(c.source for c in nb.cells if c.cell_type == "code"), "", modules)
    if seen is None:
        return sorted(set(modules) - set(_BUILDER_MODULES))
    todo = sorted(seen | _with_parents("report.rendering", modules))
    closure: set[str] = set()
    while todo:
        name = todo.pop()
        if name in closure:
            continue
        closure.add(name)
        package = name.rsplit(".", 1)[0] if "." in name else ""
        found = _imported_modules(modules[name].read_text(encoding="utf-8"), package, modules)
        todo += sorted(modules) if found is None else sorted(found - closure)
    return sorted(closure - set(_BUILDER_MODULES))


def _package_versions() -> dict[str, str | None]:
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _data_hashes() -> dict[str, str]:
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
    """What runs share, computed once per invocation: module hashes, data lists, packages, data sha256s, and the
    environment variables that change results (:data:`RESULT_SETTINGS`, those set)."""

    modules: dict
    data_lists: str
    packages: dict
    data: dict
    settings: dict = field(default_factory=dict)

    @classmethod
    def current(cls) -> "Environment":
        settings = {name: os.environ[name] for name in RESULT_SETTINGS if os.environ.get(name, "").strip()}
        return cls(modules=_module_hashes(), data_lists=_data_list_hash(), packages=_package_versions(),
                   data=_data_hashes(), settings=settings)

    def code(self, notebook: Path) -> dict[str, str]:
        """Hashes of the modules ``notebook`` depends on, plus the data lists."""
        code = {name: self.modules.get(name) for name in _code_modules(notebook)}
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
    #: The labels of the runs that must have succeeded before this one starts (``depends_on`` names them until
    #: :func:`resolve_dependency_keys` puts their keys there).
    after: tuple[str, ...] = ()
    #: The wall time the scheduler assumes until a manifest records one (seconds).
    estimate_s: float = 60.0
    #: Set on a run that only writes a cache ahead of the run it names (``book.prefill``), not its notebook.
    ahead_of: str | None = None

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
        if env.settings:  # absent when none is set: the keys of builds made before settings were recorded
            material["settings"] = env.settings
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


def effective_parameters(notebook: Path, parameters: dict) -> dict:
    """The values a run of ``notebook`` with ``parameters`` sees: the declared defaults (literals, evaluated) with
    ``parameters`` over them. A default that is not a literal is left out (a prefill then fails and says so)."""
    found = {}
    for name, source in declared_parameters(notebook).items():
        try:
            found[name] = ast.literal_eval(source)
        except (ValueError, SyntaxError):
            continue
    return {**found, **parameters}


def relative_to_root(path: Path) -> Path:
    """``path`` relative to the project root, or unchanged when it lies outside."""
    try:
        return path.resolve().relative_to(paths.ROOT)
    except ValueError:
        return path


def format_seconds(seconds: float) -> str:
    """A wall time for the build log and the appendix: ``"42s"``, ``"3m05s"``."""
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


# --------------------------------------------------------------------------- planning


def describe_model(name: str, dtype: str | None = None) -> dict:
    """Identity of a model for keys and manifests: loads it once (in ``dtype``; ``None`` is float32), then frees it.

    ``requested_dtype`` is what the build asked for (``None``: the default), passed to every notebook that loads
    the model; ``device`` is where this machine put it (``models.load_model``'s ``device_choice``)."""
    # deferred: torch, not needed when nothing has to run
    from ..models.loading import load_model, unload_model

    loaded = load_model(name, dtype=dtype)
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
            "requested_dtype": dtype,
            "device": loaded.source.get("device_choice"),
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
    notebooks_dir: Path = _NOTEBOOKS_DIR,
    specs: tuple[_NotebookSpec, ...] = _STUDY_NOTEBOOKS,
    log=print,
) -> list[Run]:
    """The ordered runs for ``models`` (dicts from :func:`describe_model`).

    Notebooks that do not exist yet are reported and left out; a notebook that
    does not apply to a model (generation on an encoder) is reported too.
    """
    results_dir = Path(results_dir or paths.results_dir())

    def params_for(nb: Path, wanted: dict) -> dict:
        declared = declared_parameters(nb)
        quick_nb = {**QUICK_PARAMETERS, **_quick_overrides(nb.stem)} if quick else {}
        if "output_dir" not in declared:
            # it then writes under paths.results_dir(), which make_book points at results_dir
            log(f"book: {nb.name} declares no output_dir parameter; it writes to its default folder")
        return {k: v for k, v in {**quick_nb, **wanted}.items() if k in declared}

    def reads(spec: _NotebookSpec, parameters: dict, nb: Path) -> list[str]:
        declared = declared_parameters(nb)
        wanted = list(spec.reads)
        for stem, name in spec.reads_if:
            value = parameters[name] if name in parameters else ast.literal_eval(declared.get(name, "False"))
            wanted += [stem] if value else []
        return wanted

    runs: list[Run] = []
    available = []
    for spec in specs:
        nb = notebooks_dir / f"{spec.stem}.ipynb"
        if nb.exists():
            available.append((spec, nb))
        else:
            log(f"book: {nb.name} does not exist yet; its chapter is left out")
    for model in models:
        planned: dict[str, str] = {}  # this model's chapters so far: stem -> label
        embedding: list[tuple[Run, bool]] = []  # this model's chapters that embed, and whether each reads another
        for spec, nb in available:
            if spec.scope != "model":
                continue
            if spec.generates and not model["can_generate"]:
                log(f"book: {spec.stem} skipped for {model['name']}: the model cannot generate text")
                continue
            out_dir = results_dir / model["slug"]
            # A lower precision is a parameter of every notebook that loads the model (its id names it too).
            precision = {"dtype": model["requested_dtype"]} if model.get("requested_dtype") else {}
            parameters = params_for(nb, {"model": model["name"], **precision, "output_dir": str(out_dir)})
            # a chapter read that is not planned for this model (not written yet) leaves the notebook to say so
            needs = tuple(planned[stem] for stem in reads(spec, parameters, nb) if stem in planned)
            run = Run(
                label=f"{model['slug']}/{spec.stem}", notebook=nb,
                output=book_dir / "models" / model["slug"] / nb.name, parameters=parameters,
                model=model, depends_on=needs, after=needs, quick=quick, results=out_dir,
                estimate_s=spec.estimate_s,
            )
            runs.append(run)
            planned[spec.stem] = run.label
            if spec.embeds:
                embedding.append((run, bool(needs)))
        # One order for the chapters that fill the embedding cache, in lanes and one at a time alike: those that read
        # no other chapter first (12 without its long form, beside 06 in a build with lanes), then those that do.
        chain = [r for r, reads_one in embedding if not reads_one] + [r for r, reads_one in embedding if reads_one]
        for before, run in zip(chain, chain[1:]):
            run.after = tuple(dict.fromkeys(run.after + (before.label,)))
    for spec, nb in available:
        if spec.scope == "once":
            runs.append(Run(
                label=f"{REPLICATION_SLUG}/{spec.stem}", notebook=nb,
                output=book_dir / "models" / REPLICATION_SLUG / nb.name,
                parameters=params_for(nb, {"output_dir": str(results_dir / REPLICATION_SLUG)}), quick=quick,
                results=results_dir / REPLICATION_SLUG, estimate_s=spec.estimate_s,
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
                depends_on=tuple(model_runs), after=tuple(model_runs), quick=quick, results=results_dir / CROSS_SLUG,
                estimate_s=spec.estimate_s,
            ))
    return runs


def resolve_dependency_keys(runs: list[Run], env: Environment) -> None:
    """Replace run labels in ``depends_on`` by those runs' keys (in order, so chains resolve)."""
    keys: dict[str, str] = {}
    for run in runs:
        run.depends_on = tuple(keys.get(d, d) for d in run.depends_on)
        keys[run.label] = run.key(env)

