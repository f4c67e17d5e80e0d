"""Where the project keeps things: folders named in the environment."""

from __future__ import annotations

from pathlib import Path

from bias_utils.core import paths


def test_a_relative_folder_in_the_environment_is_read_against_the_working_folder(monkeypatch, tmp_path):
    # BIAS_TEST_BOOK=book make test: the browser test opens the book's pages by file:// URI, which needs an
    # absolute path (a relative one stopped every test with "relative path can't be expressed as a file URI")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BIAS_TEST_BOOK", "book")
    book = paths._env_path("BIAS_TEST_BOOK", None)
    assert book == tmp_path.resolve() / "book"
    assert (book / "_build" / "html" / "index.html").as_uri() == f"file://{tmp_path.resolve()}/book/_build/html/index.html"
    monkeypatch.setenv("BIAS_TEST_BOOK", "~/book")
    assert paths._env_path("BIAS_TEST_BOOK", None) == Path.home().resolve() / "book"


def test_an_unset_or_empty_variable_gives_the_default(monkeypatch, tmp_path):
    monkeypatch.delenv("BIAS_TEST_BOOK", raising=False)
    assert paths._env_path("BIAS_TEST_BOOK", None) is None
    monkeypatch.setenv("BIAS_CACHE_DIR", "")
    assert paths.cache_dir() == paths.ROOT / ".cache"
