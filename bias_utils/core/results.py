"""Where results land: one folder per model id, tidy tables as parquet + CSV.

Every notebook and pipeline writes through :func:`write_table`, so a table is
always complete on disk (atomic writes) and always present in both formats:
parquet for exact types, CSV for reading anywhere. Column meanings are
documented by the function that produces each table.
"""

from __future__ import annotations

import io
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Mapping

import pandas as pd

from . import paths
from .cache import atomic_write_bytes, atomic_write_json, atomic_write_text
from .errors import ParameterError

__all__ = [
    "CROSS_MODEL_FOLDER", "REPLICATION_FOLDER", "display_name", "output_folder", "write_table",
]

#: Folders beside the model folders for pages that belong to no single model.
REPLICATION_FOLDER = "published-audit"
CROSS_MODEL_FOLDER = "cross-model"
_RESERVED_FOLDERS = frozenset({REPLICATION_FOLDER, CROSS_MODEL_FOLDER})
#: The file in a model's results folder that names the model whose results it holds (written by
#: :func:`output_folder`); :func:`write_table` puts that ``model_id`` in every table written there.
_MODEL_FILE = "model.json"
#: Set to 1 to let a run write into a folder that holds another model's results (its tables are replaced).
_OVERWRITE_ENV = "BIAS_OVERWRITE_RESULTS"


#: A model id as ``models.load_model`` writes it, ``<name or repo id>--<revision or weight hash>--<dtype>``
#: (or its folder slug, ``/`` written ``__``), found inside a longer text such as a chart title.
_MODEL_ID = re.compile(r"(?P<name>[A-Za-z0-9._/+-]+?)--(?P<revision>[0-9a-f]{7,64})--(?P<dtype>[A-Za-z0-9]+)\b")
_DEFAULT_DTYPE = "fp32"


def display_name(model_id: str) -> str:
    """The name a reader is shown for a model: its own name without the weight hash, the owner of a
    hub repository and the default dtype (``smollm2-135m-instruct--b179c9523d0e--fp32`` ->
    ``smollm2-135m-instruct``; ``Qwen/Qwen2.5-0.5B--abc1234--bf16`` -> ``Qwen2.5-0.5B (bf16)``). Model
    ids inside a longer text are replaced where they stand; other text is returned unchanged."""

    def shown(match: re.Match) -> str:
        name = re.split(r"/|__", match["name"])[-1]
        return name if match["dtype"] == _DEFAULT_DTYPE else f"{name} ({match['dtype']})"

    return _MODEL_ID.sub(shown, str(model_id))


def model_slug(model_id: str) -> str:
    """A folder name for a model id (hub ids contain ``/``, paths other separators)."""
    slug = re.sub(r"[^A-Za-z0-9._+-]+", "__", str(model_id)).strip("_")
    if not slug or slug in _RESERVED_FOLDERS:
        raise ValueError(f"model id {model_id!r} cannot be used as a folder name")
    return slug


def check_writable(folder: str | Path, name: str = "output_dir") -> Path:
    """``folder``, created if needed, once a probe file could be written and removed there; else a
    :class:`ParameterError` naming ``name``, the folder and why (a read-only disk, no permission), before any work
    whose results would have nowhere to go."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-probe-"):
            pass
    except OSError as exc:
        raise ParameterError(f"{name}: cannot write to {folder} ({exc.strerror or exc}); choose a folder this user "
                             "can write to") from None
    return folder


def folder_model(folder: str | Path) -> str | None:
    """The model id a results folder holds (its :data:`MODEL_FILE`), or ``None`` (none recorded, unreadable)."""
    try:
        return str(json.loads((Path(folder) / _MODEL_FILE).read_text(encoding="utf-8"))["model_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def output_folder(model_id: str, output_dir: str | Path | None = None, results_dir: str | Path | None = None, *,
                  overwrite: bool | None = None) -> Path:
    """``output_dir`` if given, else ``<results_dir>/<model slug>/`` (``results_dir`` default:
    :func:`bias_utils.core.paths.results_dir`); created, checked writable (:func:`check_writable`), and claimed for
    ``model_id`` (:data:`MODEL_FILE`). A folder that holds another model's results is refused, naming the folder
    and both model ids, unless ``overwrite`` (default: the environment variable :data:`OVERWRITE_ENV` set to 1).
    ``model_id`` may also be one of :data:`RESERVED_FOLDERS` for the pages that belong to no single model."""
    name = model_id if model_id in _RESERVED_FOLDERS else model_slug(model_id)
    folder = check_writable(Path(output_dir) if output_dir else Path(results_dir or paths.results_dir()) / name)
    if model_id in _RESERVED_FOLDERS:
        return folder
    if check_folder_model(folder, model_id, overwrite) != model_id:
        atomic_write_json(folder / _MODEL_FILE, {"model_id": model_id})
    return folder


def check_folder_model(folder: str | Path, model: str, overwrite: bool | None = None) -> str | None:
    """The model id ``folder`` holds (:func:`folder_model`), after checking that it is ``model``'s: a model id, or
    a built-in's short name (compared with the name part of the id, before the model loads). Another model's
    folder is a :class:`ParameterError` naming the folder and both models, unless ``overwrite`` (default: the
    environment variable :data:`OVERWRITE_ENV` set to 1)."""
    held = folder_model(folder)
    overwrite = os.environ.get(_OVERWRITE_ENV, "").strip() == "1" if overwrite is None else overwrite
    if held is not None and model not in (held, held.split("--")[0]) and not overwrite:
        raise ParameterError(f"output_dir: {folder} holds the results of {held}; this run is of {model} and would "
                             f"replace them. Choose another output_dir, or set {_OVERWRITE_ENV}=1 to replace them")
    return held


def write_table(df: pd.DataFrame, path_stem: str | Path) -> tuple[Path, Path]:
    """Write ``<stem>.parquet`` and ``<stem>.csv`` atomically; returns both paths. In a model's results folder
    (:func:`output_folder`) a table without a ``model_id`` column gets one, first: the folder's model."""
    stem = Path(path_stem)
    model_id = folder_model(stem.parent)
    if model_id is not None and "model_id" not in df.columns:
        df = df.copy()
        df.insert(0, "model_id", model_id)
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return (atomic_write_bytes(stem.with_suffix(".parquet"), buf.getvalue()),
            atomic_write_text(stem.with_suffix(".csv"), df.to_csv(index=False)))


def write_tables(folder: str | Path, frames: Mapping[str, pd.DataFrame]) -> list[Path]:
    """Write each of ``frames`` (table name -> table) as parquet + CSV under ``folder`` (:func:`write_table`);
    returns every file written. The one ``.write`` of every result class."""
    folder = Path(folder)
    return [p for name, df in frames.items() for p in write_table(df, folder / name)]


def _read_table(path_stem: str | Path) -> pd.DataFrame:
    """Read a table written by :func:`write_table` (parquet, exact types)."""
    return pd.read_parquet(Path(path_stem).with_suffix(".parquet"))


def first_row(table: pd.DataFrame, **match) -> pd.Series | None:
    """The first row of ``table`` whose columns equal ``match`` (``first_row(stats, test="welch_t",
    measure=None)``: a value of None matches any), or None where no row does. The one row picker of every reading."""
    hit = table
    for column, value in match.items():
        if value is not None:
            hit = hit[hit[column] == value]
    return hit.iloc[0] if len(hit) else None
