"""Populations: built-in names, gendered terms, non-binary terms, and user files."""

import json
import re

import pandas as pd
import pytest

from bias_utils.core import paths
from bias_utils.core.data import resolve
from bias_utils.core.errors import ParameterError
from bias_utils.profiles import populations as P


def test_names_are_the_ssa_century_table_in_rank_order():
    names = P.load_populations("names")
    assert list(names) == ["female", "male"]
    assert [len(v) for v in names.values()] == [100, 100]
    # Independent source: the SSA national files recomputed for 1923-2022 (PROVENANCE.md: male order
    # identical; female the same 100 names with near-tie swaps).
    ssa = pd.read_csv(resolve("ssa_top100_recomputed"))
    window = ssa[ssa.years == "1923-2022"].sort_values("rank")
    assert names["male"] == list(window[window.sex == "M"].name)
    assert set(names["female"]) == set(window[window.sex == "F"].name)
    assert names["female"][0] == "Mary" and names["male"][0] == "James"
    assert P.population_kind("names") == "name"


def test_terms_are_weat_7_and_8_without_object_and_possessive_pronouns():
    terms = P.load_populations("terms")
    weat = json.loads(resolve("weat_word_sets").read_text())
    for group, keys, dropped in (("female", ("female_terms", "female_terms_2"), {"her", "hers"}),
                                 ("male", ("male_terms", "male_terms_2"), {"his", "him"})):
        expected = set(weat[keys[0]]) | set(weat[keys[1]])
        assert set(terms[group]) == expected - dropped
        assert len(terms[group]) == 9
    assert P.population_kind("terms") == "noun"


def test_nonbinary_terms_follow_the_documented_rule():
    groups = P.load_populations("nonbinary")
    assert list(groups) == ["nonbinary", "transgender"]
    source = json.loads(resolve("holisticbias_descriptors").read_text())["gender_and_sex"]
    for group, bucket in (("nonbinary", "non_binary_or_gnc"), ("transgender", "transgender")):
        words = [x["descriptor"] if isinstance(x, dict) else x for x in source[bucket]]
        assert groups[group], group
        assert all(w in words for w in groups[group])
        assert groups[group] == [w for w in words if w in groups[group]]  # source order
        for w in groups[group]:
            assert re.fullmatch(r"[a-z]+(-[a-z]+)?", w), w
    assert "nonbinary" in groups["nonbinary"] and "non-binary" not in groups["nonbinary"]
    assert "transgender" in groups["transgender"]
    for excluded in ("FTM", "trans female", "gender neutral", "feminine-of-center", *P._NONBINARY_EXCLUDED):
        assert all(excluded not in g for g in groups.values())
    assert P.population_kind("nonbinary") == "noun"


def test_takes_article_follows_schuster_templates():
    assert not P.takes_article("Mary", "name")
    assert P.takes_article("woman", "noun")
    assert not P.takes_article("she", "noun")
    with pytest.raises(ParameterError, match="kind"):
        P.takes_article("woman", "verb")


def test_user_json_and_csv_with_any_number_of_groups(tmp_path):
    plain = tmp_path / "p.json"
    plain.write_text(json.dumps({"a": ["x", "y"], "b": ["z"], "c": ["w"]}))
    assert P.load_populations(plain) == {"a": ["x", "y"], "b": ["z"], "c": ["w"]}
    assert P.population_kind(plain) == "noun"
    kinded = tmp_path / "k.json"
    kinded.write_text(json.dumps({"kind": "name", "groups": {"a": ["Ann"], "b": ["Bob"]}}))
    assert P.population_kind(kinded) == "name"
    table = tmp_path / "p.csv"
    table.write_text("group,word,kind\na,Ann,name\nb,Bob,name\nb,Carl,name\n")
    assert P.load_populations(table) == {"a": ["Ann"], "b": ["Bob", "Carl"]}
    assert P.population_kind(table) == "name"


@pytest.mark.parametrize("groups, what", [
    ({"a": [], "b": ["x"]}, "group 'a' is empty"),
    ({"a": ["x", "x"]}, "group 'a' lists 'x' twice"),
    ({"a": ["x"], "b": ["y", "x"]}, "'x' is in both group 'a' and group 'b'"),
    ({"a": ["x", ""]}, "word 2 is empty"),
    ({}, "no groups"),
    ({"kind": "verb", "groups": {"a": ["x"]}}, "kind 'verb'"),
    (["x", "y"], "expected"),
])
def test_bad_user_json(tmp_path, groups, what):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(groups))
    with pytest.raises(ParameterError, match=re.escape(what)):
        P.load_populations(path)


@pytest.mark.parametrize("text, what", [
    ("name,word\na,x\n", "line 1: the header needs columns 'group' and 'word'"),
    ("group,word\n,x\n", "line 2, column group: empty group name"),
    ("group,word\na,x\na,x\n", "group 'a' lists 'x' twice"),
    ("group,word,kind\na,x,name\nb,y,noun\n", "one kind per file"),
])
def test_bad_user_csv(tmp_path, text, what):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ParameterError, match=re.escape(what)):
        P.load_populations(path)


def test_unknown_population_and_format(tmp_path):
    with pytest.raises(ParameterError, match="names, terms, nonbinary"):
        P.load_populations("nmaes")
    other = tmp_path / "p.txt"
    other.write_text("x")
    with pytest.raises(ParameterError, match=".json or .csv"):
        P.load_populations(other)
    broken = tmp_path / "p.json"
    broken.write_text("{")
    with pytest.raises(ParameterError, match="not valid JSON"):
        P.load_populations(broken)


def test_kind_is_inferred_when_a_file_does_not_give_it(tmp_path):
    names = tmp_path / "names.json"
    names.write_text(json.dumps({"female": ["Mary", "Mary-Jane"], "male": ["John", "O'Neil"]}))
    assert P.population_kind(names) == "name"
    phrases = tmp_path / "phrases.csv"
    phrases.write_text("group,word\nfemale,the old lady\nfemale,aunt\nmale,uncle\nmale,old man\n")
    assert P.population_kind(phrases) == "noun"
    # a given kind wins over the inference
    table = tmp_path / "k.csv"
    table.write_text("group,word,kind\na,Rose,noun\nb,Lily,noun\n")
    assert P.population_kind(table) == "noun"


def test_a_phrase_with_its_own_determiner_takes_no_article():
    assert not P.takes_article("the old lady", "noun")
    assert not P.takes_article("my aunt", "noun")
    assert P.takes_article("old lady", "noun")


def test_relative_population_path_resolves_from_the_repository_root(tmp_path, monkeypatch):
    folder = paths.ROOT / "data" / "examples"
    monkeypatch.chdir(tmp_path)  # as Jupyter, whose working folder is not the repository root
    rel = folder.relative_to(paths.ROOT) / "nope.json"
    with pytest.raises(ParameterError, match="looked in") as err:
        P.load_populations(str(rel))
    assert str(tmp_path) in str(err.value) and str(paths.ROOT) in str(err.value)
    with pytest.raises(ParameterError, match="is a folder"):
        P.load_populations(str(folder.relative_to(paths.ROOT)))
