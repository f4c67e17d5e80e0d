"""Context sources on real dictionary slices."""

import pandas as pd
import pytest

from bias_utils import contexts as C
from bias_utils.dictionaries import load_seed_dictionary, read_dictionary, wordnet_contexts


@pytest.fixture(scope="module")
def seed():
    return load_seed_dictionary()


def test_dictionary_source_takes_first_n_stored_contexts(seed):
    rows = seed.head(12)
    cs = C.build_contexts(rows, "dictionary", n_contexts=2)
    for _, r in rows.iterrows():
        got = cs.table[cs.table.sense_id == r.sense_id]
        assert got["context"].tolist() == list(r.contexts)[:2]
        assert (got["context_index"] == range(len(got))).all()
    assert cs.skipped.empty


def test_user_terms_without_contexts_get_wordnet_examples_and_misses_are_reported(tmp_path):
    path = tmp_path / "user.csv"
    path.write_text("dimension,term,direction\ntidiness,tidy,high\ntidiness,messy,low\ntidiness,zxqv,low\n")
    try:
        d = read_dictionary(path)
    except Exception:  # a dictionary reader may reject unknown words; build the frame directly then
        d = pd.DataFrame({"dimension": ["tidiness"] * 3, "term": ["tidy", "messy", "zxqv"],
                          "direction": ["high", "low", "low"]})
    cs = C.build_contexts(d, "dictionary", n_contexts=3)
    tidy = cs.table[cs.table.term == "tidy"]["context"].tolist()
    assert tidy == wordnet_contexts("tidy", None)[:3] and tidy
    assert set(cs.table["context_source"]) == {"WordNet"}
    assert cs.skipped["term"].tolist() == ["zxqv"]
    assert "no dictionary or WordNet example" in cs.skipped["reason"].item()


def test_none_source_is_the_term_alone(seed):
    cs = C.build_contexts(seed.head(5), "none")
    assert (cs.table["context"] == cs.table["term"]).all() and len(cs.table) == 5


def _published(resolve_key="schuster_generated_contexts"):
    import json

    from bias_utils.data import resolve

    with open(resolve(resolve_key)) as f:
        return {(e["term"], e["synset"]): e["examples"] for e in map(json.loads, f)}


def test_published_generated_contexts_are_the_authors_first_five(seed):
    # The default is the authors' projection.py: entry["examples"][:5] for term + synset, unfiltered.
    rows = seed
    cs = C.build_contexts(rows, "generated")
    published = _published()
    for _, r in rows.iterrows():
        kept = cs.table[cs.table.sense_id == r.sense_id]["context"].tolist()
        assert kept == published[(r.term, r.synset)][:5]
    assert cs.dropped.empty and cs.skipped.empty
    assert cs.table["context_source"].str.contains("Llama-3").all()
    # "sexist" is a sense whose published contexts mention women: kept by default.
    assert cs.table["context"].str.contains(r"\bwomen\b").any()


def test_published_generated_contexts_can_be_filtered_for_gender(seed):
    # Count the gendered contexts independently of gender_markers.
    from bias_utils.lexicon import FEMALE_WORDS, MALE_WORDS

    rows = seed[seed.term.isin(["sexist"]) | (seed.index < 40)]
    cs = C.build_contexts(rows, "generated", n_contexts=5, gender_filter=True)
    gendered = {w.lower() for w in MALE_WORDS + FEMALE_WORDS} | C.GENDERED_PRONOUNS
    published = _published()
    for _, r in rows.iterrows():
        kept = cs.table[cs.table.sense_id == r.sense_id]["context"].tolist()
        clean = [c for c in published[(r.term, r.synset)]
                 if not (set(C._WORD.findall(c.lower())) - {r.term}) & gendered
                 and not set(C._WORD.findall(c)) & C._names()]
        assert kept == clean[:5]
    assert len(cs.dropped) > 0


def test_gender_filter_drops_offending_sentence():
    assert C.gender_markers("The teacher praised her diligence.", "diligence") == ["her"]
    assert C.gender_markers("Mary showed great diligence.", "diligence") == ["Mary"]
    assert C.gender_markers("The team showed great diligence.", "diligence") == []
    dropped = []
    sense = pd.Series({"sense_id": "s", "term": "diligence"})
    kept = C._filter_generated(sense, ["The team showed diligence.", "He showed diligence."], "m", C._names(), dropped)
    assert kept == ["The team showed diligence."]
    assert dropped[0]["reason"] == "gendered: he"


def test_parse_generated_takes_the_sentence_with_the_term():
    text = 'Sure! Here is a sentence: "The committee valued honesty above all. It was clear."'
    assert C.parse_generated(text, "honesty") == "The committee valued honesty above all."
    assert C.parse_generated("Nothing relevant here.", "honesty") is None


def test_corpus_source_with_user_file_is_seeded(tmp_path, seed):
    corpus = tmp_path / "corpus.txt"
    lines = [f"sentence {i} shows a friendly neighbour" for i in range(10)] + ["friendlyness is not the word", ""]
    corpus.write_text("\n".join(lines))
    d = seed[seed.term.isin(["friendly", "sociability"])]
    a = C.build_contexts(d, "corpus", n_contexts=3, seed=1, corpus=str(corpus))
    b = C.build_contexts(d, "corpus", n_contexts=3, seed=1, corpus=str(corpus))
    pd.testing.assert_frame_equal(a.table, b.table)
    assert set(a.table["term"]) == {"friendly"}
    assert a.table.groupby("sense_id").size().eq(3).all()
    assert a.table["context"].isin(lines[:10]).all()
    assert set(a.skipped["term"]) == {"sociability"}
    assert a.notes["status"].tolist() == ["used"]


def test_default_corpus_uses_both_bold_files_and_notes_them(seed):
    cs = C.build_contexts(seed.head(60), "corpus", n_contexts=2)
    notes = cs.notes.set_index("item")
    assert (notes.loc[list(C.DEFAULT_CORPORA), "status"] == "used").all()
    assert set(cs.table.sense_id) | set(cs.skipped.sense_id) == set(seed.head(60).sense_id)
    assert len(cs.table) > 0
    assert set(cs.table.context_source) == {" + ".join(C.DEFAULT_CORPORA)}


def test_context_report_counts(seed):
    cs = C.build_contexts(seed.head(10), "dictionary")
    rep = C.context_report(cs).iloc[0]
    t = cs.table
    assert rep["n_contexts"] == len(t) and rep["n_senses"] == t.sense_id.nunique()
    assert rep["mean_words"] == pytest.approx(t.context.str.split().str.len().mean())
    first = t.iloc[0]
    words = first.context.lower().split()
    assert C.term_position(first.context, first.term) == next(i + 1 for i, w in enumerate(words) if first.term in w)


def test_bad_input_is_named():
    with pytest.raises(C.ContextError, match="unknown context source"):
        C.build_contexts(pd.DataFrame({"dimension": ["a"], "term": ["b"], "direction": ["high"]}), "reddit")
    with pytest.raises(C.ContextError, match="lacks column"):
        C.build_contexts(pd.DataFrame({"term": ["b"]}))


@pytest.mark.slow
def test_generated_with_smollm2(seed):
    from bias_utils.models import load_model

    model = load_model("smollm2-135m-instruct")
    rows = seed[seed.term.isin(["friendly", "honest"])].head(3)
    cs = C.build_contexts(rows, "generated", n_contexts=2, seed=0, model=model,
                          generation={"max_new_tokens": 32})
    assert set(cs.table["sense_id"]) | set(cs.skipped["sense_id"]) == set(rows["sense_id"])
    for _, r in cs.table.iterrows():
        assert C.contains_term(r.context, r.term) and not C.gender_markers(r.context, r.term)
    assert (cs.table["context_source"] == model.model_id).all()
