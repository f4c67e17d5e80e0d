"""Content-keyed, crash-safe storage shared by every cache in the project.

Design: a cache entry is a file whose name is a hash of everything that
determines its content. Files are written to a temporary name, fsynced and
atomically renamed, so a reader sees either a complete file or none; a killed
process never leaves a half-written entry under a real name. Readers verify
what they load (see :func:`read_npz`) and treat anything unreadable as a miss.
No pickle anywhere: entries are JSON, JSONL, npz (``allow_pickle=False``) or
parquet.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Iterator

import numpy as np

__all__ = [
    "append_jsonl", "atomic_open", "atomic_write_bytes", "atomic_write_json", "atomic_write_text", "read_jsonl",
    "read_npz", "sha256_file", "stable_hash", "write_npz",
]


def stable_hash(obj: Any, length: int = 16) -> str:
    """Hex digest of a JSON-serialisable object, independent of dict order."""
    payload = json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:length]


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # some filesystems do not allow opening directories
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_open(path: str | os.PathLike, verify: Callable[[Path], None] | None = None) -> Iterator[BinaryIO]:
    """Write through a temporary file beside ``path`` that replaces ``path`` only when complete.

    The file is flushed and fsynced, then ``verify(tmp_path)`` may veto it by
    raising; only then is it renamed over ``path``. On any error the temporary
    file is removed and ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp_path = Path(tmp)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if verify is not None:
            verify(tmp_path)
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)
    _fsync_dir(path.parent)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` so that the file is either complete or absent."""
    with atomic_open(path) as f:
        f.write(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, default=str))


def write_npz(path: str | os.PathLike, **arrays: np.ndarray) -> Path:
    """Atomically write arrays as an uncompressed npz (no pickled objects)."""
    with atomic_open(path) as f:
        np.savez(f, **arrays)
    return Path(path)


def read_npz(path: str | os.PathLike, required: Iterable[str] = ()) -> dict[str, np.ndarray] | None:
    """Load an npz written by :func:`write_npz`; ``None`` if absent, truncated or corrupt.

    A corrupt entry is deleted so that the caller recomputes it.
    """
    path = Path(path)
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            out = {k: z[k] for k in z.files}  # forces every member to be read and CRC-checked
        if any(k not in out for k in required):
            raise ValueError("missing arrays")
        return out
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError):
        path.unlink(missing_ok=True)
        return None


def _drop_torn_tail(path: Path) -> None:
    """Cut a partial last line left by a crash, so the next append starts clean."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return
        data = f.seek(0) or f.read()
        f.truncate(data.rfind(b"\n") + 1)
        f.flush()
        os.fsync(f.fileno())


def append_jsonl(path: str | os.PathLike, records: Iterable[dict]) -> None:
    """Append records as JSON lines and fsync, so a finished append survives a crash."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _drop_torn_tail(path)
    lines = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
    with open(path, "a", encoding="utf-8") as f:
        f.write(lines)
        f.flush()
        os.fsync(f.fileno())


def read_jsonl(path: str | os.PathLike) -> Iterator[dict]:
    """Yield the complete records of a JSONL file; a torn last line (crash mid-write) is ignored."""
    path = Path(path)
    if not path.exists():
        return
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                break  # torn write: the record was never committed
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue
