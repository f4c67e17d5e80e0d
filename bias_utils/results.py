"""Where results land: one folder per model id, tidy tables as parquet + CSV.

Every notebook and pipeline writes through :func:`write_table`, so a table is
always complete on disk (atomic writes) and always present in both formats:
parquet for exact types, CSV for reading anywhere. Column meanings are
documented by the function that produces each table.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pandas as pd

from . import paths
from .cache import atomic_write_bytes, atomic_write_text

__all__ = ["CROSS_MODEL_FOLDER", "MODEL_ID", "REPLICATION_FOLDER", "RESERVED_FOLDERS", "display_name",
           "model_slug", "output_folder", "read_table", "write_table"]

#: Folders beside the model folders for pages that belong to no single model.
REPLICATION_FOLDER = "published-audit"
CROSS_MODEL_FOLDER = "cross-model"
RESERVED_FOLDERS = frozenset({REPLICATION_FOLDER, CROSS_MODEL_FOLDER})


#: A model id as ``models.load_model`` writes it, ``<name or repo id>--<revision or weight hash>--<dtype>``
#: (or its folder slug, ``/`` written ``__``), found inside a longer text such as a chart title.
MODEL_ID = re.compile(r"(?P<name>[A-Za-z0-9._/+-]+?)--(?P<revision>[0-9a-f]{7,64})--(?P<dtype>[A-Za-z0-9]+)\b")
_DEFAULT_DTYPE = "fp32"


def display_name(model_id: str) -> str:
    """The name a reader is shown for a model: its own name without the weight hash, the owner of a
    hub repository and the default dtype (``smollm2-135m-instruct--b179c9523d0e--fp32`` ->
    ``smollm2-135m-instruct``; ``Qwen/Qwen2.5-0.5B--abc1234--bf16`` -> ``Qwen2.5-0.5B (bf16)``). Model
    ids inside a longer text are replaced where they stand; other text is returned unchanged."""

    def shown(match: re.Match) -> str:
        name = re.split(r"/|__", match["name"])[-1]
        return name if match["dtype"] == _DEFAULT_DTYPE else f"{name} ({match['dtype']})"

    return MODEL_ID.sub(shown, str(model_id))


def model_slug(model_id: str) -> str:
    """A folder name for a model id (hub ids contain ``/``, paths other separators)."""
    slug = re.sub(r"[^A-Za-z0-9._+-]+", "__", str(model_id)).strip("_")
    if not slug or slug in RESERVED_FOLDERS:
        raise ValueError(f"model id {model_id!r} cannot be used as a folder name")
    return slug


def output_folder(model_id: str, output_dir: str | Path | None = None, results_dir: str | Path | None = None) -> Path:
    """``output_dir`` if given, else ``<results_dir>/<model slug>/`` (``results_dir`` default:
    :func:`bias_utils.paths.results_dir`); created. ``model_id`` may also be one of
    :data:`RESERVED_FOLDERS` for the pages that belong to no single model."""
    name = model_id if model_id in RESERVED_FOLDERS else model_slug(model_id)
    folder = Path(output_dir) if output_dir else Path(results_dir or paths.results_dir()) / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_table(df: pd.DataFrame, path_stem: str | Path) -> tuple[Path, Path]:
    """Write ``<stem>.parquet`` and ``<stem>.csv`` atomically; returns both paths."""
    stem = Path(path_stem)
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return (atomic_write_bytes(stem.with_suffix(".parquet"), buf.getvalue()),
            atomic_write_text(stem.with_suffix(".csv"), df.to_csv(index=False)))


def read_table(path_stem: str | Path) -> pd.DataFrame:
    """Read a table written by :func:`write_table` (parquet, exact types)."""
    return pd.read_parquet(Path(path_stem).with_suffix(".parquet"))
