"""Seed, full-dictionary and user dictionaries; WordNet 3.0 offline."""

import ast
import json
import re
import shutil

import nltk
import pandas as pd
import pytest

from bias_utils.core import paths
from bias_utils.core import wordnet as W
from bias_utils.core.data import resolve
from bias_utils.core.errors import DataError, ParameterError
from bias_utils.profiles import dictionaries
from bias_utils.profiles import dictionaries as D

# ----------------------------------------------------------------------------- WordNet


def test_wordnet_is_3_0_from_the_project_folder(wn):
    assert wn.get_version() == "3.0"
    assert str(paths.nltk_data_dir()) in wn.root.path
    # A satellite sense that nltk >= 3.9.2 would number differently.
    assert wn.synset("friendly.s.02").definition() == "inclined to help or support; not antagonistic or hostile"


@pytest.fixture
def fresh_wordnet(monkeypatch):
    """Run ``wordnet()`` uncached against a folder the test chooses; restore afterwards."""
    W.wordnet.cache_clear()

    def no_download(*args, **kwargs):
        raise AssertionError("wordnet() must never download")

    monkeypatch.setattr(nltk, "download", no_download)
    yield
    W.wordnet.cache_clear()


def test_missing_wordnet_says_to_run_make_wordnet(tmp_path, monkeypatch, fresh_wordnet):
    monkeypatch.setenv("BIAS_NLTK_DATA", str(tmp_path / "nltk_data"))
    with pytest.raises(DataError) as err:
        W.wordnet()
    assert "make wordnet" in str(err.value) and "nltk.download('wordnet'" in str(err.value)
    assert "lexnames" in str(err.value)


@pytest.mark.slow
def test_other_wordnet_version_is_refused(tmp_path, monkeypatch, fresh_wordnet):
    source = W._wordnet_dir()
    target = tmp_path / "nltk_data" / "corpora" / "wordnet"
    shutil.copytree(source, target)
    adj = (target / "data.adj").read_bytes()
    # Same length, so byte offsets stay valid: only the version in the header changes.
    (target / "data.adj").write_bytes(adj.replace(b"WordNet 3.0 Copyright", b"WordNet 3.1 Copyright", 1))
    monkeypatch.setenv("BIAS_NLTK_DATA", str(tmp_path / "nltk_data"))
    with pytest.raises(DataError, match="WordNet 3.1"):
        W.wordnet()


# ----------------------------------------------------------------------------- seed dictionary


def _raw_seed():
    """The seed CSV read independently of the loader (pandas + literal_eval)."""
    return pd.read_csv(resolve("schuster_seed_dictionary"), index_col=0)


def test_seed_counts_equal_the_paper(seed_dictionary):
    assert list(seed_dictionary.columns) == list(D._SEED_COLUMNS)
    assert len(seed_dictionary) == 455
    counts = seed_dictionary.groupby(["dimension", "direction"]).size().to_dict()
    assert counts == D.PUBLISHED_SEED_COUNTS
    table = D.pole_counts(seed_dictionary, D.PUBLISHED_SEED_COUNTS)
    assert (table.difference == 0).all()
    assert set(seed_dictionary.dimension) == set(D.DIMENSIONS)


def test_seed_columns_match_the_source_file(seed_dictionary):
    raw = _raw_seed()
    assert (seed_dictionary.term.values == raw.term.values).all()
    assert (seed_dictionary.dimension.values == raw.dimension.str.lower().values).all()
    assert (seed_dictionary.direction.values == raw.dir.values).all()
    assert (seed_dictionary.context_source.values == raw.example_source.values).all()
    # The loader strips stray whitespace around sentences (the source has a few leading blanks).
    assert list(seed_dictionary.contexts) == [[c.strip() for c in ast.literal_eval(x)] for x in raw.examples]
    assert all(isinstance(c, list) and c and all(isinstance(s, str) for s in c) for c in seed_dictionary.contexts)


def test_seed_sense_ids_are_unique_and_stable(seed_dictionary):
    assert seed_dictionary.sense_id.is_unique
    row = seed_dictionary.iloc[0]
    assert row.sense_id == f"{row.term}|{row.synset}|{row.dimension}"


def test_all_455_seed_synsets_resolve_with_the_csv_definitions(wn):
    raw = _raw_seed()
    assert raw.synset.nunique() <= 455
    for synset, definition in zip(raw.synset, raw.definition):
        assert wn.synset(synset).definition() == definition, synset


def test_composites_are_built_from_dimensions():
    assert D.DIMENSIONS == ("sociability", "morality", "ability", "agency", "status", "politics", "religion")
    assert all(set(parts) <= set(D.DIMENSIONS) for parts in D.COMPOSITES.values())
    assert D.COMPOSITES == {"warmth": ("sociability", "morality"), "competence": ("ability", "agency")}


# ----------------------------------------------------------------------------- WordNet contexts


def test_wordnet_contexts_replace_the_synonym_and_keep_the_term():
    # correct.a.01 (lemmas correct, right): "the correct answer" becomes "the right answer" for the term
    # "right", Schuster et al.'s replace_wn_terms example. Hand-written from WordNet 3.0's five examples.
    assert D.wordnet_contexts("right", synset="correct.a.01") == [
        "the right answer", "the right version", "the right answer", "took the right road", "the right decision",
    ]
    # aloof.s.01: the head word "aloof" is replaced by the term; "he was upstage with strangers" has
    # neither word and is dropped.
    assert D.wordnet_contexts("distant", synset="aloof.s.01") == ["stood apart with distant dignity",
                                                                    "a distant smile"]


def test_wordnet_contexts_without_synset_pool_noun_and_adjective_senses(wn):
    term = "tidy"
    expected = []
    for s in wn.synsets(term):
        if s.pos() in ("n", "a", "s"):
            head = s.name().split(".")[0]
            for e in map(str.lower, s.examples()):
                e = e.replace(head, term) if term not in e and head in e else e
                expected += [e] if term in e.split(" ") else []
    assert "a nicely tidy beard" in expected  # from kempt.s.01 by the replacement rule
    assert D.wordnet_contexts(term) == expected
    assert D.wordnet_contexts(term, n=1) == expected[:1]


def test_wordnet_contexts_unknown_synset_is_an_error():
    with pytest.raises(ParameterError, match="tidy.a.99"):
        D.wordnet_contexts("tidy", synset="tidy.a.99")


# ----------------------------------------------------------------------------- full dictionary


@pytest.fixture(scope="module")
def full_terms(tmp_path_factory):
    """The full-dictionary derivation run cold in a private cache (then read back from it)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("BIAS_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    frame = D.load_full_dictionary_terms()
    yield frame, D._full_cache_path()
    mp.undo()


@pytest.mark.slow
def test_full_dictionary_found_vs_published(full_terms):
    frame, _ = full_terms
    assert list(frame.columns) == list(D._FULL_COLUMNS)
    table = D.pole_counts(frame, D.PUBLISHED_FULL_COUNTS)
    print("\nfull dictionary, found vs published (Schuster et al. Table 1):\n" + table.to_string(index=False))
    cells = table[table.dimension != "total"]
    # PROVENANCE.md: the OSF copy reproduces 10 of 14 cells; the rest are at most 5 short.
    assert (cells.difference == 0).sum() >= 10
    assert cells.difference.abs().max() <= 5
    assert table.published.iloc[-1] == 2567
    assert not set(frame.term) & set(D.load_seed_dictionary().term)
    assert all(c and all(t in s.split(" ") for s in c) for t, c in zip(frame.term, frame.contexts))


@pytest.mark.slow
def test_full_dictionary_equals_the_independent_derivation(full_terms):
    frame, _ = full_terms
    other = pd.read_csv(resolve("derived_additional_terms"), index_col=0)
    assert len(frame) == len(other) == 2554
    assert list(frame.term) == list(other.term)
    assert list(frame.dimension) == list(other.dimension.str.lower())
    assert list(frame.direction) == list(other.dir)
    assert list(frame.synsets) == [json.loads(x) for x in other.synsets]
    assert list(frame.contexts) == [json.loads(x) for x in other.examples]


@pytest.mark.slow
def test_full_dictionary_cache_is_parquet_and_recovers_from_damage(full_terms, monkeypatch):
    frame, cache = full_terms
    assert cache.suffix == ".parquet" and cache.exists()
    monkeypatch.setenv("BIAS_CACHE_DIR", str(cache.parent.parent))
    pd.testing.assert_frame_equal(D.load_full_dictionary_terms(), frame)
    cache.write_bytes(cache.read_bytes()[:100])  # torn write
    pd.testing.assert_frame_equal(D.load_full_dictionary_terms(), frame)


# ----------------------------------------------------------------------------- user dictionaries


def _write(tmp_path, text, name="dict.csv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_load_dictionary_pole_counts_and_context_sources_of_a_user_dictionary():
    path = paths.data_dir() / "examples" / "user_dictionary_example.csv"
    frame = D.load_dictionary(path)
    raw = pd.read_csv(path)
    counts = D.pole_counts(frame)
    assert list(counts.columns) == ["dimension", "direction", "found"]
    by_hand = raw["direction"].str.lower().value_counts()
    assert counts.set_index("direction")["found"].to_dict() == by_hand.to_dict()
    sources = D.context_sources(frame)
    assert sources[["dimension", "context_source", "senses", "mean_contexts"]].values.tolist() == [
        ["tidiness", "", len(raw), 0.0]]


def test_limit_terms_keeps_at_most_limit_per_pole_in_original_order(seed_dictionary):
    assert D.limit_terms(seed_dictionary, None).equals(seed_dictionary.reset_index(drop=True))
    small = D.limit_terms(seed_dictionary, 3, seed=1)
    assert (small.groupby(["dimension", "direction"]).size() == 3).all() and len(small) == 3 * 14
    # rows keep the dictionary's order and are real rows of it
    ids = seed_dictionary["sense_id"].tolist()
    assert [ids.index(s) for s in small["sense_id"]] == sorted(ids.index(s) for s in small["sense_id"])
    assert D.limit_terms(seed_dictionary, 3, seed=1).equals(small)


def test_example_user_dictionary_adds_a_new_dimension():
    frame = D.read_dictionary(paths.data_dir() / "examples" / "user_dictionary_example.csv")
    assert set(frame.dimension) == {"tidiness"}
    assert set(frame.direction) == {"high", "low"}
    assert (frame.contexts.map(len) == 0).all() and (frame.context_source == "").all()
    assert all(D.wordnet_contexts(t) for t in frame.term)  # every example term has WordNet contexts


def test_user_dictionary_context_formats_and_synset_definition(tmp_path, wn):
    path = _write(tmp_path, (
        "Dimension,Term,Direction,synset,contexts\n"
        'tidiness,tidy,High,tidy.a.01,"[""a tidy room"", ""so tidy""]"\n'
        "tidiness,neat,high,,\"['a neat desk']\"\n"
        "tidiness,messy,low,,a messy desk|  messy hair \n"
    ))
    frame = D.read_dictionary(path)
    assert list(frame.contexts) == [["a tidy room", "so tidy"], ["a neat desk"], ["a messy desk", "messy hair"]]
    assert frame.definition[0] == wn.synset("tidy.a.01").definition()
    assert list(frame.context_source) == ["user"] * 3
    assert list(frame.direction) == ["high", "high", "low"]


GOOD = "dimension,term,direction\nx,a,high\nx,b,low\n"


@pytest.mark.parametrize("text, line, column, what", [
    (GOOD + "x,c,up\n", 4, "direction", "'up'"),
    (GOOD + "x,,high\n", 4, "term", "empty term"),
    (GOOD + "x,a,low\n", 4, "term/synset/dimension", "duplicate of line 2"),
    (GOOD + "y,c,high\ny,d,high\n", "4, 5", "direction", "no 'low'"),
    ("dimension,term\nx,a\n", 1, "direction", "required column"),
    ("dimension,term,direction,contexts\nx,a,high,\"[1, 2]\"\nx,b,low,\n", 2, "contexts", "list of strings"),
    ("dimension,term,direction,synset\nx,a,high,nosuch.a.01\nx,b,low,\n", 2, "synset", "nosuch.a.01"),
    (GOOD + ",c,high\n", 4, "dimension", "empty dimension"),
])
def test_user_dictionary_errors_name_line_and_column(tmp_path, text, line, column, what):
    with pytest.raises(ParameterError) as err:
        D.read_dictionary(_write(tmp_path, text))
    message = str(err.value)
    assert f"line{'s' if ',' in str(line) else ''} {line}" in message
    assert (re.search(f"columns? {re.escape(column)}", message)
            or (column == "direction" and "direction missing" in message))
    assert what in message


def test_user_dictionary_reports_lines_after_a_quoted_newline(tmp_path):
    text = 'dimension,term,direction,contexts\nx,a,high,"one\ntwo"\nx,b,sideways,\n'
    with pytest.raises(ParameterError, match="line 4, column direction"):
        D.read_dictionary(_write(tmp_path, text))


def test_user_dictionary_reports_every_problem_at_once(tmp_path):
    with pytest.raises(ParameterError) as err:
        D.read_dictionary(_write(tmp_path, GOOD + "x,,high\nx,c,up\n"))
    assert "2 problem(s)" in str(err.value)


@pytest.mark.parametrize("text, what", [("", "empty"), ("dimension,term,direction\n", "no dictionary rows")])
def test_empty_user_dictionary(tmp_path, text, what):
    with pytest.raises(ParameterError, match=what):
        D.read_dictionary(_write(tmp_path, text))


def test_missing_user_dictionary_file(tmp_path):
    with pytest.raises(ParameterError, match="does not exist"):
        D.read_dictionary(tmp_path / "nope.csv")


# ----------------------------------------------------------------------------- trying words in a cell


def test_add_terms_fills_every_column_as_a_csv_row_would(tmp_path):
    seed = D.load_seed_dictionary()
    out = D.add_terms(seed, "Tidiness", high=["tidy", "neat", "orderly"], low=["messy", "sloppy", "untidy"],
                      synsets={"tidy": "tidy.a.01"})
    added = out.iloc[len(seed):]
    assert list(out.columns) == list(seed.columns) and len(added) == 6
    assert added["dimension"].eq("tidiness").all()
    assert added["sense_id"].tolist()[:4] == ["tidy|tidy.a.01|tidiness", "neat||tidiness", "orderly||tidiness",
                                              "messy||tidiness"]
    assert added.iloc[0]["definition"] == D.wordnet().synset("tidy.a.01").definition()
    assert all(list(c) == [] for c in added["contexts"])
    # the same row from a CSV gets the same sense_id (one rule)
    csv = tmp_path / "d.csv"
    csv.write_text("dimension,term,direction\ntidiness,neat,high\ntidiness,messy,low\n")
    assert D.read_dictionary(csv)["sense_id"].tolist() == ["neat||tidiness", "messy||tidiness"]


@pytest.mark.parametrize("kwargs, what", [
    ({"dimension": "tidiness", "high": ["tidy"]}, "no 'low' terms"),
    ({"dimension": "tidiness", "high": ["tidy", "neat", "clean"], "low": ["messy"]},
     "every pole needs at least 3 terms (an axis from fewer is mostly the words' own noise, and nothing could say so): "
     "'tidiness' has 1 low term (messy)"),
    ({"dimension": "sociability", "high": ["friendly"]}, "already in the dictionary: friendly"),
    ({"dimension": "tidiness", "high": "tidy", "low": ["messy"]}, "must be a list"),
    ({"dimension": "tidiness", "high": ["tidy"], "low": ["messy"], "synsets": {"tidy": "tidy.x.99"}}, "tidy.x.99"),
])
def test_add_terms_errors_name_the_problem(kwargs, what):
    seed = D.load_seed_dictionary()
    seed = seed.assign(sense_id=seed["term"] + "||" + seed["dimension"]) if "friendly" in str(kwargs) else seed
    with pytest.raises(ParameterError, match=re.escape(what)):
        D.add_terms(seed, **kwargs)


def test_rows_appended_by_hand_get_a_sense_id_or_a_named_error():
    seed = D.load_seed_dictionary()
    by_hand = pd.concat([seed, pd.DataFrame([{"dimension": "tidiness", "term": "tidy", "direction": "high"}])],
                        ignore_index=True)
    out = D.ensure_sense_ids(by_hand)
    assert out["sense_id"].iloc[-1] == "tidy||tidiness" and out["sense_id"].iloc[:-1].equals(seed["sense_id"])
    broken = pd.concat([seed, pd.DataFrame([{"dimension": "tidiness", "term": "tidy", "direction": "up"}])],
                       ignore_index=True)
    with pytest.raises(ParameterError, match=f"row {len(seed)} \\('tidy'\\)"):
        D.ensure_sense_ids(broken)


def test_dictionary_path_relative_to_the_repository_root_from_another_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # Jupyter runs a notebook from notebooks/, papermill from the root
    frame = D.read_dictionary("data/examples/user_dictionary_example.csv")
    assert "tidiness" in set(frame["dimension"])
    with pytest.raises(ParameterError, match="is a folder"):
        D.read_dictionary("data/examples")


def test_the_trying_words_cell_as_shipped_leaves_the_dictionary_unchanged():
    seed = D.load_seed_dictionary()
    out = D.add_terms(seed, "sociability", high=[], low=[])
    pd.testing.assert_frame_equal(out, seed)  # values, index and dtypes
    user = D.read_dictionary("data/examples/user_dictionary_example.csv")
    pd.testing.assert_frame_equal(D.add_terms(user, "sociability", high=[], low=[]), user)


def test_a_row_appended_by_hand_repeating_a_sense_gets_a_numbered_id():
    seed = D.load_seed_dictionary()
    first = seed.iloc[0]
    again = pd.DataFrame([{"dimension": first["dimension"], "term": first["term"], "direction": first["direction"],
                           "synset": first["synset"]}])
    out = D.ensure_sense_ids(pd.concat([seed, again], ignore_index=True))
    assert out["sense_id"].iloc[-1] == first["sense_id"] + "#2" and out["sense_id"].is_unique


def test_chapter_01_opens_with_the_counts_against_the_papers():
    """Issue 57: chapter 01 opened with "figures follow". Its first sentence says the seed dictionary's senses
    against Table 1 pole by pole (all 14 match), and names each pole that differs on a planted table."""
    counts = dictionaries.pole_counts(dictionaries.load_seed_dictionary(), dictionaries.PUBLISHED_SEED_COUNTS)
    total = sum(dictionaries.PUBLISHED_SEED_COUNTS.values())
    assert dictionaries.describe_counts(counts) == (
        f"The seed dictionary has {total} senses against the paper's {total}: 14 of its 14 poles match the "
        "published count, every one.")
    planted = counts.copy()
    planted.loc[0, "found"] -= 2
    planted["difference"] = planted["found"] - planted["published"]
    first = planted.iloc[0]
    assert dictionaries.describe_counts(planted).endswith(
        f"13 of its 14 poles match the published count, and 1 differs ({first['dimension']} {first['direction']} "
        f"{int(first['found'])} against {int(first['published'])}).")
    own = dictionaries.pole_counts(dictionaries.load_seed_dictionary())
    assert dictionaries.describe_counts(own, "This dictionary") == (
        f"This dictionary has {total} senses on 14 poles of 7 dimensions (no published counts to compare).")
