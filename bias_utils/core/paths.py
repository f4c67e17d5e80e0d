"""Where the project keeps things. Every location can be moved with an
environment variable, so an auditor can point caches at a bigger disk."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ParameterError

__all__: list[str] = []

#: The repository root (the folder holding ``pyproject.toml``).
ROOT = Path(__file__).resolve().parents[2]


def _env_path(var: str, default: Path | None) -> Path | None:
    """The folder ``$var`` names, absolute (a relative one is read against the working folder), else ``default``."""
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


def resolve_input(path: str | os.PathLike, name: str) -> Path:
    """The file a user means by ``path``, the same under papermill, Jupyter and the book.

    Papermill runs a notebook from the repository root, Jupyter from ``notebooks/``:
    a relative path is tried against the working folder, then against :data:`ROOT`
    (so the README's ``data/examples/...`` works in both). ``name`` is the parameter
    the message starts with. A folder is reported as a folder, not as missing.
    """
    given = Path(path).expanduser()
    tried = [given] if given.is_absolute() else list(dict.fromkeys([Path.cwd() / given, ROOT / given]))
    for candidate in tried:
        if candidate.is_file():
            return candidate.resolve()
    folders = [c for c in tried if c.is_dir()]
    if folders:
        raise ParameterError(f"{name}: {str(path)!r} is a folder ({folders[0]}), not a file")
    raise ParameterError(f"{name}: {str(path)!r} does not exist; looked in " + ", ".join(str(c) for c in tried))
