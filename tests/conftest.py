"""Shared fixtures. Keep each fixture small and documented; add new ones with targeted edits."""

from __future__ import annotations

import pytest

from bias_utils.core import data


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` skip, saying why, where no CUDA device exists (torch is imported only when one is
    collected)."""
    marked = [item for item in items if item.get_closest_marker("cuda")]
    if not marked:
        return
    import torch  # deferred: most test runs collect no cuda test and need not import torch here

    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="no CUDA device: the cuda tests compare the GPU with the CPU "
                                       "(run them with make gpu-check on a machine with one)")
        for item in marked:
            item.add_marker(skip)


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
