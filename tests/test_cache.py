"""The crash-safety guarantees every cache in the project relies on."""

import errno
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

from bias_utils.core import cache


def test_stable_hash_ignores_dict_order_and_sees_values():
    assert cache.stable_hash({"a": 1, "b": [1, 2]}) == cache.stable_hash({"b": [1, 2], "a": 1})
    assert cache.stable_hash({"a": 1}) != cache.stable_hash({"a": 2})
    assert cache.stable_hash({"t": 0.7}) != cache.stable_hash({"t": 0.70001})


def test_sha256_file_matches_hashlib(tmp_path):
    import hashlib

    p = tmp_path / "f.bin"
    data = os.urandom(3 * (1 << 20) + 17)  # spans several read chunks
    p.write_bytes(data)
    assert cache.sha256_file(p) == hashlib.sha256(data).hexdigest()


def test_atomic_write_leaves_no_temp_files(tmp_path):
    target = tmp_path / "sub" / "x.json"
    cache.atomic_write_json(target, {"k": [1, 2]})
    cache.atomic_write_json(target, {"k": [3]})
    assert json.loads(target.read_text()) == {"k": [3]}
    assert [p.name for p in target.parent.iterdir()] == ["x.json"]


def test_npz_roundtrip_and_corruption_is_a_miss(tmp_path):
    path = tmp_path / "e.npz"
    values = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    cache.write_npz(path, values=values, ids=np.array(["a", "b"]))
    got = cache.read_npz(path, required=["values", "ids"])
    np.testing.assert_array_equal(got["values"], values)
    assert list(got["ids"]) == ["a", "b"]

    assert cache.read_npz(path, required=["missing"]) is None  # incomplete entry is a miss ...
    assert not path.exists()  # ... and is removed so the caller recomputes it

    cache.write_npz(path, values=values)
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])  # truncated, as after a crash on a non-atomic writer
    assert cache.read_npz(path) is None and not path.exists()

    big = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    cache.write_npz(path, values=big)
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # the middle of a one-array npz is array data: only the zip CRC can catch it
    path.write_bytes(bytes(raw))
    assert cache.read_npz(path) is None


def test_read_npz_never_unpickles(tmp_path):
    path = tmp_path / "obj.npz"
    np.savez(path, obj=np.array([{"a": 1}], dtype=object))  # an object array needs pickle to load
    assert cache.read_npz(path) is None


def test_jsonl_torn_tail_is_ignored_then_repaired(tmp_path):
    path = tmp_path / "rows.jsonl"
    cache.append_jsonl(path, [{"i": 0}, {"i": 1}])
    with open(path, "a") as f:
        f.write('{"i": 2, "text": "half wri')  # a crash mid-write
    assert [r["i"] for r in cache.read_jsonl(path)] == [0, 1]
    cache.append_jsonl(path, [{"i": 2}])
    assert [r["i"] for r in cache.read_jsonl(path)] == [0, 1, 2]


def test_jsonl_survives_sigkill_mid_stream(tmp_path):
    """A writer killed at an arbitrary point leaves only whole records behind."""
    path = tmp_path / "rows.jsonl"
    script = textwrap.dedent(
        f"""
        from bias_utils.core import cache
        i = 0
        while True:
            cache.append_jsonl({str(path)!r}, [{{"i": i, "pad": "x" * 5000}}])
            i += 1
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.time() + 60
    while time.time() < deadline and (not path.exists() or path.stat().st_size < 200_000):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    rows = list(cache.read_jsonl(path))
    assert len(rows) > 10
    assert [r["i"] for r in rows] == list(range(len(rows)))
    cache.append_jsonl(path, [{"i": len(rows)}])
    assert [r["i"] for r in cache.read_jsonl(path)] == list(range(len(rows) + 1))


def test_atomic_open_veto_keeps_the_old_file(tmp_path):
    target = tmp_path / "f.txt"
    target.write_text("old")

    def reject(tmp):
        assert tmp.read_text() == "new"  # the veto sees the complete new content
        raise ValueError("checksum mismatch")

    with pytest.raises(ValueError, match="checksum"):
        with cache.atomic_open(target, verify=reject) as f:
            f.write(b"new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


_FULL_DISK_CHILD = """
import resource, signal, sys
import pandas as pd
from bias_utils.core.cache import append_jsonl
from bias_utils.core.results import write_table
# A file-size limit makes the kernel refuse the write mid-file (EFBIG), as a full disk does (ENOSPC): an
# OSError from inside write() that carries no file name of its own.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
for write in (lambda: write_table(pd.DataFrame({"x": range(5000)}), sys.argv[1] + "/profile_stats"),
              lambda: append_jsonl(sys.argv[1] + "/rows.jsonl", [{"x": "y" * 10000}])):
    try:
        write()
    except OSError as exc:
        print(exc.errno, exc)
"""


def test_a_failed_write_names_the_file(tmp_path):
    out = subprocess.run([sys.executable, "-c", _FULL_DISK_CHILD, str(tmp_path)], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert len(out) == 2, out
    assert out[0].startswith(f"{errno.EFBIG} [Errno {errno.EFBIG}] File too large (writing): "
                             f"'{tmp_path / 'profile_stats'}.")
    assert out[1] == f"{errno.EFBIG} [Errno {errno.EFBIG}] File too large (writing): '{tmp_path / 'rows.jsonl'}'"
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


_LOCK_CHILD = """
import sys, time
from bias_utils.core.cache import file_lock
with file_lock(sys.argv[1]):
    print("in", time.time(), flush=True)
    time.sleep(float(sys.argv[2]))
    print("out", time.time(), flush=True)
"""


def test_a_second_process_waits_for_the_lock(tmp_path):
    lock = tmp_path / "cache" / "lock"
    first = subprocess.Popen([sys.executable, "-c", _LOCK_CHILD, str(lock), "1.5"], stdout=subprocess.PIPE, text=True)
    assert first.stdout.readline().startswith("in")  # the first holds the lock now
    second = subprocess.run([sys.executable, "-c", _LOCK_CHILD, str(lock), "0"], capture_output=True, text=True,
                            check=True)
    released = float(first.stdout.readline().split()[1])
    first.wait()
    entered = float(second.stdout.splitlines()[0].split()[1])
    assert entered >= released
    assert "waiting for another run that is filling the same cache" in second.stderr


_BUILD_CHILD = """
import sys, time
from pathlib import Path
from bias_utils.core.cache import build_folder

def build(tmp):
    with open(Path(sys.argv[1]).parent / "builds.log", "a") as f:
        f.write(sys.argv[2] + "\\n")
    print("building", flush=True)
    time.sleep(1.0)
    (tmp / "done").write_text(sys.argv[2])

print(build_folder(Path(sys.argv[1]), lambda t: (t / "done").exists(), build), flush=True)
"""


def test_a_folder_is_built_once_when_two_processes_ask(tmp_path):
    target = tmp_path / "models" / "unzipped" / "m--abc"
    target.parent.mkdir(parents=True)
    first = subprocess.Popen([sys.executable, "-c", _BUILD_CHILD, str(target), "first"], stdout=subprocess.PIPE,
                             text=True)
    assert first.stdout.readline().strip() == "building"  # the first holds the lock and is building
    second = subprocess.run([sys.executable, "-c", _BUILD_CHILD, str(target), "second"], capture_output=True,
                            text=True, check=True)
    first.wait()
    assert (target.parent / "builds.log").read_text().split() == ["first"]
    assert second.stdout.strip() == str(target)
    assert (target / "done").read_text() == "first"
    assert not list(target.parent.glob(".m--abc.*"))  # no temporary folder left behind


def test_a_failed_build_leaves_no_folder_and_a_stale_one_is_replaced(tmp_path):
    target = tmp_path / "m--abc"
    target.mkdir()
    (target / "half").write_text("an interrupted unpacking")

    def fail(tmp):
        (tmp / "done").write_text("x")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        cache.build_folder(target, lambda t: (t / "done").exists(), fail)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m--abc", "m--abc.lock"]
    assert not (target / "done").exists()
    cache.build_folder(target, lambda t: (t / "done").exists(), lambda tmp: (tmp / "done").write_text("y"))
    assert sorted(p.name for p in target.iterdir()) == ["done"]  # the stale folder is gone, not merged


def test_a_record_store_skips_debris_inside_its_file_says_where_and_rewrites_it(tmp_path):
    """Issue 58: a half record followed by a newline inside rows.jsonl was skipped silently and stayed in the file.
    The store names the file and line, keeps every record, and rewrites the file without the debris (a torn last
    line, a write in progress, is left to the next append as before)."""
    from bias_utils.core.cache import RecordStore

    store = RecordStore(tmp_path, {"model": "m"}, "key", required=("value",))
    store.append([{"key": "a", "value": 1}, {"key": "b", "value": 2}])
    good = store.rows.read_text()
    store.rows.write_text(good + '{"key": "c", "va\n' + '{"key": "d", "value": 4}\n')
    where = rf"^{re.escape(str(store.rows))}: line 3 holds no record .* rewritten without it$"
    with pytest.warns(UserWarning, match=where):
        done = store.load()
    assert sorted(done) == ["a", "b", "d"] and done["d"]["value"] == 4
    assert store.rows.read_text() == good + '{"key": "d", "value": 4}\n'
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the debris is gone: a second load is silent
        assert sorted(store.load()) == ["a", "b", "d"]
    store.rows.write_text(store.rows.read_text() + '{"key": "e", "val')  # a torn tail: no warning, no rewrite
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sorted(store.load()) == ["a", "b", "d"]
    store.append([{"key": "e", "value": 5}])
    assert sorted(store.load()) == ["a", "b", "d", "e"]
