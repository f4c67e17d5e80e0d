"""The table registry against the notebooks, README and the producing functions, both ways."""

from __future__ import annotations

import ast
import importlib
import re

import nbformat
import pytest

from bias_utils.book import runs
from bias_utils.core import paths, tables
from bias_utils.profiles import dictionaries

NOTEBOOKS = sorted(runs._NOTEBOOKS_DIR.glob("*.ipynb"))
#: Notebooks whose owners have not yet replaced typed table names by ``tables`` constants.
LITERAL_NAMES_LEFT: set[str] = set()
CONSTANT = {getattr(tables.NAMES, const): const for const in vars(tables.NAMES) if const.isupper()}


#: module file stem -> its dotted name below bias_utils (a notebook names a module by its stem)
_BY_STEM = {name.rsplit(".", 1)[-1]: name for name in runs._package_modules()}


def _code(nb_path) -> str:
    cells = nbformat.read(nb_path, as_version=4).cells
    return "\n".join(ln for c in cells if c.cell_type == "code" for ln in c.source.splitlines()
                     if not ln.lstrip().startswith(("%", "!")))


def _written(nb_path) -> list[ast.expr]:
    """The path expressions of every ``write_table(frame, out / <expr>)`` call of a notebook."""
    found = []
    for node in ast.walk(ast.parse(_code(nb_path))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "write_table":
            path = node.args[1]
            found.append(path.right if isinstance(path, ast.BinOp) else path)
    return found


def _table_name(expr: ast.expr) -> str | None:
    """The table name an expression writes, where it can be read without running the notebook."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "format":
        expr = expr.func.value  # tables.NAMES.CONTEXTS_OF_SOURCE.format(source=...): the family
    if isinstance(expr, ast.Constant):
        return expr.value
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        return getattr(importlib.import_module(f"bias_utils.{_BY_STEM[expr.value.id]}"), expr.attr)
    return None  # a loop variable: the names come from module constants (checked below through the code)


def _readme_rows() -> dict[str, str]:
    rows = {}
    for line in (paths.ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| `(\d\d_\w+)` \|.*\| (`.*`) \|\s*$", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def test_every_producing_function_resolves():
    for t in tables._TABLES.values():
        module, name = t.producer.rsplit(".", 1)
        assert callable(getattr(importlib.import_module(module), name, None)), f"{t.name}: {t.producer}"


def test_every_declared_table_names_notebooks_that_exist_and_documents_columns():
    stems = {p.stem for p in NOTEBOOKS}
    for t in tables._TABLES.values():
        assert t.notebooks and set(t.notebooks) <= stems, t
        assert t.columns and len(set(t.columns)) == len(t.columns), t.name


@pytest.mark.parametrize("nb_path", [
    pytest.param(p, marks=pytest.mark.xfail(strict=True, reason="its owner still types table names"))
    if p.stem in LITERAL_NAMES_LEFT else p for p in NOTEBOOKS], ids=lambda p: p.stem)
def test_a_notebook_writes_only_declared_tables_by_their_constant(nb_path):
    for expr in _written(nb_path):
        assert not isinstance(expr, (ast.Constant, ast.JoinedStr)), (
            f"{nb_path.stem} types a table name: {ast.unparse(expr)}; use a bias_utils.core.tables constant")
        name = _table_name(expr)
        assert name is None or nb_path.stem in tables.table(name).notebooks, (nb_path.stem, name)


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_written_tables_are_declared_and_declared_tables_are_written(nb_path):
    """Both ways: a table the notebook writes is declared for it; a table declared for it is written by its
    code or by a module it imports (by the table's constant or its name)."""
    for expr in _written(nb_path):
        name = _table_name(expr)
        if name is not None:
            assert nb_path.stem in tables.table(name).notebooks, f"{nb_path.stem} writes {name!r}, not declared for it"
    modules = runs._package_modules()
    code = _code(nb_path) + "\n".join(modules[m].read_text(encoding="utf-8")
                                      for m in runs._code_modules(nb_path) if m != "core.tables")
    for name in tables._notebook_tables(nb_path.stem):
        by_constant = re.search(rf"\btables\.NAMES\.{CONSTANT[name]}\b", code)
        by_name = re.search(rf"""['"]{re.escape(name)}['"]""", code)
        assert by_constant or by_name, f"{name!r} is declared for {nb_path.stem}, which does not write it"


def test_readme_lists_exactly_the_declared_tables_of_each_notebook():
    rows = _readme_rows()
    assert set(rows) == {p.stem for p in NOTEBOOKS}
    for stem, cell in rows.items():
        assert cell == tables._readme_cell(stem), f"README row of {stem}: {cell} != {tables._readme_cell(stem)}"


def test_declared_columns_match_the_modules_column_lists():
    from bias_utils.audit import next_word, next_word_prompts, occupation_headline, occupations
    from bias_utils.core import stats
    from bias_utils.intrinsic_extrinsic import erasure_long_form, link
    from bias_utils.profiles import axis_validity, contexts, robustness, space
    from bias_utils.profiles import population_profiles as profiles

    expected = {
        tables.NAMES.AXIS_VALIDITY: axis_validity._COLUMNS,
        tables.NAMES.ROBUSTNESS_AXIS_VALIDITY: axis_validity._COLUMNS,
        tables.NAMES.PROFILE_STATS: profiles._PROFILE_STATS_COLUMNS + [
            c for c in stats.STAT_COLUMNS if c not in ("group_a", "group_b", "df", "p")],
        tables.NAMES.ROBUSTNESS_SPECS: robustness._SPEC_COLUMNS,
        tables.NAMES.ROBUSTNESS_SKIPPED: robustness._SKIPPED_COLUMNS,
        tables.NAMES.BOLD_INFLUENCE: occupations.INFLUENCE_COLUMNS,
        tables.NAMES.BOLD_HEADLINE: occupation_headline.HEADLINE_COLUMNS,
        tables.NAMES.DROPPED_SENSES: space.DROPPED_COLUMNS, tables.NAMES.CONTEXTS_OF_SOURCE: contexts._TABLE_COLUMNS,
        tables.NAMES.CONTEXTS_SKIPPED: contexts.SKIP_COLUMNS, tables.NAMES.CONTEXTS_DROPPED: contexts._DROP_COLUMNS,
        tables.NAMES.NEXT_WORD_PROMPTS: next_word._PROMPT_COLUMNS,
        tables.NAMES.NEXT_WORD_OCCUPATIONS: next_word._OCCUPATION_COLUMNS,
        tables.NAMES.NEXT_WORD_TOKENS: next_word_prompts._WORD_COLUMNS,
        tables.NAMES.LINK_NEXT_WORD: stats.STAT_COLUMNS + link._NEXT_WORD_LINK_COLUMNS,
        tables.NAMES.LINK_NEXT_WORD_OCCUPATIONS: link._NEXT_WORD_OCCUPATION_COLUMNS,
        tables.NAMES.ERASURE_LONG_FORM: erasure_long_form._COLUMNS,
        tables.NAMES.ERASURE_LONG_FORM_TEXTS: erasure_long_form._TEXT_COLUMNS,
    }
    for name, columns in expected.items():
        assert tables._TABLES[name].columns == tuple(columns), name


def test_a_real_table_has_its_declared_columns():
    counts = dictionaries.pole_counts(dictionaries.load_seed_dictionary(), dictionaries.PUBLISHED_SEED_COUNTS)
    assert tuple(counts.columns) == tables._TABLES[tables.NAMES.DICTIONARY_COUNTS].columns


def test_a_family_name_finds_its_declaration_and_unknown_names_fail():
    assert tables.table("contexts_generated").name == tables.NAMES.CONTEXTS_OF_SOURCE
    assert tables.table("poles").producer == "bias_utils.profiles.space.pole_table"
    with pytest.raises(KeyError, match="no results table"):
        tables.table("contexts")
    assert "`contexts_<source>`" in tables._readme_cell("02_contexts")
