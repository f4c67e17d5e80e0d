"""Shared fixtures. Keep each fixture small and documented; add new ones with targeted edits."""

from __future__ import annotations

import os
import sys
from collections import defaultdict

import pytest

from bias_utils.core import data

# Under pytest-xdist each worker gets its share of the cores, set before any test imports torch: torch's default of
# one OpenMP thread per core in every worker oversubscribes them (spinning threads; models.decoding's speed notes
# measured one thread 8-20x faster than two on a busy machine). An OMP_NUM_THREADS already set is kept.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    os.environ.setdefault("OMP_NUM_THREADS",
                          str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))

# Seconds (setup + call + teardown) and tests per test file, from the reports this process receives: under
# pytest-xdist the workers' reports arrive on the controller, which prints the table.
_FILE_SECONDS: defaultdict[str, float] = defaultdict(float)
_FILE_TESTS: defaultdict[str, int] = defaultdict(int)


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::", 1)[0]
    _FILE_SECONDS[path] += report.duration
    _FILE_TESTS[path] += report.when == "setup"


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, config):
    """After pytest's ``--durations`` list: where the time went, per test file, slowest first (seconds summed over
    setup, call and teardown; with several workers the seconds add up to more than the wall time)."""
    if hasattr(config, "workerinput") or not _FILE_SECONDS:
        return
    tr = terminalreporter
    total = sum(_FILE_SECONDS.values())
    tr.write_sep("=", "seconds per test file (setup + call + teardown)")
    tr.write_line(f"{'seconds':>9} {'share':>6} {'tests':>6}  file")
    for path, seconds in sorted(_FILE_SECONDS.items(), key=lambda kv: (-kv[1], kv[0])):
        tr.write_line(f"{seconds:9.2f} {seconds / total:6.1%} {_FILE_TESTS[path]:6d}  {path}")
    tr.write_line(f"{total:9.2f} {1:6.1%} {sum(_FILE_TESTS.values()):6d}  all files")


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, the files with browser tests come first, then the others by their number of tests marked
    ``slow``, most first (a file with a test marked ``shares_quick_book`` counts one); tests marked ``cuda`` skip,
    saying why, where no CUDA device exists (torch is imported only when one is collected)."""
    if hasattr(config, "workerinput"):
        # make test hands out whole files in collection order (--dist loadfile --no-loadscope-reorder), each to the
        # worker that is free: the file that builds the QUICK book, the longest unit of the suite, starts first;
        # then the longest files (slow tests are the proxy for a file's seconds), so that the small ones fill the
        # end instead of a long file running alone after the other worker is done (simulated on the per-file
        # seconds of a clean-clone run: 1,078 s of wall time in alphabetical order, 979 s in this one, the bound
        # being 979 s, half the summed seconds)
        # A file sharing the QUICK book's chapter 12 store counts as one slow test: by its own count it started
        # about 9 minutes in, beside the book's chapter 12 (near the book's end), and computed its conditions too
        # (test_erasure.py 193 s against 132 s reading them); among the short files it starts after the book.
        browser = {item.path for item in items if item.get_closest_marker("browser")}
        shares = {item.path for item in items if item.get_closest_marker("shares_quick_book")}
        slow: defaultdict = defaultdict(int)
        for item in items:
            slow[item.path] += item.get_closest_marker("slow") is not None
        items.sort(key=lambda item: (item.path not in browser,
                                     -min(slow[item.path], 1) if item.path in shares else -slow[item.path]))
    marked = [item for item in items if item.get_closest_marker("cuda")]
    if not marked:
        return
    import torch  # deferred: most test runs collect no cuda test and need not import torch here

    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="no CUDA device: the cuda tests compare the GPU with the CPU "
                                       "(run them with make gpu-check on a machine with one)")
        for item in marked:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="module")
def _release_models_after_each_file():
    """A file's models leave the process's model cache when the file is done, unless something still holds one (a
    session fixture): a pytest worker that kept every model of every file it ran reached 6.9 GB on a clean clone
    (Qwen's 2.9 GB in float32 beside SmolLM2 and the rest). A later file that needs one loads it again from the
    converted cache, in seconds."""
    yield
    loading = sys.modules.get("bias_utils.models.loading")
    if loading is not None:
        loading._release_unheld()


@pytest.fixture(scope="session")
def real_mirror():
    """The real data mirror (``../shared/data`` or ``$BIAS_DATA_MIRROR``); tests needing it skip without it."""
    mirror = data._mirror_dir()
    if mirror is None or not mirror.is_dir():
        pytest.skip("no data mirror (../shared/data or BIAS_DATA_MIRROR) on this machine")
    return mirror


@pytest.fixture
def isolated_data(tmp_path, monkeypatch):
    """An empty local data cache under ``tmp_path`` with downloads disabled.

    The mirror is left as configured; tests set ``BIAS_DATA_MIRROR`` themselves
    when they need a different one. Returns the cache folder.
    """
    raw = tmp_path / "raw"
    monkeypatch.setenv("BIAS_DATA_DIR", str(raw))
    monkeypatch.setenv("BIAS_OFFLINE", "1")
    return raw


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    """An empty ``paths.cache_dir()`` under ``tmp_path`` (computed caches start cold)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("BIAS_CACHE_DIR", str(cache))
    return cache


@pytest.fixture(scope="session")
def wn():
    """The project's WordNet 3.0 reader."""
    from bias_utils.core.wordnet import wordnet

    return wordnet()


@pytest.fixture(scope="session")
def seed_dictionary():
    """The 455-row seed dictionary through the public loader."""
    from bias_utils.profiles.dictionaries import load_seed_dictionary

    return load_seed_dictionary()


@pytest.fixture(scope="session")
def smollm():
    """SmolLM2-135M-Instruct, the real small decoder of the slow tests (load it only in tests marked slow)."""
    from bias_utils.models.loading import load_model

    return load_model("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def smollm_quick_bases(smollm):
    """SmolLM2's stereotype axes as the QUICK build has them (two generated contexts per sense): ``{space: basis}``."""
    from bias_utils.profiles import dictionaries, space

    return space.build_space(smollm, dictionaries.load_dictionary(None), "generated", n_contexts=2, seed=0).bases


@pytest.fixture
def loads(monkeypatch):
    """Every model load in the test, by name: ``models.load_model`` and transformers' ``from_pretrained``
    (which reads weights), each wrapped so that it still does its work. A check that must come before any model
    loads asserts the list empty."""
    import transformers

    from bias_utils.models import loading as models

    seen: list[str] = []
    load = models.load_model

    def spy_load(name, *args, **kwargs):
        seen.append(str(name))
        return load(name, *args, **kwargs)

    monkeypatch.setattr(models, "load_model", spy_load)
    original = transformers.PreTrainedModel.from_pretrained.__func__

    def spy_weights(cls, where, *args, **kwargs):
        seen.append(f"weights of {where}")
        return original(cls, where, *args, **kwargs)

    monkeypatch.setattr(transformers.PreTrainedModel, "from_pretrained", classmethod(spy_weights))
    return seen
