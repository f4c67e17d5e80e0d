"""The package's declared structure: ``__all__`` against DESIGN.md, imports, notebook parameters, run keys, docs."""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys

import nbformat
import pytest

from bias_utils.book import runs
from bias_utils.core import paths

MODULES = sorted(p.stem for p in runs._PACKAGE_DIR.glob("*.py") if p.stem != "__init__")
NOTEBOOKS = sorted(runs._NOTEBOOKS_DIR.glob("*.ipynb"))



def _tree(module: str) -> ast.Module:
    return ast.parse((runs._PACKAGE_DIR / f"{module}.py").read_text(encoding="utf-8"))


def _defined_public(module: str) -> set[str]:
    """Top-level functions and classes a module defines without a leading underscore."""
    return {n.name for n in _tree(module).body
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_")}


def _design_table() -> dict[str, list[str]]:
    """DESIGN.md's module table: module -> the names its API column lists (inside backticks)."""
    rows = {}
    for line in (paths.ROOT / "DESIGN.md").read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| `(\w+)` \|[^|]*\|(.*)\|\s*$", line)
        if not m:
            continue
        names = []
        for span in re.findall(r"`([^`]+)`", m.group(2)):
            if span.startswith("python "):
                continue
            while re.search(r"\([^()]*\)", span):  # drop argument lists, innermost first
                span = re.sub(r"\([^()]*\)", "", span)
            names += [re.match(r"\s*(\w+)", part).group(1) for part in span.split(",")]
        rows[m.group(1)] = names
    return rows


def _code_cells(nb_path) -> list:
    return [c for c in nbformat.read(nb_path, as_version=4).cells if c.cell_type == "code"]


def _parse(source: str) -> ast.Module:
    return ast.parse("\n".join(ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))))


# --------------------------------------------------------------------------- declared API


def test_every_module_declares_all_completely():
    for module in MODULES + ["__init__"]:
        mod = importlib.import_module(f"bias_utils.{module}" if module != "__init__" else "bias_utils")
        declared = getattr(mod, "__all__", None)
        assert declared is not None, f"{module} has no __all__"
        assert len(declared) == len(set(declared)), f"{module}.__all__ lists a name twice"
        missing = [n for n in declared if not hasattr(mod, n)]
        assert not missing, f"{module}.__all__ names what it does not define: {missing}"
        if module != "__init__":
            undeclared = _defined_public(module) - set(declared)
            assert not undeclared, f"{module} defines public names missing from __all__: {sorted(undeclared)}"


def test_design_table_agrees_with_all():
    """DESIGN's row of a module lists every name of its ``__all__`` and nothing else."""
    table = _design_table()
    assert set(table) == set(MODULES), (set(table) ^ set(MODULES))
    for module, names in table.items():
        declared = set(importlib.import_module(f"bias_utils.{module}").__all__)
        absent = [n for n in names if n not in declared]
        assert not absent, f"DESIGN.md lists {absent} for {module}, which its __all__ does not declare"
        unlisted = sorted(declared - set(names))
        assert not unlisted, f"{module}.__all__ declares {unlisted}, which its DESIGN.md row does not list"


def test_no_two_modules_define_a_public_function_of_the_same_name():
    owners: dict[str, list[str]] = {}
    for module in MODULES:
        for name in _defined_public(module):
            owners.setdefault(name, []).append(module)
    shared = {name: mods for name, mods in owners.items() if len(mods) > 1}
    assert not shared, shared


def test_imports_inside_functions_say_why_they_are_deferred():
    """Imports sit at the top; one inside a function defers a heavy dependency and says so."""
    bad = []
    for module in MODULES:
        lines = (runs._PACKAGE_DIR / f"{module}.py").read_text(encoding="utf-8").splitlines()
        for fn in ast.walk(_tree(module)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    # the reason is on the import line or on a comment line right above the import block
                    above = [ln.strip() for ln in lines[max(0, node.lineno - 4):node.lineno - 1]]
                    if "# deferred:" not in lines[node.lineno - 1] and not any(
                            ln.startswith("# deferred:") for ln in above):
                        bad.append(f"{module}.py:{node.lineno} in {fn.name}: {lines[node.lineno - 1].strip()}")
    assert not bad, "imports inside functions without a '# deferred:' reason:\n" + "\n".join(bad)


def _imported_name(text: str, package: str | None = None) -> str | None:
    """The ``bias_utils`` module a dotted name given to ``__import__``/``import_module`` reaches, if any."""
    if text.startswith(".") and package == "bias_utils":
        return text.lstrip(".").split(".")[0] or None
    parts = text.split(".")
    return parts[1] if parts[0] == "bias_utils" and len(parts) > 1 else None


def _package_imports(module: str) -> set[str]:
    """``bias_utils`` modules ``module`` imports anywhere in the file: relative and absolute ``import``/``from``
    statements (inside functions too), ``__import__("bias_utils.x")`` and ``importlib.import_module(...)``.
    A dynamic import whose name is not a string literal fails: it could hide any edge."""
    found, dynamic = set(), []
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                found |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
            elif node.level == 0 and node.module and node.module.split(".")[0] == "bias_utils":
                sub = _imported_name(node.module)
                found |= {sub} if sub else {a.name for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {sub for a in node.names if (sub := _imported_name(a.name))}
        elif isinstance(node, ast.Call):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
            if name not in ("__import__", "import_module"):
                continue
            arg = node.args[0] if node.args else None
            if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                dynamic.append(f"{module}.py:{node.lineno}")
                continue
            package = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "package"), None)
            package = package.value if isinstance(package, ast.Constant) else None
            sub = _imported_name(arg.value, package)
            found |= {sub} if sub else set()
    assert not dynamic, f"imports of a computed module name: {dynamic}"
    return found - {None}


def _layers() -> list[list[str]]:
    """DESIGN.md's layer list, lowest first: lines ``N. label: `a`, `b`, ...`` after "Layer list"."""
    text = (paths.ROOT / "DESIGN.md").read_text(encoding="utf-8")
    block = text[text.index("Layer list (lowest first)"):].split("\n\n")[1]
    layers = []
    for line in block.splitlines():
        m = re.match(r"(\d+)\. [^:`]+: (.*)$", line)
        assert m and int(m.group(1)) == len(layers) + 1, f"not a layer line: {line!r}"
        layers.append(re.findall(r"`(\w+)`", m.group(2)))
    return layers


def test_layer_list_names_every_module_once():
    listed = [m for layer in _layers() for m in layer]
    assert len(listed) == len(set(listed)), f"a module is in two layers: {listed}"
    missing = sorted(set(MODULES) - set(listed))
    assert not missing, f"modules missing from DESIGN.md's layer list: {missing}"
    unknown = sorted(set(listed) - set(MODULES))
    assert not unknown, f"DESIGN.md's layer list names modules that do not exist: {unknown}"


def test_no_import_reaches_a_higher_layer():
    level = {m: i for i, layer in enumerate(_layers()) for m in layer}
    bad = [f"{m} (layer {level[m] + 1}) imports {d} (layer {level[d] + 1})"
           for m in MODULES for d in sorted(_package_imports(m)) if d in level and level[d] > level[m]]
    assert not bad, "imports from a lower layer to a higher one:\n" + "\n".join(bad)


def test_imports_reach_only_modules_of_the_package():
    unknown = {m: sorted(_package_imports(m) - set(MODULES)) for m in MODULES}
    assert not {m: u for m, u in unknown.items() if u}, unknown


def test_import_graph_has_no_circle():
    graph = {m: _package_imports(m) & set(MODULES) for m in MODULES}
    state: dict[str, str] = {}

    def visit(m, path):
        state[m] = "open"
        for d in sorted(graph[m]):
            if state.get(d) == "open":
                raise AssertionError("import circle: " + " -> ".join(path[path.index(d):] + [d]))
            if d not in state:
                visit(d, path + [d])
        state[m] = "done"

    for m in MODULES:
        if m not in state:
            visit(m, [m])


def test_the_import_scan_sees_hidden_imports(tmp_path, monkeypatch):
    """The scan finds what ruff and a plain ``ast.ImportFrom`` walk miss: ``__import__``, ``import_module`` (relative
    with a package, or absolute), absolute imports of the package, and imports inside functions."""
    (tmp_path / "probe.py").write_text(
        "import importlib\n"
        "def f():\n"
        "    __import__('bias_utils.book.validation').validation\n"
        "    importlib.import_module('.book', 'bias_utils')\n"
        "    importlib.import_module('bias_utils.book.summary')\n"
        "    import bias_utils.profiles.layers\n"
        "    from bias_utils import crossmodel\n"
        "    from .space import build_space\n", encoding="utf-8")
    monkeypatch.setattr(runs, "PACKAGE_DIR", tmp_path)
    assert _package_imports("probe") == {"validation", "book", "summary", "layers", "crossmodel", "space"}
    (tmp_path / "probe.py").write_text("import importlib\nname = 'bias_utils.book.build'\nimportlib.import_module(name)\n")
    with pytest.raises(AssertionError, match="computed module name"):
        _package_imports("probe")


def test_space_no_longer_sits_above_profiles():
    closure, todo = set(), ["space"]
    while todo:
        for name in _package_imports(todo.pop()) - closure:
            closure.add(name)
            todo.append(name)
    assert "profiles" not in closure and "layers" not in closure
    assert "profiles" in _package_imports("layers") and "space" in _package_imports("layers")


# --------------------------------------------------------------------------- notebooks


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_cell_lists_only_parameters_the_notebook_uses(nb_path):
    declared = runs._declared_parameters(nb_path)
    used = set()
    for cell in _code_cells(nb_path):
        if "parameters" in cell.metadata.get("tags", []):
            continue
        used |= {n.id for n in ast.walk(_parse(cell.source)) if isinstance(n, ast.Name)}
    unused = sorted(set(declared) - used)
    assert not unused, f"{nb_path.name} declares parameters it never uses: {unused}"


def test_quick_overrides_only_name_declared_parameters():
    declared = {nb.stem: set(runs._declared_parameters(nb)) for nb in NOTEBOOKS}
    for stem, overrides in runs._QUICK_OVERRIDES.items():
        assert stem in declared, f"QUICK_OVERRIDES names {stem}, which is not a notebook"
        assert set(overrides) <= declared[stem], (stem, set(overrides) - declared[stem])
    for name in runs._QUICK_PARAMETERS:
        assert any(name in d for d in declared.values()), f"no notebook declares the QUICK parameter {name!r}"


@pytest.mark.slow  # imports torch and transformers in a fresh interpreter per notebook
@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_run_key_covers_every_module_the_notebook_imports(nb_path):
    """Executing the notebook's imports loads only modules its run key hashes."""
    imports = []
    for cell in _code_cells(nb_path):
        imports += [ast.unparse(n) for n in _parse(cell.source).body if isinstance(n, (ast.Import, ast.ImportFrom))]
    code = "\n".join(imports + [
        "import json, sys",
        "print(json.dumps(sorted(m.split('.')[1] for m in sys.modules if m.startswith('bias_utils.'))))"])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=paths.ROOT)
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    keyed = set(runs._code_modules(nb_path))
    unkeyed = loaded - set(runs._BUILDER_MODULES) - keyed
    assert not unkeyed, f"{nb_path.name}: modules loaded but not in the run key: {unkeyed}"


def test_run_keys_follow_the_moved_modules():
    nb = {p.stem: set(runs._code_modules(p)) for p in NOTEBOOKS}
    assert {"dictionaries", "models"} <= nb["01_dictionaries"]
    assert {"layers", "space", "profiles", "dictionaries"} <= nb["05_layers"]
    assert {"replication", "bold"} <= nb["07_bold_replication"]
    assert {"completions", "bold", "space", "embeddings"} <= nb["08_completion_profiles"]
    assert {"crossmodel", "completions", "bold", "plots"} <= nb["09_cross_model"]


# --------------------------------------------------------------------------- docs


def _chains(text: str) -> list[tuple[str, ...]]:
    return [tuple(re.split(r"\s*→\s*", m)) for m in re.findall(r"\b(?:dictionaries|bold)(?:\s*→\s*\w+)+", text)]


def test_design_readme_and_package_docstring_state_the_same_two_pipelines():
    import bias_utils

    design = _chains((paths.ROOT / "DESIGN.md").read_text(encoding="utf-8"))
    readme = _chains((paths.ROOT / "README.md").read_text(encoding="utf-8"))
    package = _chains(bias_utils.__doc__)
    assert len(package) == 2 and package[0][0] == "dictionaries" and package[1][0] == "bold"
    assert design == package and readme == package
    modules = set(MODULES)
    assert all(step in modules for chain in package for step in chain)


def test_readme_notebook_table_names_tables_the_notebooks_write():
    """Every notebook has a row, and every table a row names is written by the notebook's code
    or by a module it imports (a table name appears there as a string)."""
    rows = {}
    for line in (paths.ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| `(\d\d_\w+)` \|.*\| (`.*`) \|\s*$", line)
        if m:
            rows[m.group(1)] = re.findall(r"`([^`]+)`", m.group(2))
    assert set(rows) == {p.stem for p in NOTEBOOKS}
    for nb_path in NOTEBOOKS:
        code = "\n".join(c.source for c in _code_cells(nb_path))
        code += "\n".join((runs._PACKAGE_DIR / f"{m}.py").read_text() for m in runs._code_modules(nb_path))
        for table in rows[nb_path.stem]:
            pattern = re.escape(table).replace(re.escape("<source>"), r"\{?\w+\}?") if "<" in table else table
            written = re.search(rf"""['"/]{pattern}['"]""", code) or (
                "<" in table and re.search(r"""f['"]""" + re.escape(table.split("<")[0]), code))
            assert written, f"README says {nb_path.stem} writes {table!r}; no such table name in its code"


def test_bold_notebooks_are_what_their_script_writes():
    """06 and 07 are generated: an edit made only in the notebook would be lost on the next regeneration."""
    import runpy

    script = runpy.run_path(str(paths.ROOT / "scripts" / "make_bold_notebooks.py"))
    makers = {"06_bold_audit": script["audit_notebook"], "07_bold_replication": script["replication_notebook"]}
    for name, make in makers.items():
        written = [(c.cell_type, c.source) for c in make().cells]
        committed = [(c.cell_type, c.source) for c in nbformat.read(paths.ROOT / "notebooks" / f"{name}.ipynb",
                                                                    as_version=4).cells]
        assert written == committed, name


def test_both_make_targets_install_the_default_context_generator():
    """A user dictionary with the default context_source="generated" needs contexts.DEFAULT_GENERATOR: `make book`
    and `make test` install the model the package names (CI once failed where only the package named it)."""
    from bias_utils.profiles import contexts

    makefile = (paths.ROOT / "Makefile").read_text()
    assert re.search(r"^CONTEXT_GENERATOR := (\S+)$", makefile, re.M).group(1) == contexts._DEFAULT_GENERATOR
    assert re.search(r"^TEST_MODELS := .*\$\(CONTEXT_GENERATOR\)", makefile, re.M)
    assert re.search(r"^book:.*\n\t@\$\(MAKE\) .*models MODEL_SET=\"[^\"]*\$\(CONTEXT_GENERATOR\)", makefile, re.M)
