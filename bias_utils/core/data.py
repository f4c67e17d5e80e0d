"""Verified access to every external file the project uses.

``data/manifest.csv`` records, for each file, a stable key, its public URL,
license, citation and sha256. :func:`resolve` returns a local path to a
verified copy, looking in this order:

1. the local cache ``data/raw/<key>/<file>`` (git-ignored);
2. a mirror folder: ``$BIAS_DATA_MIRROR``, by default ``../shared/data``
   beside the repository when it exists;
3. a download from the public URL (unless ``BIAS_OFFLINE=1``).

Every candidate is hashed before use. A mismatch raises
:class:`~bias_utils.core.errors.DataError` naming the file and both hashes; an unverified file is
never returned and never copied into the cache.
"""

from __future__ import annotations

import csv
import os
import shutil
import urllib.request
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from . import paths
from .cache import atomic_open, sha256_file
from .errors import DataError

__all__ = [
    "resolve",
]


@dataclass(frozen=True)
class _DataFile:
    key: str
    mirror_path: str
    url: str
    sha256: str
    bytes: int
    license: str
    citation: str

    @property
    def filename(self) -> str:
        return Path(self.mirror_path).name


def _manifest_path() -> Path:
    return paths.data_dir() / "manifest.csv"


@lru_cache(maxsize=1)
def manifest() -> dict[str, _DataFile]:
    with open(_manifest_path(), newline="", encoding="utf-8") as f:
        rows = [_DataFile(**{**r, "bytes": int(r["bytes"])}) for r in csv.DictReader(f)]
    return {r.key: r for r in rows}


def entry(key: str) -> _DataFile:
    try:
        return manifest()[key]
    except KeyError:
        raise DataError(f"unknown data key {key!r}; known keys: {', '.join(sorted(manifest()))}") from None


def _mirror_dir() -> Path | None:
    value = os.environ.get("BIAS_DATA_MIRROR")
    if value is not None:
        return Path(value).expanduser() if value else None
    default = paths.ROOT.parent / "shared" / "data"
    return default if default.is_dir() else None


def _offline() -> bool:
    """True when ``BIAS_OFFLINE`` forbids downloads (``1``, ``true`` or ``yes``, any case)."""
    return os.environ.get("BIAS_OFFLINE", "").strip().lower() in ("1", "true", "yes")


def _cached_path(key: str) -> Path:
    return paths.raw_dir() / key / entry(key).filename


def _verify(path: Path, item: _DataFile, where: str) -> None:
    actual = sha256_file(path)
    if actual != item.sha256:
        raise DataError(
            f"{item.filename} ({item.key}) from {where} at {path} failed verification:\n"
            f"  expected sha256 {item.sha256}\n  actual   sha256 {actual}\n"
            f"The file is not used. Replace it with the published file from {item.url or 'the mirror'}."
        )


def _install(src: Path, item: _DataFile) -> Path:
    dest = _cached_path(item.key)
    # The copy is what later runs trust, so it is verified itself (a full disk truncates silently).
    with atomic_open(dest, verify=lambda tmp: _verify(tmp, item, f"copy of {src}")) as f, open(src, "rb") as r:
        shutil.copyfileobj(r, f)
    return dest


def _download(item: _DataFile) -> Path:
    dest = _cached_path(item.key)
    with atomic_open(dest, verify=lambda tmp: _verify(tmp, item, "download")) as f, \
            urllib.request.urlopen(item.url, timeout=30) as r:
        shutil.copyfileobj(r, f)
    return dest


def resolve(key: str) -> Path:
    """Path to a verified local copy of the external file ``key``."""
    item = entry(key)
    local = _cached_path(key)
    if local.exists():
        try:
            _verify(local, item, "local cache")
            return local
        except DataError as exc:  # _verify's only error: the sha256 differs
            # A stale or damaged cache entry is replaced from the sources, visibly.
            warnings.warn(f"discarding damaged cached copy: {exc}", stacklevel=2)
            local.unlink()

    problems: list[str] = []
    mirror = _mirror_dir()
    if mirror is not None:
        candidate = mirror / item.mirror_path
        if candidate.exists():
            _verify(candidate, item, "mirror")  # a wrong file in the mirror is an error, not a skip
            return _install(candidate, item)
        problems.append(f"not in mirror {mirror}")
    else:
        problems.append("no mirror folder (set BIAS_DATA_MIRROR)")

    if item.url and not _offline():
        try:
            return _download(item)
        except OSError as exc:  # a download that arrives but fails its sha256 is a DataError, raised as it is
            problems.append(f"download failed ({exc.__class__.__name__}: {exc})")
    elif not item.url:
        problems.append("no public URL (derived file; only a mirror has it)")
    else:
        problems.append("downloads disabled by BIAS_OFFLINE")

    raise DataError(
        f"cannot resolve data file {item.filename!r} (key {key}): " + "; ".join(problems) + ".\n"
        f"Get it from {item.url or 'a mirror of ../shared/data'} (sha256 {item.sha256}) and put it at "
        f"{local}, or set BIAS_DATA_MIRROR to a folder holding {item.mirror_path}."
    )


def _status() -> list[dict]:
    """One row per manifest entry: whether it resolves and from where (for docs and ``make data``)."""
    out = []
    for key, item in manifest().items():
        try:
            path = resolve(key)
            out.append({"key": key, "ok": True, "path": str(path), "problem": ""})
        except DataError as exc:
            out.append({"key": key, "ok": False, "path": "", "problem": " ".join(str(exc).split())})
    return out


def _print_status() -> int:
    """``make data``: resolve every file and print where it came from; return the failure count."""
    rows = _status()
    width = max(len(r["key"]) for r in rows)
    for r in rows:
        where = r["path"] if r["ok"] else f"FAILED: {r['problem']}"
        print(f"{r['key']:<{width}}  {'ok  ' if r['ok'] else 'FAIL'}  {where}")
    failed = [r["key"] for r in rows if not r["ok"]]
    print(f"\n{len(rows) - len(failed)} of {len(rows)} files verified"
          + (f"; not usable: {', '.join(failed)} (see the messages above)" if failed else "."))
    return len(failed)


if __name__ == "__main__":
    import sys

    # A known-bad mirror copy (bold_profession_wiki) must not break `make data`; --strict makes it fail.
    failures = _print_status()
    sys.exit(1 if failures and "--strict" in sys.argv[1:] else 0)
