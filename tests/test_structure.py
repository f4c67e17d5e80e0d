"""The package's declared structure: ``__all__`` against DESIGN.md, imports, notebook parameters, run keys, docs."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import re
import subprocess
import sys

import nbformat
import pytest

from bias_utils.book import runs
from bias_utils.core import paths

#: every module by its dotted name below bias_utils ("profiles.space"; a package's own file "profiles.__init__")
ALL_MODULES = runs._package_modules()
#: the modules that hold code (not a package's __init__ or __main__)
MODULES = sorted(m for m in ALL_MODULES if not m.endswith(("__init__", "__main__")))
SUBPACKAGES = sorted({m.split(".")[0] for m in MODULES})
NOTEBOOKS = sorted(runs._NOTEBOOKS_DIR.glob("*.ipynb"))
DESIGN = (paths.ROOT / "DESIGN.md").read_text(encoding="utf-8")


def _tree(module: str) -> ast.Module:
    return ast.parse(ALL_MODULES[module].read_text(encoding="utf-8"))


def _defined_public(module: str) -> set[str]:
    """Top-level functions, classes and assigned names a module defines without a leading underscore."""
    names = set()
    for n in _tree(module).body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            for target in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                names |= {x.id for x in ast.walk(target) if isinstance(x, ast.Name)}
    return {n for n in names if not n.startswith("_")}


def _section(title: str) -> str:
    """The text of DESIGN.md's ``## title`` section."""
    return DESIGN.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def _code_cells(nb_path) -> list:
    return [c for c in nbformat.read(nb_path, as_version=4).cells if c.cell_type == "code"]


def _parse(source: str) -> ast.Module:
    return ast.parse("\n".join(ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))))


# --------------------------------------------------------------------------- declared API


def test_every_module_declares_all_completely():
    """``__all__`` is a module's part of the user API (what a notebook or a reader's cell calls): every name in it is
    defined there and none has a leading underscore. A name without one that is not in ``__all__`` is the module's
    interface to the rest of the package; a name with one is used in its module only
    (:func:`test_a_name_used_outside_its_module_has_no_underscore`)."""
    for module in MODULES:
        mod = importlib.import_module(f"bias_utils.{module}")
        declared = getattr(mod, "__all__", None)
        assert declared is not None, f"{module} has no __all__"
        assert len(declared) == len(set(declared)), f"{module}.__all__ lists a name twice"
        missing = [n for n in declared if not hasattr(mod, n)]
        assert not missing, f"{module}.__all__ names what it does not define: {missing}"
        assert not [n for n in declared if n.startswith("_")], f"{module}.__all__ lists an underscore name"
        foreign = set(declared) - _defined_public(module)
        assert not foreign, f"{module}.__all__ lists names defined elsewhere (list a name at home): {sorted(foreign)}"


@pytest.mark.parametrize("sub", SUBPACKAGES)
def test_each_subpackage_lists_its_modules_public_names_by_role(sub):
    """The subpackage's ``_EXPORTS`` has one role per module, in the module's own ``__all__`` order, every name
    readable from the subpackage; its ``__all__`` is exactly those names."""
    package = importlib.import_module(f"bias_utils.{sub}")
    own = {m.split(".", 1)[1] for m in MODULES if m.split(".")[0] == sub}
    assert set(package._EXPORTS) <= own, set(package._EXPORTS) - own
    for module in own:
        declared = list(importlib.import_module(f"bias_utils.{sub}.{module}").__all__)
        assert list(package._EXPORTS.get(module, ())) == declared, (sub, module)
    assert package.__all__ == [n for names in package._EXPORTS.values() for n in names]
    for name in package.__all__:
        assert getattr(package, name) is not None
    with pytest.raises(AttributeError, match="no attribute"):
        getattr(package, "no_such_name")


@pytest.mark.slow
def test_importing_one_module_leaves_its_siblings_unloaded():
    """The subpackages import their API on first use: a notebook's parameter check or a context filter does not
    load torch through a sibling."""
    code = ("import sys\nfrom bias_utils.profiles import context_filters\n"
            "from bias_utils.models import builtin_models\n"
            "print(sorted(m for m in ('torch', 'transformers', 'bias_utils.profiles.space') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=paths.ROOT)
    assert out.stdout.strip() == "[]"


def _public_names() -> set[str]:
    return {n for m in MODULES for n in importlib.import_module(f"bias_utils.{m}").__all__}


def test_design_states_the_public_api_per_subpackage():
    """DESIGN's "Public API" section lists, under each subpackage, exactly the names of its ``__all__`` (by
    role, one line per module), and states how many public names there are in all."""
    text = _section("Public API")
    parts = re.split(r"^### `bias_utils\.(\w+)`.*$", text, flags=re.M)
    listed = dict(zip(parts[1::2], parts[2::2]))
    assert sorted(listed) == SUBPACKAGES
    for sub, body in listed.items():
        names = [n for line in body.splitlines() if (m := re.match(r"- .* \(`\w+`\): (.*)$", line))
                 for n in re.findall(r"`(\w+)`", m.group(1))]
        package = importlib.import_module(f"bias_utils.{sub}")
        assert names == package.__all__, (sub, sorted(set(names) ^ set(package.__all__)))
    count = int(re.search(r"(\d+) public names in all", text).group(1))
    assert count == len(_public_names())
    readme = (paths.ROOT / "README.md").read_text(encoding="utf-8")
    assert int(re.search(r"own cell calls: (\d+) names", readme).group(1)) == count


def _private_reaches(source: str, module: str = "") -> list[str]:
    """The underscore names of ``bias_utils`` that ``source`` imports or reads as a module's attribute; ``module``
    (dotted below bias_utils, e.g. "core.stats") resolves the relative imports of a package module's source."""
    tree, modules, found = _parse(source), set(), []
    package = module.rsplit(".", 1)[0].split(".") if "." in module else []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)] + ([node.module] if node.module else [])
                name = ".".join(["bias_utils"] + base)
            else:
                name = node.module or ""
            if not name.startswith("bias_utils"):
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{name}.{alias.name}")
                elif f"{name}.{alias.name}".removeprefix("bias_utils.") in ALL_MODULES or \
                        f"{name}.{alias.name}.__init__".removeprefix("bias_utils.") in ALL_MODULES:
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name.startswith("bias_utils.") and a.asname}
    found += [f"{n.value.id}.{n.attr}" for n in ast.walk(tree) if isinstance(n, ast.Attribute)
              and isinstance(n.value, ast.Name) and n.value.id in modules and n.attr.startswith("_")
              and not n.attr.startswith("__")]
    return found


def test_notebooks_and_readme_examples_reach_only_public_names_and_there_are_at_most_159():
    """Public is what a notebook or a reader's own cell calls: neither reaches a name outside ``__all__``, so what
    they need is in the API; and that API stays small: at most 159 names (149 before chapter 12 added its one entry
    point, ``erasure_tradeoff``, and the data layer's errors became one public ``DataError``; 152 when chapter 09
    said in words that two "they" shares are two measures, ``describe_neutral_definitions``; 153 when chapter 05's
    first screen said where the gap is largest, ``describe_layers``; 154 when chapter 01's said its counts against
    the paper's, ``describe_counts``; 155 when chapter 11's long form added its one, ``long_form_table``; 156 when
    chapter 02's first screen said its contexts' coverage, ``describe_report``; 159 when chapter 09 set chapter 12's
    erasure curves side by side: their table, chart and sentence, ``book.crossmodel_erasure``)."""
    sources = {nb.stem: "\n".join(c.source for c in _code_cells(nb)) for nb in NOTEBOOKS}
    readme = (paths.ROOT / "README.md").read_text(encoding="utf-8")
    sources |= {f"README python block {i}": block
                for i, block in enumerate(re.findall(r"```python\n(.*?)```", readme, re.S))}
    reached = {name: found for name, source in sources.items() if (found := _api_reaches(source))}
    assert not reached, reached
    assert _api_reaches("from bias_utils.core import stats\nstats.welch_t(1, 2)") == ["bias_utils.core.stats.welch_t"]
    assert len(_public_names()) <= 159


def _api_reaches(source: str) -> list[str]:
    """The names of ``bias_utils`` outside the user API (a module's or subpackage's ``__all__``) that ``source``
    imports or reads as a module's attribute."""
    tree, modules, found = _parse(source), {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bias_utils"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full.removeprefix("bias_utils.") in ALL_MODULES or \
                        f"{full}.__init__".removeprefix("bias_utils.") in ALL_MODULES:
                    modules[alias.asname or alias.name] = full
                elif alias.name not in importlib.import_module(node.module).__all__:
                    found.append(full)
        elif isinstance(node, ast.Import):
            modules |= {a.asname: a.name for a in node.names if a.name.startswith("bias_utils.") and a.asname}
    found += [f"{modules[n.value.id]}.{n.attr}" for n in ast.walk(tree) if isinstance(n, ast.Attribute)
              and isinstance(n.value, ast.Name) and n.value.id in modules
              and n.attr not in getattr(importlib.import_module(modules[n.value.id]), "__all__", ())]
    return found


def test_a_name_used_outside_its_module_has_no_underscore():
    """A name another module, a notebook, a script or a benchmark uses is part of its module's interface and says
    so: no leading underscore (the tests, which look inside on purpose, are the exception; ruff's SLF001 and
    PLC2701 hold the same for attributes and imports as code is written). What a reader's cell may call is the
    smaller ``__all__``."""
    sources = {f"bias_utils.{m}": (ALL_MODULES[m].read_text(encoding="utf-8"), m) for m in ALL_MODULES}
    sources |= {str(p.relative_to(paths.ROOT)): (p.read_text(encoding="utf-8"), "")
                for folder in ("scripts", "benchmarks") for p in sorted((paths.ROOT / folder).glob("*.py"))}
    sources |= {nb.stem: ("\n".join(c.source for c in _code_cells(nb)), "") for nb in NOTEBOOKS}
    reached = {name: found for name, (source, module) in sources.items() if (found := _private_reaches(source, module))}
    assert not reached, reached
    # a module's own name, reached from outside by a relative import or as an attribute, is found
    assert _private_reaches("from ..core.cache import _drop_torn_tail\n", "audit.bold") == [
        "bias_utils.core.cache._drop_torn_tail"]
    assert _private_reaches("from . import stats\nstats._check_tests(1)", "core.mixed") == ["stats._check_tests"]


def test_no_two_modules_define_a_public_name_of_the_same_name():
    owners: dict[str, list[str]] = {}
    for module in MODULES:
        for name in _defined_public(module):
            owners.setdefault(name, []).append(module)
    shared = {name: mods for name, mods in owners.items() if len(mods) > 1}
    assert not shared, shared


def test_imports_inside_functions_say_why_they_are_deferred():
    """Imports sit at the top; one inside a function defers a heavy dependency and says so."""
    bad = []
    for module in ALL_MODULES:
        lines = ALL_MODULES[module].read_text(encoding="utf-8").splitlines()
        for fn in ast.walk(_tree(module)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    # the reason is on the import line or on a comment line right above the import block
                    above = [ln.strip() for ln in lines[max(0, node.lineno - 4):node.lineno - 1]]
                    if "# deferred:" not in lines[node.lineno - 1] and not any(
                            ln.startswith("# deferred:") for ln in above):
                        bad.append(f"{module}:{node.lineno} in {fn.name}: {lines[node.lineno - 1].strip()}")
    assert not bad, "imports inside functions without a '# deferred:' reason:\n" + "\n".join(bad)


def test_a_module_over_600_lines_says_why_it_is_one_concept():
    """Long modules are split where their concepts divide; one over 600 lines that stays whole says why in its
    docstring (a sentence starting "One concept"), and none passes 800."""
    lines = {m: len(ALL_MODULES[m].read_text(encoding="utf-8").splitlines()) for m in MODULES}
    long = [m for m in MODULES if lines[m] > 600]
    unexplained = [m for m in long if "One concept" not in (ast.get_docstring(_tree(m)) or "")]
    assert not unexplained, f"over 600 lines without saying why they are one concept: {unexplained}"
    too_long = {m: n for m, n in lines.items() if n > 800}
    assert not too_long, f"over the 800 lines a module may have, reason or not: {too_long}"


# --------------------------------------------------------------------------- imports and layers


def _package_imports(module: str) -> set[str]:
    """The ``bias_utils`` modules (dotted) ``module`` imports anywhere in the file: relative and absolute
    ``import``/``from`` statements (inside functions too), a subpackage's ``_EXPORTS``, ``__import__("bias_utils.x")``
    and ``importlib.import_module(...)``; a package's ``__init__`` that an import runs counts too. A dynamic import
    whose name is not a string literal fails: it could hide any edge (``core.exports``' one reads ``_EXPORTS``)."""
    source = ALL_MODULES[module].read_text(encoding="utf-8")
    package = module.rsplit(".", 1)[0] if "." in module else ""
    found = set(runs._imported_modules(source, package, ALL_MODULES))
    dynamic = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
        if name not in ("__import__", "import_module"):
            continue
        arg = node.args[0] if node.args else None
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
            dynamic.append(f"{module}:{node.lineno}")
            continue
        text = arg.value
        if text.startswith("."):
            base = node.args[1].value if len(node.args) > 1 else next(k.value.value for k in node.keywords
                                                                        if k.arg == "package")
            text = base + text
        if text.startswith("bias_utils."):
            found |= runs._imported_modules(f"import {text}", "", ALL_MODULES) or set()
    unread = [d for d in dynamic if not d.startswith("core.exports:")]
    assert not unread, f"imports of a computed module name: {unread}"
    return found - {module}


def _layers() -> list[str]:
    """DESIGN.md's layer list, lowest first: lines ``N. `subpackage`: ...`` after "Layer list"."""
    block = DESIGN[DESIGN.index("Layer list (lowest first)"):].split("\n\n")[1]
    layers = []
    for line in block.splitlines():
        m = re.match(r"(\d+)\. `(\w+)`: ", line)
        assert m and int(m.group(1)) == len(layers) + 1, f"not a layer line: {line!r}"
        layers.append(m.group(2))
    return layers


def test_layer_list_names_every_subpackage_once():
    assert sorted(_layers()) == SUBPACKAGES and len(set(_layers())) == len(_layers())


def test_no_import_reaches_a_higher_subpackage():
    level = {sub: i for i, sub in enumerate(_layers())}
    bad = [f"{m} ({m.split('.')[0]}) imports {d}" for m in ALL_MODULES if "." in m
           for d in sorted(_package_imports(m)) if "." in d and level[d.split(".")[0]] > level[m.split(".")[0]]]
    assert not bad, "imports from a lower subpackage to a higher one:\n" + "\n".join(bad)


def test_the_two_studies_import_nothing_of_each_other():
    """Study 2 (``audit``) imports nothing from Study 1 (``profiles``), nor Study 1 from Study 2: what reads both is
    the question joining them (``intrinsic_extrinsic``), above both."""
    crossing = [f"{m} imports {d}" for m in ALL_MODULES for d in sorted(_package_imports(m))
                if {m.split(".")[0], d.split(".")[0]} == {"audit", "profiles"}]
    assert not crossing, "\n".join(crossing)
    assert any(d.startswith("profiles.") for d in _package_imports("intrinsic_extrinsic.erasure_measures"))
    assert any(d.startswith("audit.") for d in _package_imports("intrinsic_extrinsic.erasure_measures"))


def test_import_graph_has_no_circle_between_modules_or_subpackages():
    def no_circle(graph):
        state: dict[str, str] = {}

        def visit(m, path):
            state[m] = "open"
            for d in sorted(graph[m]):
                if state.get(d) == "open":
                    raise AssertionError("import circle: " + " -> ".join(path[path.index(d):] + [d]))
                if d not in state:
                    visit(d, path + [d])
            state[m] = "done"

        for m in sorted(graph):
            if m not in state:
                visit(m, [m])

    # a package's __init__ is run by every import of its modules; its own _EXPORTS are imported lazily
    modules = {m: {d for d in _package_imports(m) if not d.endswith("__init__")} for m in MODULES}
    no_circle(modules)
    subs = {s: set() for s in SUBPACKAGES}
    for m, deps in modules.items():
        subs[m.split(".")[0]] |= {d.split(".")[0] for d in deps} - {m.split(".")[0]}
    no_circle(subs)


def test_the_import_scan_sees_hidden_imports():
    """The scan finds what ruff and a plain ``ast.ImportFrom`` walk miss: ``__import__``, ``import_module`` (relative
    with a package, or absolute), absolute imports of the package, imports inside functions, ``_EXPORTS``."""
    source = ("import importlib\n"
              "def f():\n"
              "    __import__('bias_utils.book.validation').validation\n"
              "    importlib.import_module('.summary', 'bias_utils.book')\n"
              "    importlib.import_module('bias_utils.core.stats')\n"
              "    import bias_utils.profiles.layers\n"
              "    from bias_utils.book import crossmodel\n"
              "    from .space import build_space\n"
              "_EXPORTS = {'projection': ('table2',)}\n")
    found = runs._imported_modules(source, "profiles", ALL_MODULES)
    assert {"book.crossmodel", "profiles.layers", "profiles.space", "profiles.projection",
            "profiles.__init__", "book.__init__"} <= found
    ALL_MODULES["profiles.probe"] = paths.ROOT / "probe-does-not-exist.py"
    try:
        ALL_MODULES["profiles.probe"] = type("P", (), {"read_text": lambda self, encoding=None: source})()
        assert {"book.validation", "book.summary", "core.stats"} <= _package_imports("profiles.probe")
        ALL_MODULES["profiles.probe"] = type("P", (), {"read_text": lambda self, encoding=None: (
            "import importlib\nname = 'bias_utils.book.build'\nimportlib.import_module(name)\n")})()
        with pytest.raises(AssertionError, match="computed module name"):
            _package_imports("profiles.probe")
    finally:
        del ALL_MODULES["profiles.probe"]


def test_space_no_longer_sits_above_profiles():
    closure, todo = set(), ["profiles.space"]
    while todo:
        for name in _package_imports(todo.pop()) - closure - {"profiles.__init__"}:
            closure.add(name)
            todo.append(name)
    assert "profiles.population_profiles" not in closure and "profiles.layers" not in closure
    assert {"profiles.population_profiles", "profiles.space"} <= _package_imports("profiles.layers")


# --------------------------------------------------------------------------- the map in DESIGN.md


def _package_map() -> list[tuple[str, str]]:
    """DESIGN's package map: ``(subpackage, module)`` in the order drawn (``(sub, "")`` for the folder line)."""
    block = _section("Package map").split("```text\n", 1)[1].split("```", 1)[0]
    drawn = []
    for line in block.splitlines():
        folder = re.match(r"[├└]── (\w+)/\s", line)
        module = re.match(r"│?\s+[├└]── (\w+)\.py\s", line)
        if folder:
            drawn.append((folder.group(1), ""))
        elif module:
            drawn.append((drawn[-1][0], module.group(1)))
    return drawn


def test_design_map_matches_the_folders():
    """The diagram draws every subpackage (in layer order) and every module, each with a line on what it is for."""
    drawn = _package_map()
    assert [s for s, m in drawn if not m] == _layers()
    on_disk = sorted(m for m in ALL_MODULES if "." in m and not m.endswith("__init__"))
    assert sorted(f"{s}.{m}" for s, m in drawn if m) == on_disk


def _chains(text: str) -> list[tuple[str, ...]]:
    return [tuple(re.split(r"\s*→\s*", m))
            for m in re.findall(r"\b(?:profiles\.dictionaries|audit\.bold_prompts)(?:\s*→\s*[\w.]+)+", text)]


def test_design_readme_and_package_docstring_state_the_same_two_pipelines():
    import bias_utils

    design = _chains(DESIGN)
    readme = _chains((paths.ROOT / "README.md").read_text(encoding="utf-8"))
    package = _chains(bias_utils.__doc__)
    assert len(package) == 2 and package[0][0] == "profiles.dictionaries" and package[1][0] == "audit.bold_prompts"
    assert design == package and readme == package
    assert all(step in ALL_MODULES for chain in package for step in chain)


# --------------------------------------------------------------------------- notebooks


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_cell_lists_only_parameters_the_notebook_uses(nb_path):
    declared = runs.declared_parameters(nb_path)
    used = set()
    for cell in _code_cells(nb_path):
        if "parameters" in cell.metadata.get("tags", []):
            continue
        used |= {n.id for n in ast.walk(_parse(cell.source)) if isinstance(n, ast.Name)}
    unused = sorted(set(declared) - used)
    assert not unused, f"{nb_path.name} declares parameters it never uses: {unused}"


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_show_tables_and_sentences_not_program_output(nb_path):
    """A page shows a table through the book's renderer, headed by a sentence, never pandas' printed text (a Series'
    ``to_string``, a printed DataFrame) nor a bare printed label whose table follows elsewhere ("raw", "terms per
    accuracy (n)")."""
    for cell in _code_cells(nb_path):
        for node in ast.walk(_parse(cell.source)):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print" and node.args):
                continue
            arg = node.args[0]
            printed = ast.unparse(arg)
            assert "to_string" not in printed and "value_counts" not in printed, (nb_path.name, printed)
            # a printed label: a constant or a bare name (a loop variable), not a sentence built from the results
            assert not (isinstance(arg, ast.Name) or isinstance(arg, ast.Constant) and len(str(arg.value)) < 40), \
                (nb_path.name, printed)


def test_quick_overrides_only_name_declared_parameters():
    declared = {nb.stem: set(runs.declared_parameters(nb)) for nb in NOTEBOOKS}
    for stem in runs._QUICK_OVERRIDES:
        assert stem in declared, f"QUICK_OVERRIDES names {stem}, which is not a notebook"
        overrides = runs._quick_overrides(stem)
        assert set(overrides) <= declared[stem], (stem, set(overrides) - declared[stem])
    for name in runs.QUICK_PARAMETERS:
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
        "import bias_utils, pathlib",
        "root = pathlib.Path(bias_utils.__file__).parent",
        "files = [pathlib.Path(m.__file__) for n, m in sys.modules.items() if n.startswith('bias_utils.')]",
        "print(json.dumps(sorted('.'.join(f.relative_to(root).with_suffix('').parts) for f in files)))"])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=paths.ROOT)
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    keyed = set(runs._code_modules(nb_path))
    unkeyed = loaded - set(runs._BUILDER_MODULES) - keyed
    assert not unkeyed, f"{nb_path.name}: modules loaded but not in the run key: {unkeyed}"


def test_run_keys_follow_the_moved_modules():
    nb = {p.stem: set(runs._code_modules(p)) for p in NOTEBOOKS}
    assert {"profiles.dictionaries", "models.loading"} <= nb["01_dictionaries"]
    assert {"profiles.layers", "profiles.space", "profiles.population_profiles", "profiles.dictionaries"} <= nb[
        "05_layers"]
    assert {"audit.replication", "audit.bold"} <= nb["07_bold_replication"]
    assert {"intrinsic_extrinsic.completions", "audit.bold", "profiles.space", "models.embeddings"} <= nb[
        "08_completion_profiles"]
    assert {"book.crossmodel", "intrinsic_extrinsic.completions", "audit.bold", "report.plots"} <= nb["09_cross_model"]


# --------------------------------------------------------------------------- docs


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
        code += "\n".join(ALL_MODULES[m].read_text() for m in runs._code_modules(nb_path))
        for table in rows[nb_path.stem]:
            pattern = re.escape(table).replace(re.escape("<source>"), r"\{?\w+\}?") if "<" in table else table
            written = re.search(rf"""['"/]{pattern}['"]""", code) or (
                "<" in table and re.search(r"""f['"]""" + re.escape(table.split("<")[0]), code))
            assert written, f"README says {nb_path.stem} writes {table!r}; no such table name in its code"


def test_bold_notebooks_are_what_their_script_writes():
    """06 and 07 are generated: an edit made only in the notebook (its text or a cell's tags, which place its key
    findings) would be lost on the next regeneration."""
    import runpy

    script = runpy.run_path(str(paths.ROOT / "scripts" / "make_bold_notebooks.py"))
    makers = {"06_bold_audit": script["audit_notebook"], "07_bold_replication": script["replication_notebook"]}
    for name, make in makers.items():
        written = [(c.cell_type, c.source, c.metadata.get("tags", [])) for c in make().cells]
        committed = [(c.cell_type, c.source, c.metadata.get("tags", []))
                     for c in nbformat.read(paths.ROOT / "notebooks" / f"{name}.ipynb", as_version=4).cells]
        assert written == committed, name


def test_both_make_targets_install_the_default_context_generator():
    """A user dictionary with the default context_source="generated" needs contexts.DEFAULT_GENERATOR: `make book`
    and `make test` install the model the package names (CI once failed where only the package named it)."""
    from bias_utils.profiles import contexts

    makefile = (paths.ROOT / "Makefile").read_text()
    assert re.search(r"^CONTEXT_GENERATOR := (\S+)$", makefile, re.M).group(1) == contexts.DEFAULT_GENERATOR
    assert re.search(r"^TEST_MODELS := .*\$\(CONTEXT_GENERATOR\)", makefile, re.M)
    assert re.search(r"^book:.*\n\t@\$\(MAKE\) .*models MODEL_SET=\"[^\"]*\$\(CONTEXT_GENERATOR\)", makefile, re.M)


_ROLE = re.compile(r":(?:func|data|class|mod|meth|attr|obj):`~?([\w.]+?)(?:\(\))?`")


def _resolves(ref: str, module: str, tree: ast.Module) -> bool:
    """Whether a docstring's reference names something that exists: a dotted path from ``bias_utils``, a module's
    name (its last part) with an attribute, or a name of ``module`` itself; a private name may be cited without its
    underscore (``PROFILE_LIMIT`` for ``_PROFILE_LIMIT``); a dataclass field or an attribute its class sets counts."""
    parts = ref.split(".")
    if importlib.util.find_spec(parts[0]) is not None and parts[0] != "bias_utils":
        return True  # the standard library or a dependency (``ast``, ``numpy.linalg``)
    starts = [parts] if parts[0] == "bias_utils" else [
        ["bias_utils", *module.split("."), *parts], *(["bias_utils", *m.split("."), *parts[1:]]
                                                     for m in ALL_MODULES if m.rsplit(".", 1)[-1] == parts[0]),
        ["bias_utils", *parts]]
    for path in starts:
        for k in range(len(path), 1, -1):
            name = ".".join(path[:k])
            if name.removeprefix("bias_utils.") not in ALL_MODULES and \
                    f"{name}.__init__".removeprefix("bias_utils.") not in ALL_MODULES:
                continue
            obj = importlib.import_module(name)
            for attr in path[k:]:
                fields = getattr(obj, "__dataclass_fields__", {})
                obj = next((getattr(obj, a) for a in (attr, f"_{attr}") if hasattr(obj, a)),
                           fields.get(attr) or fields.get(f"_{attr}"))
                if obj is None:
                    break
            else:
                return True
            break
    last = parts[-1]  # an attribute a class of this module sets on itself, or a method
    return any(isinstance(n, ast.Attribute) and n.attr in (last, f"_{last}") and isinstance(n.value, ast.Name)
               and n.value.id == "self" for n in ast.walk(tree)) or any(
        isinstance(n, ast.FunctionDef) and n.name in (last, f"_{last}") for n in ast.walk(tree))


def test_docstrings_cite_names_that_exist():
    """A ``:func:``/``:data:``/``:class:``/``:mod:`` reference in a docstring names a function, constant, class or
    module that exists (a renamed or removed name leaves a reader searching for what is not there)."""
    stale = []
    for module in MODULES:
        tree = _tree(module)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stale += [f"{module}: {ref}" for ref in _ROLE.findall(ast.get_docstring(node) or "")
                          if not _resolves(ref, module, tree)]
    assert not stale, "\n".join(stale)
    assert not _resolves("gone_function", "core.stats", _tree("core.stats"))
    assert _resolves("mixed.PROFILE_LIMIT", "core.nested", _tree("core.nested"))
