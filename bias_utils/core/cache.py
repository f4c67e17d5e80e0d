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

import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
import warnings
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Iterator

import numpy as np

__all__: list[str] = []


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
    with _naming(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp_path = Path(tmp)
    try:
        with _naming(path), os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if verify is not None:
            verify(tmp_path)
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)
    _fsync_dir(path.parent)


@contextmanager
def _naming(path: Path) -> Iterator[None]:
    """An OSError without a file name (a full disk: ``[Errno 28]`` from a write) gets ``path``, so the message
    says which file could not be written."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or exc.errno is None:
            raise
        raise OSError(exc.errno, f"{exc.strerror} (writing)", str(path)) from exc


@contextmanager
def file_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (``fcntl.flock``, created if absent) while the block runs.

    A second process asking for the same lock waits, saying so on stderr, until the first leaves the block
    or dies (the system drops a dead process's lock, so a crash never leaves a stale one). A cache wraps
    "read what is there, compute the rest, write it" in one, so two runs on the same cache compute once.
    """
    path = Path(path)
    with _naming(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a")
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another run that is filling the same cache (lock {path}) ...", file=sys.stderr,
                  flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_folder(target: Path, done: Callable[[Path], bool], build: Callable[[Path], None]) -> Path:
    """The folder ``target``, built once: ``build(tmp)`` fills a fresh sibling folder, which then replaces ``target``.

    ``done(target)`` is asked before and again under a lock on ``target``'s name, so one process builds and
    another that asks meanwhile (a pytest worker, a book beside a test run) waits and finds the folder done;
    building twice replaced a folder under the other's reader. A failed build leaves no folder behind.
    """
    if done(target):
        return target
    with file_lock(target.parent / f"{target.name}.lock"):
        if done(target):
            return target
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
        try:
            build(tmp)
            os.chmod(tmp, 0o755)
            if target.exists():
                shutil.rmtree(target)
            os.replace(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return target


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
    with _naming(path), open(path, "a", encoding="utf-8") as f:
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


class RecordStore:
    """The one resumable store under every long computation (generation, the next word, the erasure's conditions):
    records appended as JSON lines to ``<root>/<hash of params>/rows.jsonl`` and read back by their key.

    The folder's name is the key of everything that determines the records (``params``, hashed to ``hash_length``
    characters; ``meta.json`` beside the rows holds them, for people browsing the cache). An append is fsynced, so
    what was appended survives a crash and an interrupted run resumes where it stopped; a record missing a
    ``required`` field (one written by an older version) is skipped; two runs that raced keep the first copy of a
    key (both computed the same record). A caller holds :meth:`lock` while it reads, computes and appends, so a
    second run waits and then reads instead of computing again."""

    def __init__(self, root: str | os.PathLike, params: Any, key: str | Callable[[dict], Any], *,
                 required: Iterable[str] = (), hash_length: int = 16):
        self.dir = Path(root) / stable_hash(params, hash_length)
        self.rows = self.dir / "rows.jsonl"
        self.key = (lambda r: r[key]) if isinstance(key, str) else key
        self.required = ((key,) if isinstance(key, str) else ()) + tuple(required)
        if not (self.dir / "meta.json").exists():
            atomic_write_json(self.dir / "meta.json", params)

    def lock(self, name: str = "lock"):
        """The store's lock file ``name`` (a context manager): one computation of these records at a time."""
        return file_lock(self.dir / name)

    def load(self) -> dict[Any, dict]:
        """The complete records on disk by key (the first copy of a key). A complete line that is no record (debris
        of a write a crash cut short, or an edit) is skipped with a warning naming the file and the line, and the
        file is rewritten without it, so the debris does not stay."""
        done: dict[Any, dict] = {}
        bad = []
        for number, line in enumerate(_complete_lines(self.rows), 1):
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                bad.append(number)
                continue
            if isinstance(r, dict) and all(c in r for c in self.required):
                done.setdefault(self.key(r), r)
        if bad:
            many = len(bad) > 1
            where = f"line{'s' if many else ''} {', '.join(map(str, bad))} hold{'' if many else 's'}"
            warnings.warn(f"{self.rows}: {where} "
                          "no record (a write cut short?); skipped, and the file rewritten without it", stacklevel=2)
            with file_lock(self.dir / "rows.lock"):  # an append waits: nothing it writes is lost
                lines = _complete_lines(self.rows)
                atomic_write_text(self.rows, "".join(ln for ln in lines if _is_json(ln)))
        return done

    def append(self, records: list[dict]) -> None:
        """Append ``records`` (nothing for none)."""
        if records:
            with file_lock(self.dir / "rows.lock"):
                append_jsonl(self.rows, records)


def _complete_lines(path: Path) -> list[str]:
    """The lines of a JSONL file that end in a newline (a torn last line is a write in progress or cut short)."""
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as f:
        return [line for line in f if line.endswith("\n")]


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
    except json.JSONDecodeError:
        return False
    return True
