"""Where the project keeps things. Every location can be moved with an
environment variable, so an auditor can point caches at a bigger disk."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ROOT", "cache_dir", "data_dir", "nltk_data_dir", "raw_dir", "results_dir"]

#: The repository root (the folder holding ``pyproject.toml``).
ROOT = Path(__file__).resolve().parent.parent


def _env_path(var: str, default: Path) -> Path:
    value = os.environ.get(var)
    return Path(value).expanduser().resolve() if value else default


def data_dir() -> Path:
    """Tracked data folder: the manifest and small project-authored lists."""
    return ROOT / "data"


def raw_dir() -> Path:
    """Local cache of verified external files (git-ignored)."""
    return _env_path("BIAS_DATA_DIR", ROOT / "data" / "raw")


def cache_dir() -> Path:
    """Computed caches: converted models, embeddings, completions (git-ignored)."""
    return _env_path("BIAS_CACHE_DIR", ROOT / ".cache")


def results_dir() -> Path:
    """Tidy result tables, one folder per model id."""
    return _env_path("BIAS_RESULTS_DIR", ROOT / "results")


def nltk_data_dir() -> Path:
    """WordNet 3.0 for nltk, filled by ``make`` (see ``scripts/fetch_wordnet.sh``)."""
    return _env_path("BIAS_NLTK_DATA", ROOT / "data" / "nltk_data")
