"""How the book shows a results table: a notebook's DataFrame as HTML that fits the page.

Why a module of its own: a table's page rules (rounding by quantity, which columns carry its estimate, what a phone
shows) are one concept beside the charts' (:mod:`bias_utils.report.rendering`, whose labels both use).

**The columns that carry the estimate** (:func:`_main_columns`), chosen before any is hidden: what the row is (the
text columns that tell the rows apart, a column with one value for every row left to the wider screen), the estimate
(the one the first interval bounds), its interval, the verdict, then p (adjusted first). A bound pair prints as one
column, "0.57 to 1.14", as a sentence prints it. A phone, or a table too wide for the article (``book/_static/
book.js``), shows these first :data:`_PHONE_COLUMNS` and offers the whole table as CSV a click away; each carries
``data-role`` (label, estimate, interval, verdict), and the browser tests fail where one is hidden.
"""

from __future__ import annotations

import html
import numbers
import re
import urllib.parse

import altair as alt
import numpy as np
import pandas as pd

from ..core import precision
from ..core.results import display_name
from .rendering import P_VALUE, RENDERER, column_label, value_label

__all__: list[str] = []

#: Above this many columns a table is shown a row per column (when it has few rows) or scrolls in its own box.
_MAX_COLUMNS = 12
#: On a phone a table shows this many of its columns (the others on a wider screen, and all in the CSV a click away):
#: about 70 px each in the 358 px a phone leaves the article; :func:`_main_columns` says which.
_PHONE_COLUMNS = 5
#: Columns a phone's reader can do without while the estimate, its interval and its p are shown: the test's
#: statistic and bookkeeping (a table's CSV keeps them).
_DETAIL = re.compile(r"^(statistic|df|df_.*|se|.*_se|adj_method|n_boot|n_permutations|p_floor|raw_p|sd|sd_.*|"
                     r"mean_.*|t_student|df_student|p_student.*|effect|note|notes|unit|role|"
                     r".*_mc_se)$")
_COUNT = re.compile(r"^(n|df|count|n_.*|df_.*|.*_count|.*_n)$")
_MISSING = "–"



def _missing(value) -> bool:
    try:
        return value is None or bool(pd.isna(value))
    except (TypeError, ValueError):
        return False  # an array or list in a cell


def cell_text(value, column="", whole: bool = False) -> str:
    """One cell as the book shows it, rounded by the quantity its column holds, with the functions sentences use
    (:mod:`bias_utils.core.precision`): p values by :func:`~bias_utils.core.precision.p_text`, counts by
    :func:`~bias_utils.core.precision.count_text`, other numbers by :func:`~bias_utils.core.precision.number_text`,
    a missing value as ``–``. ``whole``: the column holds whole numbers only (a count or df stored as float because of a
    gap)."""
    if _missing(value):
        return _MISSING
    column = str(column[-1] if isinstance(column, tuple) else column)
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple, np.ndarray)):
        return "; ".join(cell_text(v, column) for v in value)  # a list of examples reads as a list, not a repr
    if not isinstance(value, numbers.Real):
        return value_label(display_name(value))  # a model id reads as the model's name
    if P_VALUE.search(column):
        return precision.p_text(value)
    if isinstance(value, numbers.Integral) or ((whole or _COUNT.match(column)) and float(value).is_integer()):
        return precision.count_text(value)
    return precision.number_text(value)


def _flat(frame: pd.DataFrame) -> pd.DataFrame:
    """Index levels a reader needs become columns; a default row number is dropped."""
    index = frame.index
    named = any(name is not None for name in index.names)
    if named or not (pd.api.types.is_integer_dtype(index.dtype) or isinstance(index, pd.RangeIndex)):
        frame = frame.reset_index(names=[name if name is not None else "" for name in index.names])
    return frame.reset_index(drop=True)


#: An interval's bound column (``ci_low``, ``g_ci_high``, ``marginal_ci_low``) and, by its prefix, its estimate's.
_BOUND = re.compile(r"^(?P<prefix>.*?)_?ci_(?:low|high)$")
#: The estimate beside unprefixed ``ci_low, ci_high`` (a statistics row's effect size, an odds ratio table's ratio).
_ESTIMATES = ("effect_size", "odds_ratio", "estimate")


def _estimate_column(frame: pd.DataFrame, column) -> int | None:
    """The position of the estimate whose interval ``column`` bounds, or None: ``g`` for ``g_ci_low``,
    ``marginal_odds_ratio`` for ``marginal_ci_low``, ``effect_size`` (or ``odds_ratio``, ``estimate``) for
    ``ci_low``."""
    match = _BOUND.match(str(column[-1] if isinstance(column, tuple) else column))
    if match is None:
        return None
    prefix = match["prefix"]
    names = [prefix, f"{prefix}_odds_ratio", f"{prefix}_estimate"] if prefix else list(_ESTIMATES)
    columns = [str(c[-1] if isinstance(c, tuple) else c) for c in frame.columns]
    return next((columns.index(n) for n in names if n in columns), None)


def _monte_carlo(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """``frame`` without its bounds' Monte Carlo SE columns (``ci_low_mc_se`` beside ``ci_low``), and those SEs by
    bound column: they decide a bound's digits, as in a sentence, and are not a column a reader needs (the CSV keeps
    them)."""
    columns = {str(c): c for c in frame.columns}
    errors = {columns[name[:-len("_mc_se")]]: frame[c] for name, c in columns.items()
              if name.endswith("_mc_se") and _BOUND.match(name[:-len("_mc_se")]) and name[:-len("_mc_se")] in columns}
    shown = frame.drop(columns=[columns[f"{str(b)}_mc_se"] for b in errors]) if errors else frame
    return shown, errors


def _interval_pairs(frame: pd.DataFrame, errors: dict) -> list[tuple[int, int]]:
    """Positions of each ``*ci_low`` column and its ``*ci_high`` partner where both carry Monte Carlo errors."""
    with_error = {j for j, c in enumerate(frame.columns) if c in errors}
    return [(low, high) for low, high in _interval_spans(frame) if {low, high} <= with_error]


def _number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)) and not _missing(value)


def _cells(frame: pd.DataFrame, errors: dict | None = None) -> tuple[list[str], list[list[tuple[str, bool]]]]:
    """Headers and cells; an interval's bound is printed as sentences print it: a pair of bounds with Monte Carlo
    errors by :func:`bias_utils.core.precision.mc_interval_bounds` (one place for both), a lone bound by
    :func:`bias_utils.core.precision.bound_text` (to its Monte Carlo error where ``errors`` gives one, else at its
    estimate's decimals), so one interval reads alike on every page."""
    errors = errors or {}
    headers = [column_label(c) for c in frame.columns]
    whole = [pd.api.types.is_float_dtype(frame[c]) and bool((frame[c].dropna() % 1 == 0).all())
             for c in frame.columns]
    estimates = [_estimate_column(frame, c) for c in frame.columns]
    se = [errors[c].to_numpy() if c in errors else None for c in frame.columns]
    pairs = _interval_pairs(frame, errors)
    rows = []
    for i, values in enumerate(frame.itertuples(index=False, name=None)):
        row, paired = [], {}
        for lo, hi in pairs:  # both bounds of one interval at one place, as a sentence prints them
            if all(_number(v) for v in (values[lo], values[hi], se[lo][i], se[hi][i])):
                paired[lo], paired[hi] = precision.mc_interval_bounds(values[lo], values[hi], se[lo][i], se[hi][i])
        for j, (column, value, integral, at, mc) in enumerate(zip(frame.columns, values, whole, estimates, se)):
            numeric = isinstance(value, numbers.Number) and not isinstance(value, (bool, np.bool_))
            estimate = values[at] if at is not None else None
            error = mc[i] if mc is not None and _number(mc[i]) else None
            if j in paired:
                text = paired[j]
            elif _number(value) and (error is not None or _number(estimate)):
                text = precision.bound_text(value, estimate if _number(estimate) else None, error)
            else:
                text = cell_text(value, column, integral)
            row.append((text, numeric or _missing(value) or bool(_NUMBER_TEXT.match(text))))
        rows.append(row)
    return headers, rows


def _row_key(frame: pd.DataFrame) -> int | None:
    """The first text column whose values tell the rows apart (the headers of a transposed table), or None."""
    return next((i for i, c in enumerate(frame.columns) if not pd.api.types.is_numeric_dtype(frame[c])
                 and frame[c].astype(str).is_unique), None)


def _transposed(key: int, headers: list[str], rows: list[list]) -> tuple[list[str], list[list]]:
    """A row per column, headed by the values of the ``key`` column."""
    return [""] + [row[key][0] for row in rows], [[(h, False)] + [row[j] for row in rows]
                                                 for j, h in enumerate(headers) if j != key]


#: A cell's text that reads as one number (a formatted p, a count, a power of ten): it never wraps, whatever its
#: column's type.
_NUMBER_TEXT = re.compile(r"^[-−+<≤>≥‹]?\s*[0-9][0-9.,]*[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]*(\s*[×x]\s*10[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)?%?$")


#: A verdict column: it says what the row's test decided, and a phone shows it beside the estimate.
_VERDICT = re.compile(r"(^|_)(verdict|significant|supported|best|holds)$")
#: An adjusted p (Holm or another correction): shown before the unadjusted one, as verdicts read it.
_ADJUSTED = re.compile(r"(^|_)(adj|holm)($|_)")
#: At most this many text columns name a row.
_MAX_LABELS = 3


def _name(column) -> str:
    return str(column[-1] if isinstance(column, tuple) else column)


def _interval_spans(frame: pd.DataFrame) -> list[tuple[int, int]]:
    """Positions ``(low, high)`` of each interval whose two bounds are both columns (``ci_low`` and ``ci_high``,
    ``g_ci_low`` and ``g_ci_high``), in the order of the low bounds."""
    names = [_name(c) for c in frame.columns]
    return [(j, names.index(n[:-3] + "high")) for j, n in enumerate(names)
            if n.endswith("ci_low") and _BOUND.match(n) and n[:-3] + "high" in names]


def _nearest_estimate(frame: pd.DataFrame, low: int, skip: set[int]) -> int | None:
    """The estimate an unprefixed interval bounds where no column is named for it (``change`` before ``ci_low``):
    the nearest number column to its left that is no bound, count, p or detail."""
    for j in range(low - 1, -1, -1):
        name = _name(frame.columns[j])
        if j not in skip and pd.api.types.is_numeric_dtype(frame.iloc[:, j]) and not (
                _BOUND.match(name) or P_VALUE.search(name) or _COUNT.match(name) or _DETAIL.match(name)):
            return j
    return None


def _main_columns(frame: pd.DataFrame, spans: list[tuple[int, int]]) -> tuple[list[int], dict[int, str]]:
    """The columns in the order a phone shows them (module docstring), and the role of each that carries the
    estimate: ``label`` (what the row is), ``estimate``, ``interval`` (its low bound's position; the high bound
    prints with it), ``verdict``."""
    names = [_name(c) for c in frame.columns]
    numeric = [pd.api.types.is_numeric_dtype(frame.iloc[:, j]) for j in range(len(names))]
    detail = [bool(_DETAIL.match(n)) for n in names]
    bounds = {j for span in spans for j in span}
    verdicts = [j for j, n in enumerate(names) if _VERDICT.search(n) and not detail[j]]
    texts = [j for j in range(len(names)) if not numeric[j] and not detail[j] and j not in verdicts]
    varying = [j for j in texts if frame.iloc[:, j].astype(str).nunique() > 1] or texts[:1]
    labels: list[int] = []
    for j in varying:
        labels.append(j)
        if len(labels) == _MAX_LABELS or not frame.iloc[:, labels].astype(str).duplicated().any():
            break
    plain = [j for j in range(len(names)) if not detail[j] and j not in bounds]
    if spans:
        low = spans[0][0]
        at = _estimate_column(frame, frame.columns[low])
        at = at if at is not None else _nearest_estimate(frame, low, bounds)
        estimate, interval = ([at] if at is not None else []), [low]
    else:
        estimate = [j for j in plain if numeric[j] and j not in verdicts and not (
            P_VALUE.search(names[j]) or _COUNT.match(names[j]))][:1]
        interval = []
    ps = [j for j in plain if P_VALUE.search(names[j])]
    ps = [j for j in ps if _ADJUSTED.search(names[j])] + [j for j in ps if not _ADJUSTED.search(names[j])]
    first = list(dict.fromkeys(labels + estimate + interval + verdicts + ps))
    rest = [j for j in range(len(names)) if not detail[j] and j not in first and j not in {h for _, h in spans}]
    roles = {j: "label" for j in labels} | {j: "estimate" for j in estimate} | {j: "interval" for j in interval}
    roles |= {j: "verdict" for j in verdicts}
    return first + rest + [j for j in range(len(names)) if detail[j]], roles


def _merged_name(low: str) -> str:
    """The column an interval's two bounds print in: ``ci`` for ``ci_low``, ``g_ci`` for ``g_ci_low``
    (:func:`rendering.column_label` labels it)."""
    return low[:-len("_low")]


def table_html(frame: pd.DataFrame) -> str:
    """A DataFrame as the book shows it (the CSV on disk keeps every digit).

    No row numbers (named index levels become columns), headers from :func:`rendering.column_label`, cells from
    :func:`cell_text` in cells that never wrap inside a number, an interval's two bounds in one column, missing values
    as ``–`` with a note under the table. A table of more than :data:`_MAX_COLUMNS` columns and few rows is shown a
    row per column; a wider one scrolls inside its own box. The columns that carry the estimate come first and carry
    their role (module docstring). An empty table is a sentence (``frame.attrs["empty"]`` says why, when the caller
    knows).
    """
    frame = _flat(frame)
    if frame.empty:
        why = frame.attrs.get("empty") or (
            "nothing to list in this table" + (f" (columns: {', '.join(column_label(c) for c in frame.columns)})"
                                               if len(frame.columns) else ""))
        return f'<p class="bias-empty-table">No rows: {html.escape(str(why))}.</p>'
    note = []
    limit = pd.get_option("display.max_rows")
    if limit and len(frame) > limit:
        shown = pd.get_option("display.min_rows") or 10
        note.append(f"The first {shown:,} of {len(frame):,} rows; the CSV of this chapter has them all.")
        frame = frame.head(shown)
    frame, errors = _monte_carlo(frame)
    headers, rows = _cells(frame, errors)
    columns = [str(c[0] if isinstance(c, tuple) else c) for c in frame.columns]
    key = _row_key(frame)
    transposed = len(headers) > _MAX_COLUMNS and len(rows) <= 6 and key is not None
    order, roles = list(range(len(headers))), {}
    if transposed:
        headers, rows = _transposed(key, headers, rows)
        # each row now names a column, the header row names the rows
        columns = [""] + [c for j, c in enumerate(columns) if j != key]
        rows = [[(t, n, columns[i + 1] if k == 0 else "") for k, (t, n) in enumerate(row)]
                for i, row in enumerate(rows)]
        columns = [""] * len(headers)
    else:
        spans = _interval_spans(frame)
        order, roles = _main_columns(frame, spans)
        highs = {high: low for low, high in spans}
        for low, high in spans:  # one column for both bounds, as a sentence prints them
            headers[low] = column_label(_merged_name(columns[low]))
            columns[low] = _merged_name(columns[low])
            for row in rows:
                lo, hi = row[low][0], row[high][0]
                row[low] = (_MISSING if _MISSING in (lo, hi) else f"{lo} to {hi}", True)
        keep = [j for j in range(len(headers)) if j not in highs]
        order = [keep.index(j) for j in order if j in keep]
        roles = {keep.index(j): role for j, role in roles.items() if j in keep}
        headers, columns = [headers[j] for j in keep], [columns[j] for j in keep]
        rows = [[(*row[j], "") for j in keep] for row in rows]
    if any(cell[0] == _MISSING for row in rows for cell in row):
        note.append(frame.attrs.get("missing") or "– no value: the quantity does not apply to this row or "
                                                  "could not be computed (see the chapter's text).")

    # data-column: the results column a header shows, so the label map can be checked against what is shown
    def named(column: str) -> str:
        return f' data-column="{html.escape(column)}"' if column else ""

    def role(j: int) -> str:
        return f' data-role="{roles[j]}"' if j in roles and j in phone else ""

    # on a phone: the first _PHONE_COLUMNS columns that carry the estimate; the rest on a wider screen and in the CSV
    phone = set(range(len(headers)))
    more = ""
    if not transposed and len(headers) > _PHONE_COLUMNS:
        phone = set(order[:_PHONE_COLUMNS])
        csv = frame.to_csv(index=False)
        more = (f'<p class="bias-table-more">{_PHONE_COLUMNS} of its {len(headers)} columns on this screen: '
                f'<a download="table.csv" href="data:text/csv;charset=utf-8,{urllib.parse.quote(csv)}">'
                "the whole table as CSV</a>, or a wider screen.</p>")

    def cls(j: int, numeric: bool) -> str:
        names = (["num"] if numeric else []) + ([] if j in phone else ["bias-detail"])
        return f' class="{" ".join(names)}"' if names else ""

    # a table a phone hides columns of reads in the phone's order, so what it hides is at the end of each row
    shown = order if len(phone) < len(headers) else list(range(len(headers)))
    head = "".join(f"<th{cls(j, False)}{named(columns[j])}{role(j)}>{html.escape(headers[j])}</th>" for j in shown)
    body = "".join(
        "<tr>" + "".join(f"<td{cls(j, row[j][1])}{role(j)}>{html.escape(row[j][0])}</td>" if row[j][1]
                         else f"<td{cls(j, False)}{named(row[j][2])}{role(j)}>{html.escape(row[j][0])}</td>"
                         for j in shown) + "</tr>" for row in rows)
    kind = " bias-table-transposed" if transposed else " bias-table-wide" if len(headers) > _MAX_COLUMNS else ""
    notes = "".join(f'<p class="bias-table-note">{html.escape(n)}</p>' for n in note)
    return (f'<div class="bias-table{kind}"><table class="dataframe bias-dataframe"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>{more}{notes}")


def enable() -> None:
    """Make Altair charts in this kernel render through the book's global ``vegaEmbed``, and
    DataFrames display as :func:`table_html` (the tables written to disk keep all digits)."""

    from IPython import get_ipython  # deferred: only a kernel has a display formatter
    from pandas.io.formats.style import Styler  # deferred: loads jinja2, needed only in a kernel

    alt.renderers.enable(RENDERER)
    # plain-text reprs and Stylers (which bypass the HTML formatter) keep readable digits too
    pd.set_option("display.float_format", precision.number_text)
    # cells wrap in the book, so a reason or a context sentence is shown whole up to 100 characters
    pd.set_option("display.max_colwidth", 100)
    pd.set_option("styler.format.formatter", precision.number_text)
    shell = get_ipython()
    if shell is not None:
        html_formatter = shell.display_formatter.formatters["text/html"]
        html_formatter.for_type(pd.DataFrame, table_html)
        # a Styler's table reads like every other table (its data, not its own HTML)
        html_formatter.for_type(Styler, lambda styler: table_html(styler.data))
