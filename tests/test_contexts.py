"""Context sources on real dictionary slices."""

import re

import pandas as pd
import pytest

from bias_utils.core.errors import ParameterError
from bias_utils.profiles import context_filters as F
from bias_utils.profiles import contexts as C
from bias_utils.profiles.dictionaries import load_seed_dictionary, read_dictionary, wordnet_contexts


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

    from bias_utils.core.data import resolve

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
    from bias_utils.core.lexicon import FEMALE_WORDS, MALE_WORDS

    rows = seed[seed.term.isin(["sexist"]) | (seed.index < 40)]
    cs = C.build_contexts(rows, "generated", n_contexts=5, gender_filter=True)
    gendered = {w.lower() for w in MALE_WORDS + FEMALE_WORDS} | F._GENDERED_PRONOUNS
    published = _published()

    def words(c):  # letters and inner hyphens; an apostrophe ends a word ("women's" -> "women", "s")
        return set(re.findall(r"[A-Za-z]+(?:-[A-Za-z]+)*", c))

    for _, r in rows.iterrows():
        kept = cs.table[cs.table.sense_id == r.sense_id]["context"].tolist()
        clean = [c for c in published[(r.term, r.synset)]
                 if not ({w.lower() for w in words(c)} - {r.term}) & gendered and not words(c) & F.known_names()]
        assert kept == clean[:5]
    assert len(cs.dropped) > 0


def test_gender_filter_drops_offending_sentence():
    assert F.gender_markers("The teacher praised her diligence.", "diligence") == ["her"]
    assert F.gender_markers("Mary showed great diligence.", "diligence") == ["Mary"]
    assert F.gender_markers("The team showed great diligence.", "diligence") == []
    dropped = []
    sense = pd.Series({"sense_id": "s", "term": "diligence"})
    kept = F.filter_generated(sense, ["The team showed diligence.", "He showed diligence."], "m", F.known_names(),
                              dropped)
    assert kept == ["The team showed diligence."]
    assert dropped[0]["reason"] == "gendered: he"


def test_parse_generated_takes_the_sentence_with_the_term():
    text = 'Sure! Here is a sentence: "The committee valued honesty above all. It was clear."'
    assert F._parse_generated(text, "honesty") == "The committee valued honesty above all."
    assert F._parse_generated("Nothing relevant here.", "honesty") is None


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
    assert set(a.skipped["reason"]) == {"the term does not occur in the corpus (corpus.txt)"}


def test_default_corpus_uses_both_bold_files_and_notes_them(seed):
    cs = C.build_contexts(seed.head(60), "corpus", n_contexts=2)
    notes = cs.notes.set_index("item")
    # each file named in words, not by its data key
    assert notes.index.tolist() == ["BOLD's Wikipedia sentences on professions", "BOLD's Wikipedia sentences on gender"]
    assert (notes["status"] == "used").all()
    assert notes["detail"].str.fullmatch(r"\d{1,3}(,\d{3})* sentences").all()  # a count as the book prints one
    assert set(cs.table.sense_id) | set(cs.skipped.sense_id) == set(seed.head(60).sense_id)
    assert len(cs.table) > 0
    assert set(cs.table.context_source) == {" + ".join(C._DEFAULT_CORPORA)}
    # a reason names the corpus in words, never by its data keys
    assert len(cs.skipped) and not cs.skipped["reason"].str.contains("|".join(C._DEFAULT_CORPORA)).any()
    assert set(cs.skipped["reason"]) == {
        "the term does not occur in the corpus (BOLD's Wikipedia sentences on professions and gender)"}


def test_context_report_counts(seed):
    cs = C.build_contexts(seed.head(10), "dictionary")
    rep = C.context_report(cs).iloc[0]
    t = cs.table
    assert rep["n_contexts"] == len(t) and rep["n_senses"] == t.sense_id.nunique()
    assert rep["mean_words"] == pytest.approx(t.context.str.split().str.len().mean())
    first = t.iloc[0]
    words = first.context.lower().split()
    assert F.term_position(first.context, first.term) == next(i + 1 for i, w in enumerate(words) if first.term in w)


def test_bad_input_is_named():
    with pytest.raises(ParameterError, match="^source must be one of dictionary, generated, corpus, none, got 're"):
        C.build_contexts(pd.DataFrame({"dimension": ["a"], "term": ["b"], "direction": ["high"]}), "reddit")
    with pytest.raises(ParameterError, match="^dictionary: dictionary lacks column"):
        C.build_contexts(pd.DataFrame({"term": ["b"]}))


@pytest.mark.slow
def test_generated_with_smollm2(seed):
    from bias_utils.models.loading import load_model

    model = load_model("smollm2-135m-instruct")
    rows = seed[seed.term.isin(["friendly", "honest"])].head(3)
    cs = C.build_contexts(rows, "generated", n_contexts=2, seed=0, model=model,
                          generation={"max_new_tokens": 32})
    assert set(cs.table["sense_id"]) | set(cs.skipped["sense_id"]) == set(rows["sense_id"])
    for _, r in cs.table.iterrows():
        assert F.contains_term(r.context, r.term) and not F.gender_markers(r.context, r.term)
    assert (cs.table["context_source"] == model.model_id).all()


# ------------------------------------------------------------ quality filters for generated contexts
# The sentences below are real SmolLM2-135M-Instruct completions (seed 0, the paper's instruction), except the
# first two, which are the issue's quotes of the same model's output.

def _reason(context, term, dimension="morality", first_word=True):
    issue = F._quality_issue(context, term, dimension, first_word=first_word)
    return None if issue is None else issue.split(":")[0]


def test_meta_text_is_dropped():
    assert _reason('Cleaner is a single sentence that uses the word "clean" without any gendered pronouns.',
                   "clean") == "meta-text"
    assert _reason('I use the word "habit" as a collective noun and use it as such without any gender-specific '
                   "pronouns.", "habit") == "meta-text"
    assert _reason("The AI is designed to adapt to the current situation and maintain a forward-looking attitude.",
                   "forward-looking") == "meta-text"
    assert _reason('Holding a flexible mindset is a "customary" act of kindness.', "customary") == "meta-text"
    # Qwen2.5-Coder-0.5B-Instruct echoing the instruction or talking as a chatbot.
    assert _reason("The statement is irreverent and does not contain any names.", "irreverent") == "meta-text"
    assert _reason("I'll pretend I'm a computer program.", "pretend") == "meta-text"
    assert _reason("I am not sure what you mean by thought.", "thought") == "meta-text"
    # "words" used as a word, not as talk about the term, is kept.
    assert _reason("The politician's smile was insincere, revealing a hidden agenda behind the words of "
                   "supposed compassion.", "insincere") is None


def test_identity_markers_beyond_gender_are_dropped():
    assert F._identity_markers("I'm sloppy, a person of color.", "sloppy") == ["person of color (race_ethnicity)"]
    assert _reason("The devout Christians gathered for prayer every morning.", "devout", "morality") == "identity"
    assert _reason("The elderly neighbour was known to be frugal.", "frugal") == "identity"
    # A religion term may use religion's own vocabulary; lower-case "black" is a colour, not a descriptor.
    assert _reason("The Orthodox Church is unaffiliated with the monastic traditions of the Czech Orthodox Church.",
                   "orthodox", "religion") is None
    assert _reason("The black coffee was bitter.", "bitter") is None


def test_invented_words_and_words_containing_the_term_are_dropped():
    assert F._unknown_words("Smasmern, I have a fantastic team of hyperactive team members with a range of "
                           "abilities that are both exhilarating and terrifying for everyone.",
                           "hyperactive") == ["Smasmern"]
    assert F._unknown_words("Emotionally, using hyperactive can be a form of hypervigilacism.", "hyperactive") == \
        ["hypervigilacism"]
    # Words WordNet 3.0 lacks but that are derived or compounded from its words count as known.
    assert F._unknown_words("The coworker's backstory showcased an inclusivity that didn't feel nuanced.",
                           "inclusivity") == []
    sense = {"sense_id": "rakish", "term": "rakish", "dimension": "morality"}
    dropped = []
    kept = F.usable_contexts(sense, ["That person's a krakish.", "Cherubbi, my frigidity makes you feel dry.",
                                     "The rakish smile drew a few laughs.", "The rakish smile drew a few laughs."],
                             "m", F.known_names(), dropped)
    assert kept == ["The rakish smile drew a few laughs."]
    assert [d["reason"] for d in dropped] == ["inside a longer word: krakish", "no sentence containing the term",
                                              "duplicate"]


def test_first_word_and_contracted_pronouns():
    assert _reason("Snotty the cat was whacking at the door.", "snotty") == "first word"
    assert _reason("Snotty the cat was whacking at the door.", "snotty", first_word=False) is None
    assert F.gender_markers("She's a snotty cat.", "snotty") == ["she"]


@pytest.mark.slow
def test_quality_filters_keep_the_published_contexts():
    # The authors' Llama-3 contexts are the quality the filters aim at: almost all must pass.
    from bias_utils.profiles.dictionaries import load_seed_dictionary

    seed = load_seed_dictionary()
    dimension = dict(zip(seed.term, seed.dimension))
    issues = [F._quality_issue(c, key.split(" - ")[0], dimension.get(key.split(" - ")[0]), first_word=False)
              for key, examples in C._published_generated_contexts().items() for c in examples[:5]]
    assert len(issues) > 2000
    assert sum(i is None for i in issues) / len(issues) > 0.97


def test_a_registered_source_is_built_listed_and_accepted_as_a_parameter(monkeypatch):
    from bias_utils.book import validation

    monkeypatch.setattr(C._SOURCES, "_items", dict(C._SOURCES._items))
    assert C.source_names() == ("dictionary", "generated", "corpus", "none")  # the order of reports

    @C._context_source("definition")
    def definition_contexts(d, request):
        rows = [{"sense_id": s.sense_id, "dimension": s.dimension, "term": s.term, "direction": s.direction,
                 "context": f"To be {s.term} is a trait.", "context_source": "test", "context_index": 0,
                 "source": "definition"} for s in d.head(request.n_contexts).itertuples()]
        return C.ContextSet(pd.DataFrame(rows, columns=C._TABLE_COLUMNS))

    assert C.source_names()[-1] == "definition"
    cs = C.build_contexts(load_seed_dictionary().head(4), "definition", n_contexts=3)
    assert len(cs.table) == 3 and set(cs.table["source"]) == {"definition"}
    assert validation._check_context_source("definition") == "definition"
    assert validation._check_sources(None)[-1] == "definition"
    with pytest.raises(ParameterError, match="'corpus' is already registered"):
        C._context_source("corpus")(definition_contexts)


# ------------------------------------------------------------ generated contexts for senses without published ones

@pytest.mark.slow
def test_a_missing_generator_is_a_parameter_error_naming_both_ways_out():
    # gemma-3-270m is a built-in whose weights are not installed here; nothing may load before the error.
    code = ("import sys\nfrom bias_utils.profiles import contexts as C, dictionaries as D\n"
            "d = D.read_dictionary('data/examples/user_dictionary_example.csv')\n"
            "try:\n    C.build_contexts(d, 'generated', fill_generator='gemma-3-270m')\n"
            "except C.ParameterError as e:\n    print(e)\n"
            "print('loaded:', sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n")
    import subprocess
    import sys

    from bias_utils.core import paths
    from bias_utils.models import builtin_models

    if builtin_models.is_installed("gemma-3-270m"):
        pytest.skip("gemma-3-270m is installed here")
    out = subprocess.run([sys.executable, "-c", code], cwd=paths.ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert "8 sense(s) have no published generated contexts (tidy, neat" in out
    assert "python -m bias_utils.models install gemma-3-270m" in out and 'context_source="dictionary"' in out
    assert "loaded: []" in out
    # without a fill generator the senses are skipped with their reason, as before
    d = read_dictionary("data/examples/user_dictionary_example.csv")
    cs = C.build_contexts(d, "generated", fill_generator=None)
    assert cs.table.empty and len(cs.skipped) == 8 and cs.generated.empty


def test_the_seed_dictionary_needs_no_generator():
    seed = load_seed_dictionary()
    assert C._unpublished_senses(seed).empty
    assert C._require_generator(seed, "gemma-3-270m").empty  # nothing to generate: no error


@pytest.mark.slow
def test_senses_without_published_contexts_are_generated_with_the_extra_terms_prompt_filters_and_cache(
        tmp_path, monkeypatch, seed):
    from bias_utils.core import paths
    from bias_utils.profiles import extra_contexts as X

    # a fresh generation cache beside the converted models of the real one
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "models").symlink_to(paths.cache_dir() / "models", target_is_directory=True)
    monkeypatch.setenv("BIAS_CACHE_DIR", str(tmp_path / "cache"))
    generation = {"n_samples": 2, "max_new_tokens": 24}
    user = read_dictionary("data/examples/user_dictionary_example.csv")
    user = user[user["term"].isin(["tidy", "messy"])]
    mixed = pd.concat([seed.head(2), user], ignore_index=True)
    cs = C.build_contexts(mixed, "generated", n_contexts=2, fill_generator="smollm2-135m-instruct",
                          generation=generation)
    # the seed senses keep their published contexts, in dictionary order
    published = C.build_contexts(seed.head(2), "generated", n_contexts=2)
    pd.testing.assert_frame_equal(cs.table[cs.table["sense_id"].isin(seed.head(2)["sense_id"])], published.table)
    assert cs.table["sense_id"].drop_duplicates().tolist() == [s for s in mixed["sense_id"]
                                                               if s in set(cs.table["sense_id"])]
    report = C.generation_report(cs)
    assert report["term"].tolist() == ["tidy", "messy"] and (report["n_generated"] == 2).all()
    kept = cs.table[cs.table["term"].isin(["tidy", "messy"])].groupby("term").size()
    assert report.set_index("term")["n_kept"].to_dict() == {t: int(kept.get(t, 0)) for t in ["tidy", "messy"]}
    for r in cs.table[cs.table["term"].isin(["tidy", "messy"])].itertuples():
        assert F.contains_term(r.context, r.term) and not F.gender_markers(r.context, r.term)
    record = cs.notes.set_index("item").loc["generator", "detail"]
    assert '"prompt_template"' in record and f'"filter_version": {F.FILTER_VERSION}' in record
    # The extra terms' generation of the same words (no definition: the same prompt) finds every completion in the
    # cache and keeps the same contexts.
    rows = next((tmp_path / "cache" / "generations").glob("*/rows.jsonl"))
    before = rows.read_text()
    path = X._generate_extra_contexts("smollm2-135m-instruct", user[["dimension", "term", "direction"]],
                                     path=tmp_path / "extra.jsonl", generation=generation, n_keep=2, progress=False)
    assert rows.read_text() == before
    table, _ = X._read_extra_contexts(path)
    assert {r.term: list(r.contexts) for r in table.itertuples()} == \
        {t: cs.table.loc[cs.table["term"] == t, "context"].tolist() for t in ["tidy", "messy"]}


def test_rows_appended_by_hand_without_a_sense_id_get_contexts(seed):
    # The issue's cell: rows concatenated onto the loaded dictionary have sense_id NaN.
    by_hand = pd.concat([seed.head(3), pd.DataFrame([{"dimension": "tidiness", "term": "tidy", "direction": "high"},
                                                     {"dimension": "tidiness", "term": "messy", "direction": "low"}])],
                        ignore_index=True)
    cs = C.build_contexts(by_hand, "dictionary", n_contexts=2)
    assert {"tidy||tidiness", "messy||tidiness"} <= set(cs.table["sense_id"])
    with pytest.raises(ValueError, match=r"row 3 \('tidy'\)"):
        C.build_contexts(by_hand.assign(direction=["high", "low", "high", "up", "low"]), "dictionary")


def test_a_corpus_path_resolves_from_the_notebooks_folder(monkeypatch):
    from bias_utils.core import paths

    monkeypatch.chdir(paths.ROOT / "notebooks")  # Jupyter's working folder; the path is relative to the root
    # any text file, a line a sentence
    sentences, notes, _ = C._load_corpus("data/examples/user_dictionary_example.csv")
    assert sentences[1] == "tidiness,tidy,high" and notes[0]["status"] == "used"
    with pytest.raises(ParameterError, match=r"corpus: 'data/examples' is a folder .* \(and it is not a data key\)"):
        C._load_corpus("data/examples")


def test_chapter_02_opens_with_the_selected_sources_coverage():
    """Issue 57: chapter 02 opened with "figures follow". Its first sentence reads the report's row of the selected
    source (every number the table's: senses covered of all, contexts per sense, senses without, gendered contexts
    as a count) and the other sources' coverage; a planted uncovered sense is counted and pointed to."""
    report = pd.DataFrame({"source": ["generated", "dictionary"], "n_senses": [450, 455], "n_contexts": [2200, 1000],
                           "senses_without": [5, 0], "contexts_per_sense": [2200 / 450, 1000 / 455],
                           "share_gendered": [11 / 2200, 0.2]})
    assert C.describe_report(report, "generated") == (
        "The generated contexts (this run's) cover 450 of 455 senses, 4.89 contexts per covered sense, and leave 5 "
        "without one (listed below); 11 of its 2,200 contexts carry a gendered word, pronoun or name. Senses covered "
        "by the other sources: dictionary 455 of 455.")
    assert "leave 0 without one; 200 of its 1,000" in C.describe_report(report, "dictionary")
    assert C.describe_report(report, "corpus") == ""
