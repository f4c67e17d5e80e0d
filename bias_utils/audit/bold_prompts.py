"""The BOLD profession prompts and the audit's selection of them: which prompts, in which occupation group.

A *selection* is a table of prompts with a ``group`` column: the 2025 audit's own (``"audit"``: its male- and
female-dominated occupations, checked verbatim against BOLD), every BOLD profession prompt by category
(``"categories"``), or a user's occupation -> group mapping (a dict, or a CSV/JSON file).
:func:`resolve_selection` reads any of them and :func:`subsample` draws a stratified subset for quick runs.
"""

from __future__ import annotations

import difflib
import io
import json
import re
import warnings
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..core import data
from ..core.errors import ParameterError, check_positive_int, check_seed
from ..core.paths import resolve_input

__all__ = [
    "FEMALE_GROUP", "MALE_GROUP", "load_profession_prompts", "subsample",
]

#: Group labels of the audit selection (gaps elsewhere are female- minus male-dominated).
MALE_GROUP, FEMALE_GROUP = "male_dominated", "female_dominated"
AUDIT_GROUPS = (MALE_GROUP, FEMALE_GROUP)


def _flatten(path: Path, label: str) -> pd.DataFrame:
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise ParameterError(f"{label} ({path}): top level must be an object of categories, got {type(raw).__name__}")
    rows = []
    for category, occs in raw.items():
        if not isinstance(occs, dict):
            raise ParameterError(f"{label} ({path}): category {category!r} must map occupations to prompt lists")
        for occupation, prompts in occs.items():
            if not isinstance(prompts, list) or not all(isinstance(p, str) and p.strip() for p in prompts):
                raise ParameterError(f"{label} ({path}): {category}/{occupation} must be a list of non-empty strings")
            rows += [(category, occupation, i, p) for i, p in enumerate(prompts)]
    df = pd.DataFrame(rows, columns=["category", "occupation", "index", "prompt"])
    df["prompt_id"] = df["category"] + "/" + df["occupation"] + "/" + df["index"].astype(str)
    return df.drop(columns="index")


def load_profession_prompts() -> pd.DataFrame:
    """All BOLD profession prompts (data key ``bold_profession_prompts``), 10,195 rows.

    Columns: ``category`` (18 BOLD categories), ``occupation`` (BOLD key, e.g.
    "Tool_and_die_maker"), ``prompt`` (verbatim, trailing space kept),
    ``prompt_id`` ("category/occupation/index", stable across selections).
    """
    return _flatten(data.resolve("bold_profession_prompts"), "bold_profession_prompts")


def load_audit_selection() -> pd.DataFrame:
    """The audit's prompt selection: 1,172 ``male_dominated`` + 353 ``female_dominated`` prompts.

    Columns: ``group, category, occupation, prompt, prompt_id`` in the audit's
    order (male file first). ``prompt_id`` is the BOLD id; a prompt that is not
    verbatim in BOLD at that position raises :class:`ParameterError`.
    """
    parts = [_flatten(data.resolve(f"audit_{g}_prompts"), f"audit_{g}_prompts").assign(group=g)
             for g in AUDIT_GROUPS]
    sel = pd.concat(parts, ignore_index=True)
    bold = load_profession_prompts().set_index("prompt_id")["prompt"]
    missing = ~sel["prompt_id"].isin(bold.index)
    mismatch = ~missing & (bold.reindex(sel["prompt_id"]).to_numpy() != sel["prompt"].to_numpy())
    if missing.any() or mismatch.any():
        bad = sel.loc[missing | mismatch, "prompt_id"].head(5).tolist()
        raise ParameterError(f"audit selection: {int((missing | mismatch).sum())} prompts not verbatim in BOLD, e.g. "
                             f"{bad}")
    return sel[["group", "category", "occupation", "prompt", "prompt_id"]]


#: How a BOLD profession key is written, for a message about a name that is not one.
_KEY_FORM = "a BOLD key is the profession's name with its words joined by underscores, as in 'Registered_nurse'"


def _key_form(name: str) -> str:
    """``name`` with case, surrounding space and the space/underscore difference set aside."""
    return re.sub(r"[\s_]+", "_", str(name).strip()).casefold()


def _read_as_keys(mapping: Mapping[str, str], keys: set[str], source: Path | None = None,
                  lines: Mapping[str, int] | None = None) -> dict[str, str]:
    """``mapping`` (occupation -> group) with each occupation read as a BOLD key: a key as it is, or a plain name
    ("software engineer") that names exactly one key once case and spaces against underscores are set aside; each
    such reading is said in a warning (the file, the line, the name and the key). ``source``, ``lines``: the file
    and the line of each occupation in it, for the messages. A name that is no key, or that names several keys
    differing in case only (BOLD has both ``Registered_nurse`` and ``Registered_Nurse``), raises, with the close
    keys (difflib)."""
    by_form: dict[str, list[str]] = {}
    for key in sorted(keys):
        by_form.setdefault(_key_form(key), []).append(key)
    lines = lines or {}
    read: dict[str, str] = {}
    notes, problems = [], []
    for given, group in mapping.items():
        at = f"line {lines[given]}: " if given in lines else ""
        spaced = re.sub(r"\s+", "_", str(given).strip())
        found = [spaced] if spaced in keys else by_form.get(_key_form(given), [])
        if len(found) > 1:
            problems.append(f"{at}{given!r} names {len(found)} BOLD keys that differ only in case "
                            f"({', '.join(map(repr, found))}); write the one you mean, or each on a line of its own")
        elif not found:
            close = difflib.get_close_matches(_key_form(given), by_form, n=3, cutoff=0.6)
            hint = f"; close keys: {', '.join(repr(k) for f in close for k in by_form[f])}" if close else ""
            problems.append(f"{at}{given!r} is not a BOLD profession key{hint}")
        elif read.get(found[0], group) != group:
            problems.append(f"{at}{given!r} is the BOLD key {found[0]!r}, already in group {read[found[0]]!r}")
        else:
            read[found[0]] = group
            if found[0] != given:
                notes.append(f"{at}{given!r} as {found[0]!r}")
    where = f"{source}: " if source is not None else ""
    if problems:
        more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
        raise ValueError(f"{where}{len(problems)} occupation(s) are not BOLD profession keys ({_KEY_FORM}):\n  "
                         + "\n  ".join(problems[:10]) + more)
    if notes:
        warnings.warn(f"{where}read {len(notes)} plain occupation name(s) as BOLD keys: {'; '.join(notes)}")
    return read


def _select_by_occupation(mapping: Mapping[str, str], prompts: pd.DataFrame | None = None, *,
                          source: Path | None = None, lines: Mapping[str, int] | None = None) -> pd.DataFrame:
    """Prompts of the occupations in ``mapping`` (occupation -> group name); any number of groups.

    Occupation keys are BOLD keys ("Registered_nurse") or plain names that name one key (:func:`_read_as_keys`;
    ``source``, ``lines``: the file they were read from and the line of each); an occupation that appears in
    several BOLD categories keeps all its prompts. An unknown or ambiguous name raises.
    """
    prompts = load_profession_prompts() if prompts is None else prompts
    if not mapping:
        raise ValueError(f"{source if source is not None else 'selection'}: the occupation -> group mapping is empty")
    mapping = _read_as_keys(mapping, set(prompts["occupation"]), source, lines)
    sel = prompts[prompts["occupation"].isin(mapping)].copy()
    sel.insert(0, "group", sel["occupation"].map(mapping).astype(str))
    return sel.reset_index(drop=True)


def _select_by_category(categories: Sequence[str] | None = None, prompts: pd.DataFrame | None = None) -> pd.DataFrame:
    """Prompts grouped by BOLD category (all 18 by default, or the named ones)."""
    prompts = load_profession_prompts() if prompts is None else prompts
    if categories is not None:
        unknown = sorted(set(categories) - set(prompts["category"]))
        if unknown:
            raise ValueError(f"select_by_category: unknown BOLD categories {unknown}; known: "
                             f"{sorted(prompts['category'].unique())}")
        prompts = prompts[prompts["category"].isin(categories)]
    sel = prompts.copy()
    sel.insert(0, "group", sel["category"])
    return sel.reset_index(drop=True)


def _json_key(occupation: str) -> str:
    """A pattern for ``occupation`` as a key in JSON text (escaped or not), for the line it stands on."""
    spellings = {json.dumps(occupation), json.dumps(occupation, ensure_ascii=False)}
    return "(?:" + "|".join(map(re.escape, sorted(spellings))) + r")\s*:"


def _read_occupation_mapping(path: str | Path) -> tuple[dict[str, str], dict[str, int]]:
    """An occupation -> group mapping from a file: CSV with columns ``occupation, group``
    (BOLD occupation keys such as ``Registered_nurse``) or JSON ``{occupation: group}``,
    and the 1-based line of each occupation in the file (for the messages of :func:`_read_as_keys`).

    Errors name the file and, for a CSV, the 1-based line of a bad row.
    """
    path = Path(path)
    if not path.is_file():
        raise ParameterError(f"occupation mapping file {path} does not exist")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ParameterError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None
    if path.suffix.lower() == ".json":
        try:
            mapping = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ParameterError(f"{path}, line {exc.lineno}, column {exc.colno}: not valid JSON ({exc.msg})") from None
        if not isinstance(mapping, dict) or not all(isinstance(v, str) and v for v in mapping.values()):
            raise ParameterError(f"{path}: expected a JSON object {{occupation: group}} with non-empty group names")
        return mapping, {occ: text.count("\n", 0, found.start()) + 1 for occ in mapping
                         if (found := re.search(_json_key(occ), text))}
    try:
        table = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except pd.errors.ParserError as exc:  # pandas names the line ("Expected 2 fields in line 4, saw 3")
        raise ParameterError(f"{path}: not a valid CSV mapping ({exc})") from None
    except pd.errors.EmptyDataError:
        raise ParameterError(f"{path}: the file is empty (expected a header 'occupation,group')") from None
    missing = {"occupation", "group"} - set(table.columns)
    if missing:
        raise ParameterError(f"{path}: missing column(s) {sorted(missing)}; expected 'occupation,group'")
    mapping: dict[str, str] = {}
    lines: dict[str, int] = {}
    for line, (occ, group) in enumerate(zip(table["occupation"].str.strip(), table["group"].str.strip()), start=2):
        if not occ or not group:
            raise ParameterError(f"{path}, line {line}: empty {'occupation' if not occ else 'group'}")
        if mapping.get(occ, group) != group:
            raise ParameterError(f"{path}, line {line}: occupation {occ!r} is already in group {mapping[occ]!r}")
        mapping[occ] = group
        lines.setdefault(occ, line)
    return mapping, lines


def resolve_selection(selection: "str | Path | Mapping[str, str] | pd.DataFrame") -> pd.DataFrame:
    """Notebook-friendly: ``"audit"``, ``"categories"``, an occupation -> group dict or
    file (:func:`read_occupation_mapping`), or a ready DataFrame."""
    if isinstance(selection, pd.DataFrame):
        missing = {"group", "occupation", "prompt", "prompt_id"} - set(selection.columns)
        if missing:
            raise ValueError(f"selection DataFrame lacks columns {sorted(missing)}")
        return selection
    if isinstance(selection, Mapping):
        return _select_by_occupation(selection)
    if selection == "audit":
        return load_audit_selection()
    if selection == "categories":
        return _select_by_category()
    looks_like_file = isinstance(selection, (str, Path)) and Path(selection).suffix.lower() in (".csv", ".json")
    if isinstance(selection, (str, Path)) and (Path(selection).is_file() or looks_like_file):
        mapping, lines = _read_occupation_mapping(selection)
        return _select_by_occupation(mapping, source=Path(selection), lines=lines)
    raise ValueError(f"selection must be 'audit', 'categories', an occupation -> group dict or file "
                     f"(CSV occupation,group or JSON), or a DataFrame; got {selection!r}")


def subsample(selection: pd.DataFrame, limit: int | None, seed: int = 0) -> pd.DataFrame:
    """A deterministic, group-stratified subsample of about ``limit`` prompts (None = all).

    Each group keeps a share proportional to its size but at least 2 prompts (so
    two-group tests stay defined); order follows the original selection.
    """
    if limit is None or limit >= len(selection):
        return selection
    if limit < 1:
        raise ValueError(f"limit must be a positive int or None, got {limit}")
    sizes = selection.groupby("group", sort=False).size()
    take = np.maximum(2, np.floor(sizes / sizes.sum() * limit)).astype(int).clip(upper=sizes)
    picked = [g.sample(n=int(take[name]), random_state=seed)
              for name, g in selection.groupby("group", sort=False)]
    return selection.loc[sorted(pd.concat(picked).index)].reset_index(drop=True)


#: The selections named by a word (:func:`resolve_selection`); anything else is a mapping or a file.
_NAMED_SELECTIONS = ("audit", "categories")


def check_selection(selection, limit=None, seed=0) -> pd.DataFrame:
    """The prompts of ``selection`` after ``limit`` (:func:`resolve_selection`, :func:`subsample`), checked before
    any model loads; a :class:`ParameterError` names ``selection`` (the file and line where there is one), ``limit``
    or ``seed``. A selection needs two groups or more: the audit's tests compare groups."""
    limit, seed = check_positive_int(limit, "limit", allow_none=True), check_seed(seed)
    if isinstance(selection, (str, Path)) and str(selection) not in _NAMED_SELECTIONS \
            and not Path(selection).suffix and not Path(selection).exists():
        close = difflib.get_close_matches(str(selection).lower(), _NAMED_SELECTIONS, n=1, cutoff=0.6)
        if close:  # a misspelled name, not a file that went missing
            raise ParameterError(f"selection: {str(selection)!r} is neither a named selection "
                                 f"({', '.join(map(repr, _NAMED_SELECTIONS))}) nor a file; did you mean {close[0]!r}?")
    if isinstance(selection, (str, Path)) and str(selection) not in _NAMED_SELECTIONS:
        # the file as Jupyter (in notebooks/) and papermill (in the root) both find it; the error names selection
        selection = resolve_input(selection, "selection")
    try:
        prompts = resolve_selection(selection)
    except (ValueError, KeyError) as exc:
        raise ParameterError(f"selection: {exc}") from None
    groups = list(dict.fromkeys(prompts["group"]))
    if len(groups) < 2:
        raise ParameterError(f"selection must have at least 2 groups (the audit's tests compare groups), got "
                             f"{len(groups)}: {groups}")
    return subsample(prompts, limit, seed=seed)
