"""Compare two builds' results tables cell by cell and name every number that differs beyond its tolerance.

    .venv/bin/python scripts/compare_builds.py RESULTS_A RESULTS_B [--rtol 1e-4] [--atol 1e-9] [--exact]

``RESULTS_A`` and ``RESULTS_B`` are two ``results/`` folders (a folder per model, ``cross-model/``, ...), e.g. one
book built with ``OMP_NUM_THREADS=1`` and one with two threads, or the same book before and after a refactor. Every
``*.parquet`` table found in either is read and compared: the same rows in the same order, the same columns; a
number equal to the bit, within tolerance (``|a - b| <= atol + rtol * max(|a|, |b|)``; NaN equals NaN, an
infinity only itself) or beyond it; any other cell (text, a sampled completion) equal or not. ``--exact`` sets both
tolerances to 0, for a change that must leave every table as it was.

Why the default tolerance: the builds differ only in the order a float32 kernel sums (a thread count splits a
matrix product's reduction differently). Each float32 rounding errs by at most eps = 2^-24 = 6e-8 relative, and a
sum of n terms in another order by at most about n eps of the largest partial sum; the longest reductions the
models run are over a hidden size of 576 (SmolLM2) and 384 (MiniLM) and an MLP width of 1,536, so a forward pass's
values agree to about 1e-4 relative (1,536 x 6e-8 = 9e-5) of the sum of their terms' sizes, and the statistics
computed from them in float64 add nothing of that size. That is the bound relative to the value itself only where the
terms share a sign (a norm, a softmax's denominator); a value that lost digits to cancellation (a difference of two
near numbers, a correlation near 0) can pass it by the factor it lost. So a cell beyond the tolerance is named, not
judged: a summation order amplified by cancellation, or a difference the order does not explain (a sampled token
that flipped, an optimiser that stopped elsewhere, a rank that swapped); the report lists each for a reader to
tell which. ``--atol`` keeps exact zeros from failing on 1e-17 of float64 noise. A column of wall-clock seconds
(:data:`MACHINE_COLUMNS`) measures the machine and is not compared.

Exits 0 when nothing differs beyond tolerance, 1 otherwise (2 for a usage error).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

EPS32 = 2.0 ** -24
#: The longest float32 reduction of the built-in models' forward passes (SmolLM2's MLP width).
LONGEST_REDUCTION = 1536
RTOL = LONGEST_REDUCTION * EPS32
ATOL = 1e-9
#: Columns that measure the machine, not the model (wall-clock seconds): reported, never compared.
MACHINE_COLUMNS = ("seconds",)


def _tables(root: Path) -> dict[str, Path]:
    return {str(p.relative_to(root).with_suffix("")): p for p in sorted(root.rglob("*.parquet"))}


def _numeric(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)


def _same_cell(p, q) -> bool:
    """Two cells of a text or list column: equal, or both missing."""
    if isinstance(p, (list, tuple, np.ndarray)) or isinstance(q, (list, tuple, np.ndarray)):
        p, q = np.asarray(p, dtype=object), np.asarray(q, dtype=object)
        return p.shape == q.shape and all(_same_cell(a, b) for a, b in zip(p.ravel(), q.ravel()))
    if pd.isna(p) or pd.isna(q):
        return bool(pd.isna(p) and pd.isna(q))
    return bool(p == q)


def compare_tables(a: pd.DataFrame, b: pd.DataFrame, rtol: float, atol: float) -> dict:
    """Counts of identical, within-tolerance and differing cells, and the differing cells (row, column, a, b)."""
    out = {"identical": 0, "within": 0, "beyond": [], "structure": "", "machine": [], "largest": (0.0, "")}
    if list(a.columns) != list(b.columns) or len(a) != len(b):
        out["structure"] = (f"columns or rows differ: {len(a)} x {list(a.columns)} against {len(b)} x "
                            f"{list(b.columns)}")
        return out
    for col in a.columns:
        x, y = a[col], b[col]
        if col in MACHINE_COLUMNS:
            out["machine"].append(col)
            continue
        if _numeric(x) and _numeric(y):
            u, v = x.to_numpy(dtype=float), y.to_numpy(dtype=float)
            same = (u == v) | (np.isnan(u) & np.isnan(v))
            with np.errstate(invalid="ignore"):  # inf - inf: not close, and the same when both are one infinity
                close = np.abs(u - v) <= atol + rtol * np.maximum(np.abs(u), np.abs(v))
            close &= np.isfinite(u) & np.isfinite(v)
            out["identical"] += int(same.sum())
            out["within"] += int((close & ~same).sum())
            if (close & ~same).any():
                with np.errstate(invalid="ignore", divide="ignore"):
                    rel = np.where(close & ~same, np.abs(u - v) / np.maximum(np.abs(u), np.abs(v)), 0.0)
                i = int(np.nanargmax(rel))
                if rel[i] > out["largest"][0]:
                    out["largest"] = (float(rel[i]), f"row {i}, {col}: {u[i]!r} | {v[i]!r}")
            bad = np.flatnonzero(~same & ~close)
        else:
            same = np.array([_same_cell(p, q) for p, q in zip(x, y)], dtype=bool)
            out["identical"] += int(same.sum())
            bad = np.flatnonzero(~same)
        out["beyond"] += [(int(i), col, x.iloc[i], y.iloc[i]) for i in bad]
    return out


def compare(root_a: Path, root_b: Path, rtol: float = RTOL, atol: float = ATOL, show: int = 10) -> tuple[str, int]:
    """The report as text, and the number of tables with a cell beyond tolerance or a different structure."""
    ta, tb = _tables(root_a), _tables(root_b)
    lines, failing, totals = [], 0, {"identical": 0, "within": 0, "beyond": 0}
    largest = (0.0, "")
    for name in sorted(set(ta) | set(tb)):
        if name not in ta or name not in tb:
            lines.append(f"{name}: only in {'B' if name not in ta else 'A'}")
            failing += 1
            continue
        r = compare_tables(pd.read_parquet(ta[name]), pd.read_parquet(tb[name]), rtol, atol)
        totals["identical"] += r["identical"]
        totals["within"] += r["within"]
        totals["beyond"] += len(r["beyond"])
        if r["largest"][0] > largest[0]:
            largest = (r["largest"][0], f"{name}, {r['largest'][1]}")
        if r["machine"]:
            lines.append(f"{name}: {', '.join(r['machine'])} measure the machine, not compared")
        if r["structure"]:
            lines.append(f"{name}: {r['structure']}")
            failing += 1
        elif r["beyond"]:
            failing += 1
            lines.append(f"{name}: {len(r['beyond'])} cells beyond tolerance ({r['within']} within, "
                         f"{r['identical']} identical)")
            lines += [f"    row {i}, {col}: {x!r} | {y!r}" for i, col, x, y in r["beyond"][:show]]
            if len(r["beyond"]) > show:
                lines.append(f"    ... and {len(r['beyond']) - show} more")
        elif r["within"]:
            lines.append(f"{name}: {r['within']} cells within tolerance, the rest ({r['identical']}) identical")
    head = (f"{len(set(ta) | set(tb))} tables; cells identical to the bit: {totals['identical']}, within tolerance "
            f"(rtol {rtol:.2g}, atol {atol:.2g}): {totals['within']}, beyond: {totals['beyond']}; tables failing: "
            f"{failing}")
    if largest[0]:
        head += f"\nlargest relative difference within tolerance: {largest[0]:.2g} ({largest[1]})"
    return "\n".join([head] + lines), failing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results_a", type=Path)
    parser.add_argument("results_b", type=Path)
    parser.add_argument("--rtol", type=float, default=RTOL)
    parser.add_argument("--atol", type=float, default=ATOL)
    parser.add_argument("--exact", action="store_true", help="every cell equal to the bit")
    parser.add_argument("--show", type=int, default=10, help="differing cells printed per table")
    args = parser.parse_args(argv)
    for root in (args.results_a, args.results_b):
        if not root.is_dir():
            parser.error(f"{root}: not a folder of results tables")
    rtol, atol = (0.0, 0.0) if args.exact else (args.rtol, args.atol)
    text, failing = compare(args.results_a, args.results_b, rtol, atol, args.show)
    print(text)
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
