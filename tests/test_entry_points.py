"""Every public entry point and every notebook parameter refuses a bad value before any model loads.

Each case gives an entry point a value out of range, of the wrong type or inconsistent with the others, with
the model as a *name*, so that a check made only after loading would have to load it. A spy on the model
loader (``models.load_model``, calling through) and on transformers' weight reader records every load: none
may happen. The error is a ``ParameterError`` whose message starts with the parameter's name. The notebook
checks are driven from each notebook's own parameters cell, so a parameter added without a bad value here
fails this test. Files with a defect are made in the test; the untestable-axis cases load MiniLM (slow).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bias_utils.audit import bold, replication
from bias_utils.book import runs
from bias_utils.book import validation as v
from bias_utils.core import paths, results
from bias_utils.core.errors import ParameterError
from bias_utils.intrinsic_extrinsic import bold_link, completions, erasure_long_form
from bias_utils.models import loading as models
from bias_utils.models.generation import generate
from bias_utils.profiles import (
    axis_validity,
    contexts,
    dictionaries,
    gender_direction,
    layers,
    projection,
    robustness,
    space,
)
from bias_utils.profiles import population_profiles as profiles

SMOL, MINILM = "smollm2-135m-instruct", "minilm-l6"
NOTEBOOKS = sorted((paths.ROOT / "notebooks").glob("*.ipynb"))


def _basis(n_states: int, dims=("warmth", "competence"), space_name="warmth_competence") -> projection.PolarBasis:
    """A real polar basis of random directions, with a model's number of hidden states (test input, not a result)."""
    rng = np.random.default_rng(0)
    directions = rng.normal(size=(n_states, len(dims), 8))
    pinv = np.stack([np.linalg.pinv(d.T) for d in directions])
    poles = pd.DataFrame([{"dimension": d, "direction": p, "n_senses": 3} for d in dims for p in ("high", "low")])
    return projection.PolarBasis(space_name, tuple(dims), directions, pinv, tuple(range(n_states)), poles)


def _space(n_states: int) -> space.StereotypeSpace:
    basis = _basis(n_states, ("sociability", "ability"), "dimensions")
    senses = pd.DataFrame({"sense_id": ["a", "b"], "dimension": ["sociability", "ability"], "term": ["a", "b"],
                           "direction": ["high", "low"], "n_contexts": 1, "n_embedded": 1})
    return space.StereotypeSpace({"dimensions": basis}, senses, contexts.ContextSet(pd.DataFrame()), pd.DataFrame(),
                                 MINILM, "dictionary", np.zeros((2, n_states, 8)))


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


SEED = dictionaries.load_seed_dictionary()
THIN = pd.DataFrame({"dimension": ["tidiness"] * 3, "term": ["tidy", "neat", "messy"],
                     "direction": ["high", "high", "low"]})
METRICS = pd.DataFrame({"occupation": ["Nurse"], "group": ["female_dominated"], "completion": [""]})


def _broken_model(tmp: Path) -> str:
    """A model folder whose config.json is not valid JSON (line 2)."""
    (tmp / "broken-model").mkdir(exist_ok=True)
    _write(tmp / "broken-model" / "config.json", '{"model_type": "llama",\n "num_hidden_layers": 2,,}')
    return str(tmp / "broken-model")


def _entry_cases() -> list:
    """(label, call(tmp), parameter name): each call must raise a ParameterError naming the parameter."""
    def one_group(tmp):
        return str(_write(tmp / "one.json", '{"female": ["Mary", "Anna"]}'))

    def three(tmp):
        return str(_write(tmp / "three.json", '{"a": ["Mary", "Anna"], "b": ["John", "Paul"], "c": ["Otto", "Karl"]}'))

    wc7, sp7 = _basis(7), _space(7)
    return [
        # the audit (chapter 06's library call)
        ("run_audit n_boot=1", lambda t: bold.run_audit(SMOL, n_boot=1, limit=4), "n_boot"),
        ("run_audit seed=2**32", lambda t: bold.run_audit(SMOL, seed=2**32, limit=4), "seed"),
        ("run_audit seed='0'", lambda t: bold.run_audit(SMOL, seed="0", limit=4), "seed"),
        ("run_audit greedy twice", lambda t: bold.run_audit(SMOL, temperature=0, n_samples=2, limit=4), "n_samples"),
        ("run_audit max_new_tokens beyond context", lambda t: bold.run_audit(SMOL, max_new_tokens=100_000, limit=4),
         "max_new_tokens"),
        ("run_audit an encoder", lambda t: bold.run_audit(MINILM, limit=4), "model"),
        ("run_audit config.json not JSON", lambda t: bold.run_audit(_broken_model(t), limit=4), "model"),
        ("run_audit one group", lambda t: bold.run_audit(SMOL, selection={"Registered_nurse": "care"}), "selection"),
        ("run_audit limit=0", lambda t: bold.run_audit(SMOL, limit=0), "limit"),
        ("run_audit no female lexicon", lambda t: bold.run_audit(SMOL, lexicons={"male": ["he"]}, limit=4), "lexicons"),
        ("run_audit top_p=2", lambda t: bold.run_audit(SMOL, top_p=2, limit=4), "top_p"),
        ("run_audit method", lambda t: bold.run_audit(SMOL, method="fdr", limit=4), "method"),
        # generation
        ("generate seed=-1", lambda t: generate(SMOL, ["A nurse is"], seed=-1, cache=False), "seed"),
        ("generate encoder", lambda t: generate(MINILM, ["A nurse is"], cache=False), "model"),
        ("generate context", lambda t: generate(SMOL, ["A nurse is"], max_new_tokens=9000, cache=False),
         "max_new_tokens"),
        ("generate greedy", lambda t: generate(SMOL, ["A"], temperature=0, n_samples=3, cache=False), "n_samples"),
        # the space (chapters 03, 04, 08, 11)
        ("build_space source", lambda t: space.build_space(MINILM, SEED, "web"), "source"),
        ("build_space n_contexts=0", lambda t: space.build_space(MINILM, SEED, "dictionary", 0), "n_contexts"),
        ("build_space seed=2**32", lambda t: space.build_space(MINILM, SEED, "dictionary", 5, 2**32), "seed"),
        ("build_space layers=[99]", lambda t: space.build_space(MINILM, SEED, "dictionary", layers=[99]), "layers"),
        ("build_space thin pole", lambda t: space.build_space(MINILM, THIN, "dictionary"), "dictionary"),
        ("build_space encoder generator", lambda t: space.build_space(MINILM, SEED, "generated", generator=MINILM),
         "generator"),
        ("build_contexts n_contexts", lambda t: contexts.build_contexts(SEED, "dictionary", 0), "n_contexts"),
        ("build_contexts encoder model", lambda t: contexts.build_contexts(SEED, "generated", model=MINILM), "model"),
        # profiles (chapter 04)
        ("run_profiles layer=99", lambda t: profiles.run_profiles(MINILM, {"warmth_competence": wc7}, "names",
                                                                layer=99), "layer"),
        ("run_profiles layer=-99", lambda t: profiles.run_profiles(MINILM, {"warmth_competence": wc7}, "names",
                                                                 layer=-99), "layer"),
        ("run_profiles layer='all'", lambda t: profiles.run_profiles(MINILM, {"warmth_competence": wc7}, "names",
                                                                   layer="all"), "layer"),
        ("run_profiles layer=2.0", lambda t: profiles.run_profiles(MINILM, {"warmth_competence": wc7}, "names",
                                                                 layer=2.0), "layer"),
        ("run_profiles nonbinary alone", lambda t: profiles.run_profiles(MINILM, {"w": wc7}, ["nonbinary"]),
         "populations"),
        ("run_profiles nonbinary without terms", lambda t: profiles.run_profiles(MINILM, {"w": wc7},
                                                                               ["names", "nonbinary"]), "populations"),
        ("run_profiles one group", lambda t: profiles.run_profiles(MINILM, {"w": wc7}, [one_group(t)]),
         "populations"),
        ("run_profiles populations=3", lambda t: profiles.run_profiles(MINILM, {"w": wc7}, 3), "populations"),
        ("run_profiles templates", lambda t: profiles.run_profiles(MINILM, {"w": wc7}, "names", ["no slot"]),
         "templates"),
        ("run_profiles templates as a string", lambda t: profiles.run_profiles(MINILM, {"w": wc7}, "names",
                                                                             "this is {word}"), "templates"),
        ("run_profiles limit=1", lambda t: profiles.run_profiles(MINILM, {"w": wc7}, "names", limit=1), "limit"),
        ("run_profiles limit='5'", lambda t: profiles.run_profiles(MINILM, {"w": wc7}, "names", limit="5"), "limit"),
        ("run_profiles kind", lambda t: profiles.run_profiles(MINILM, {"w": wc7}, "names", kind="people"), "kind"),
        ("run_profiles bases", lambda t: profiles.run_profiles(MINILM, {}, "names"), "bases"),
        # the direction's check and the link (chapters 04, 11)
        ("occupation_validity layer", lambda t: gender_direction.occupation_validity(MINILM, wc7, layer="all"),
         "layer"),
        ("occupation_validity n_boot", lambda t: gender_direction.occupation_validity(MINILM, wc7, n_boot=0), "n_boot"),
        ("run_link layer", lambda t: bold_link.run_link(SMOL, METRICS, _basis(31), layer=31), "layer"),
        ("run_link correction", lambda t: bold_link.run_link(SMOL, METRICS, _basis(31), correction=0), "correction"),
        ("run_link n_boot=100.0", lambda t: bold_link.run_link(SMOL, METRICS, _basis(31), n_boot=100.0), "n_boot"),
        ("run_link seed", lambda t: bold_link.run_link(SMOL, METRICS, _basis(31), seed=-1), "seed"),
        ("run_link verdict", lambda t: bold_link.run_link(SMOL, METRICS, _basis(31), direction_verdict="yes"),
         "direction_verdict"),
        # 10 relabellings leave no cut-off for a 95% interval; the fits would read the error as a design too small
        ("run_link n_permutations", lambda t: bold_link.run_link(SMOL, METRICS, _basis(31), n_permutations=10),
         "n_permutations"),
        ("link_statistics n_permutations", lambda t: bold_link._link_statistics(pd.DataFrame(), n_permutations=10),
         "n_permutations"),
        # Table 2 and the axis null (chapter 03)
        ("direction_prediction layer", lambda t: space.direction_prediction(MINILM, sp7, layer=7), "layer"),
        ("direction_prediction n_boot", lambda t: space.direction_prediction(MINILM, sp7, n_boot=1), "n_boot"),
        ("direction_prediction term_contexts", lambda t: space.direction_prediction(MINILM, sp7, term_contexts="web"),
         "term_contexts"),
        ("axis_validity n_permutations", lambda t: axis_validity.axis_validity(MINILM, sp7, n_permutations=0),
         "n_permutations"),
        ("axis_validity alpha", lambda t: axis_validity.axis_validity(MINILM, sp7, alpha=2), "alpha"),
        ("axis_validity limit", lambda t: axis_validity.axis_validity(MINILM, sp7, limit=0), "limit"),
        # layers and robustness (chapters 05, 10)
        ("layers_by_context sources", lambda t: layers.layers_by_context(MINILM, SEED, "generated"), "sources"),
        ("layers_by_context n_boot", lambda t: layers.layers_by_context(MINILM, SEED, ["dictionary"], n_boot=1),
         "n_boot"),
        ("layers_by_context populations", lambda t: layers.layers_by_context(MINILM, SEED, ["dictionary"],
                                                                           populations=["nonbinary"]), "populations"),
        ("collect_curve_inputs sources", lambda t: robustness.collect_curve_inputs(MINILM, SEED, sources=["web"]),
         "sources"),
        ("collect_curve_inputs three groups", lambda t: robustness.collect_curve_inputs(MINILM, SEED, [three(t)],
                                                                                      sources=["dictionary"]),
         "populations"),
        ("collect_curve_inputs term_limit", lambda t: robustness.collect_curve_inputs(MINILM, SEED, term_limit=0,
                                                                                    sources=["dictionary"]),
         "term_limit"),
        ("specification_curve n_permutations", lambda t: robustness.specification_curve(None, n_permutations=0),
         "n_permutations"),
        ("specification_curve alpha", lambda t: robustness.specification_curve(None, alpha=1.5), "alpha"),
        # completions (chapter 08) and the replication (chapter 07)
        ("completion_embeddings a server", lambda t: completions.completion_embeddings(
            "openai:http://127.0.0.1:1/v1", pd.DataFrame({"prompt": ["a"], "completion": ["b"]})), "model"),
        ("completion_embeddings part", lambda t: completions.completion_embeddings(
            SMOL, pd.DataFrame({"prompt": ["a"], "completion": ["b"]}), part="middle"), "part"),
        ("completion_projection_stats n_boot", lambda t: completions.completion_projection_stats(
            pd.DataFrame(), n_boot=1), "n_boot"),
        ("replicate n_boot", lambda t: replication.replicate_published_audit(n_boot=1), "n_boot"),
        # the long form under erasure: its settings and nouns before any text is written
        ("long form under erasure instructions", lambda t: erasure_long_form.long_form_under_erasure(
            SMOL, None, occupations=["nurse"], instructions=["no slot"]), "instructions"),
        ("long form under erasure n_samples", lambda t: erasure_long_form.long_form_under_erasure(
            SMOL, None, occupations=["nurse"], n_samples=0), "n_samples"),
        ("long form under erasure occupations", lambda t: erasure_long_form.long_form_under_erasure(
            SMOL, None, occupations=["wizard"]), "occupations"),
        ("replicate seed", lambda t: replication.replicate_published_audit(seed=2**32), "seed"),
        # folders
        ("output_folder not writable", lambda t: results.output_folder(
            "m--abcdef123456--fp32", _write(t / "a-file", "x") / "sub"), "output_dir"),
    ]


@pytest.mark.parametrize("label, call, name", _entry_cases(), ids=[c[0] for c in _entry_cases()])
def test_each_entry_point_refuses_before_any_model_loads(label, call, name, tmp_path, loads):
    started = time.monotonic()
    with pytest.raises(ParameterError, match=rf"^{name}\b") as caught:
        call(tmp_path)
    assert not loads, f"{label}: loaded {loads} before refusing"
    assert time.monotonic() - started < 30, label  # a check, not a run
    print(f"{label}: {caught.value}")


# --------------------------------------------------------------------------- every notebook parameter

#: One invalid value per notebook parameter (any notebook): a parameter without one here fails the test below.
BAD = {
    "model": "no-such-model", "context_source": "web", "layer": "first", "dictionary_path": "nowhere.csv",
    "populations": [], "templates": ["no slot"], "n_contexts": 0, "seed": 2**32, "output_dir": 3, "limit": 0,
    "term_limit": 0, "n_permutations": 1, "n_boot": 1, "sources": "generated", "generator": "no-such-model",
    "corpus": "nowhere.txt", "term_contexts": "web", "selection": {"Registered_nurse": "care"}, "n_samples": 0,
    "max_new_tokens": 100_000, "temperature": -1, "top_p": 2, "top_k": 0, "lexicons": {"male": "he"},
    "neutral_lexicons": {}, "n_group_permutations": 1, "correction": 0, "results_dir": "nowhere", "models": "x",
    "n_perm_test": 1, "alpha": 2, "dtype": "int8", "next_word_templates": ["no slot"], "sampled_check": "yes",
    "next_word_lexicons": {"female": "she"}, "layer_step": 0, "long_form": "yes", "long_form_instructions": ["no slot"],
    "long_form_n_samples": 0, "long_form_max_new_tokens": 0, "long_form_erasure": "yes",
}


def _notebook_parameters() -> list[tuple[str, str]]:
    return [(nb.stem, name) for nb in NOTEBOOKS for name in runs.declared_parameters(nb)]


@pytest.mark.parametrize("notebook, name", _notebook_parameters())
def test_every_notebook_parameter_has_a_refused_value(notebook, name, loads):
    assert name in BAD, f"{notebook}: give parameter {name!r} an invalid value in BAD"
    check = partial(v.check, notebook)
    with pytest.raises(ParameterError, match=rf"^{name}\b"):
        check(**{name: BAD[name]})
    assert not loads


def test_seed_layer_and_greedy_rules_are_one_rule_everywhere():
    """The early check and the projection give the same rule and the same message for a layer."""
    basis = _basis(7)
    with pytest.raises(ParameterError) as late:
        projection.project(basis, np.zeros((1, 7, 8)), 99)
    with pytest.raises(ParameterError) as early:
        v.check("03_projection_accuracy", model=MINILM, layer=99, context_source="dictionary")
    assert str(late.value) == str(early.value)
    assert "from 0 to 6 (or -7 to -1 from the end" in str(early.value)
    v.check("03_projection_accuracy", model=MINILM, layer="all", context_source="dictionary")  # 03 shows every layer
    with pytest.raises(ParameterError, match="'all' gives one value per layer"):
        v.check("04_profiles", model=MINILM, layer="all", context_source="dictionary")
    with pytest.raises(ParameterError, match=r"^seed must be an integer from 0 to 2\*\*32 - 1 = 4,294,967,295"):
        v.check("06_bold_audit", seed=2**32)


@pytest.mark.parametrize("name", [SMOL, MINILM])
def test_facts_read_from_the_files_agree_with_the_builtin_table(name, loads):
    """The GGUF header (SmolLM2) and the folder's config.json (MiniLM) give the layer count, kind and context length
    the built-in table declares, read without loading weights."""
    from bias_utils.models.builtin_models import BUILTIN_MODELS, builtin_weights

    b = BUILTIN_MODELS[name]
    facts = models._model_facts(str(builtin_weights(b)))
    assert (facts.kind, facts.n_layers, facts.context_length) == (b.kind, b.n_layers, b.context_length)
    assert facts.n_states == b.n_layers + 1 and not loads


# --------------------------------------------------------------------------- populations: kinds and names


@pytest.mark.parametrize("content, kind", [
    ({"f": ["LaToya", "McKenzie"], "m": ["DeShawn", "O'Brien"]}, "name"),
    ({"f": ["woman", "girl"], "m": ["man", "boy"]}, "noun"),
])
def test_a_kind_not_stated_is_inferred_and_said(tmp_path, content, kind):
    from bias_utils.profiles import populations

    path = _write(tmp_path / "groups.json", json.dumps(content))
    with pytest.warns(UserWarning, match=rf"does not state its kind; .*read as {kind}s"):
        assert populations.population_kind(str(path)) == kind


@pytest.mark.parametrize("content, fragment", [
    ({"f": ["mary", "linda"], "m": ["john", "james"]}, r"first names written in lower case \(mary"),
    ({"f": ["Mary", "woman"], "m": ["John", "man"]}, r"2 word\(s\) look like names \(Mary, John\)"),
])
def test_an_ambiguous_kind_is_refused(tmp_path, content, fragment):
    path = _write(tmp_path / "groups.json", json.dumps(content))
    with pytest.raises(ParameterError, match=rf"^populations: .*groups\.json: the kind is not stated .*{fragment}"):
        v._check_populations([str(path)])


def test_population_files_never_replace_each_other_or_a_builtin(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = _write(tmp_path / "a" / "groups.json", '{"kind": "noun", "groups": {"f": ["aunt", "niece"], '
                                                   '"m": ["uncle", "nephew"]}}')
    second = _write(tmp_path / "b" / "groups.csv", "group,word,kind\nf,queen,noun\nf,bride,noun\nm,king,noun\n"
                                                   "m,groom,noun\n")
    names = _write(tmp_path / "names.json", '{"kind": "name", "groups": {"f": ["Ada", "Eva"], "m": ["Bo", "Al"]}}')
    pops, _ = profiles._resolve_populations([str(first), str(second), "names", str(names)])
    assert list(pops) == [str(first), str(second), "names", str(names)]
    assert len(pops["names"]["female"]) == 100 and pops[str(names)]["f"] == ["Ada", "Eva"]
    assert list(profiles._resolve_populations([str(first)])[0]) == ["groups"]  # a unique stem names it


# --------------------------------------------------------------------------- folders and the tables' model


def test_a_folder_of_another_model_is_refused_and_tables_carry_the_model(tmp_path, monkeypatch):
    folder = results.output_folder("minilm-l6--53aa51172d14--fp32", tmp_path / "out")
    results.write_table(pd.DataFrame({"x": [1]}), folder / "t")
    assert pd.read_csv(folder / "t.csv").columns.tolist() == ["model_id", "x"]
    assert pd.read_csv(folder / "t.csv")["model_id"].tolist() == ["minilm-l6--53aa51172d14--fp32"]
    with pytest.raises(ParameterError, match=rf"^output_dir: {tmp_path / 'out'} holds the results of "
                                             r"minilm-l6--53aa51172d14--fp32; this run is of smollm2"):
        results.output_folder("smollm2-135m-instruct--b179c9523d0e--fp32", tmp_path / "out")
    with pytest.raises(ParameterError, match=r"^output_dir: .* holds the results of minilm-l6--.*this run is of "
                                             r"smollm2-135m-instruct and would replace them"):
        v.check("04_profiles", model=SMOL, output_dir=str(tmp_path / "out"))  # before the model loads
    monkeypatch.setenv(results._OVERWRITE_ENV, "1")
    results.output_folder("smollm2-135m-instruct--b179c9523d0e--fp32", tmp_path / "out")
    assert results.folder_model(folder) == "smollm2-135m-instruct--b179c9523d0e--fp32"


# --------------------------------------------------------------------------- contexts a user gave, or the project has


def test_user_contexts_are_used_under_generated():
    user = pd.DataFrame({"dimension": ["tidiness"] * 6, "term": ["tidy", "neat", "orderly", "messy", "sloppy", "x"],
                         "direction": ["high"] * 3 + ["low"] * 3,
                         "contexts": [["a tidy room"], ["a neat desk"], ["an orderly queue"], ["a messy kitchen"],
                                      ["sloppy work"], ["no such word here"]]})
    built = contexts.build_contexts(user, "generated", fill_generator=None)
    assert built.table["term"].tolist() == ["tidy", "neat", "orderly", "messy", "sloppy"]
    assert "used as given" in built.notes["detail"].iloc[0]
    assert built.dropped["reason"].tolist() == ["the dictionary's own context does not contain the term"]
    sentence = contexts.describe_generation(contexts.generation_report(built))
    assert sentence.startswith("5 senses had no published contexts; 5 of them use the 5 contexts the dictionary "
                               "gives them that contain the term (of 5 given)")


def test_the_readme_example_needs_no_generation(loads):
    """The example's senses have contexts in the project's files (same generator, prompt, settings, seed)."""
    from bias_utils.profiles.extra_contexts import known_generated_contexts

    user = dictionaries.load_dictionary("data/examples/user_dictionary_example.csv")
    built = contexts.build_contexts(user, "generated", known=known_generated_contexts())
    report = contexts.generation_report(built)
    assert report["term"].tolist() == user["term"].tolist() and (report["n_kept"] > 0).all()
    assert not loads
    # other settings: the files do not apply
    assert known_generated_contexts(seed=1) == {} and known_generated_contexts(n_contexts=3) == {}


# --------------------------------------------------------------------------- untestable axes (MiniLM)

def _axes_dictionary(path: Path) -> Path:
    """tidiness (testable), frugality (its high pole keeps one term: two made-up words have no context), and
    neatness (its low pole keeps none); contexts given for the real words, so the test does not depend on WordNet."""
    own = {"tidy": "a tidy room", "neat": "a neat desk", "orderly": "an orderly queue", "messy": "a messy kitchen",
           "sloppy": "sloppy work", "untidy": "an untidy shed", "thrifty": "a thrifty buyer",
           "wasteful": "a wasteful habit", "lavish": "a lavish party", "extravagant": "an extravagant gift",
           "spotless": "a spotless floor", "pristine": "a pristine lake", "immaculate": "an immaculate shirt"}
    rows = ["dimension,term,direction,contexts"]
    for dim, high, low in (("tidiness", ["tidy", "neat", "orderly"], ["messy", "sloppy", "untidy"]),
                           ("frugality", ["thrifty", "blorftish", "zindlous"], ["wasteful", "lavish", "extravagant"]),
                           ("neatness", ["spotless", "pristine", "immaculate"], ["quarpish", "snorbled", "vextile"])):
        rows += [f"{dim},{t},{direction},{own.get(t, '')}"
                 for direction, terms in (("high", high), ("low", low)) for t in terms]
    return _write(path, "\n".join(rows) + "\n")


@pytest.mark.slow
def test_a_pole_left_below_the_rule_makes_its_axis_untestable_and_the_run_finishes(tmp_path):
    dictionary = dictionaries.load_dictionary(str(_axes_dictionary(tmp_path / "axes.csv")))
    sp = space.build_space(MINILM, dictionary, "dictionary", 2)
    assert sp.bases["dimensions"].dimensions == ("tidiness",)
    lost = sp.untestable.set_index("dimension")
    assert lost.loc["frugality", "direction"] == "high" and lost.loc["frugality", "usable_terms"] == "thrifty"
    assert lost.loc["neatness", "n_usable"] == 0
    sentence = space.describe_untestable(sp)
    assert "frugality is untestable" in sentence and "1 of its 3 terms kept a usable context (thrifty)" in sentence
    poles = space.pole_table(sp)
    assert set(poles.loc[~poles["testable"], "dimension"]) == {"frugality", "neatness"}
    dropped = space.dropped_senses(sp)
    assert dropped["reason"].str.contains("axis frugality is untestable").sum() == 4  # thrifty + the low pole
    res = profiles.run_profiles(models.load_model(MINILM), sp.bases, "names", limit=3)
    assert set(res.stats["dimension"]) == {"tidiness"}


@pytest.mark.slow
def test_a_dictionary_with_only_untestable_axes_fails_before_embedding(tmp_path, loads):
    """The poles emptied before embedding: the error names them, and the senses that reached no axis are written
    first into the results folder (``out``), the file named in the message with the fix; without a folder the
    error carries them."""
    dictionary = dictionaries.load_dictionary(str(_axes_dictionary(tmp_path / "axes.csv")))
    only = dictionary[dictionary["dimension"] != "tidiness"]
    csv = tmp_path / "out" / "dropped_senses.csv"
    with pytest.raises(ParameterError, match=(
            r"no axis can be built from the dictionary's words: .*frugality high: 1 of its 3 terms are words "
            r"\(thrifty\).*\)\. What did not reach an axis \(\d+ senses and contexts, each with its stage and "
            rf"reason\) is in {csv}\. Give these terms contexts of their own \(a contexts column in the dictionary\)")):
        space.build_space(MINILM, only, "dictionary", 2, out=tmp_path / "out")
    assert not loads
    written = pd.read_csv(csv, keep_default_na=False)
    lost = written.loc[written["stage"] == "contexts", "term"]
    # the made-up words, marked before any context is sought; "vextile" reads as vex + tile, a compound of words
    assert set(lost) == {"blorftish", "zindlous", "quarpish", "snorbled"}
    assert written.loc[written["stage"] == "contexts", "reason"].str.startswith("not a word: ").all()
    assert written["reason"].str.contains("axis frugality is untestable").any()
    with pytest.raises(ParameterError, match=r"is the error's dropped table") as caught:
        space.build_space(MINILM, only, "dictionary", 2)
    pd.testing.assert_frame_equal(caught.value.dropped.reset_index(drop=True), written, check_dtype=False)


@pytest.mark.slow
def test_chapter_03_writes_what_reached_no_axis_before_it_stops(tmp_path):
    """Chapter 03 under papermill on a dictionary whose every axis loses a pole: the run stops naming the file of
    what reached no axis, and the file is there."""
    dictionary = _axes_dictionary(tmp_path / "axes.csv")
    only = [line for line in dictionary.read_text(encoding="utf-8").splitlines() if not line.startswith("tidiness,")]
    _write(dictionary, "\n".join(only) + "\n")
    proc = subprocess.run([sys.executable, "-m", "papermill", "--log-level", "ERROR",
                           str(paths.ROOT / "notebooks" / "03_projection_accuracy.ipynb"), str(tmp_path / "03.ipynb"),
                           "-p", "model", MINILM, "-p", "dictionary_path", str(dictionary), "-p", "context_source",
                           "dictionary", "-p", "n_contexts", "2", "-p", "output_dir", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "PYTHONPATH": str(paths.ROOT)})
    assert proc.returncode != 0
    csv = tmp_path / "out" / "dropped_senses.csv"
    assert f"is in {csv}. Give these terms contexts of their own" in proc.stderr + proc.stdout
    assert set(pd.read_csv(csv)["stage"]) >= {"contexts", "axis"}


def _twins(path: Path, shared: int) -> Path:
    """tidiness (as in :func:`_axes_dictionary`) beside orderliness, which shares ``shared`` of its six terms with it
    on the same poles (the rest its own words), every term with a context of its own."""
    text = _axes_dictionary(path.with_name("axes.csv")).read_text(encoding="utf-8").splitlines()
    tidy = [line for line in text if line.startswith("tidiness,")]
    own = ["orderliness,spotless,high,a spotless floor", "orderliness,pristine,high,a pristine lake",
           "orderliness,immaculate,high,an immaculate shirt", "orderliness,wasteful,low,a wasteful habit",
           "orderliness,lavish,low,a lavish party", "orderliness,extravagant,low,an extravagant gift"]
    keep = [0, 3, 1, 4, 2, 5][:shared]  # tidy, messy, neat, sloppy, orderly: both poles keep shared terms
    twin = [tidy[i].replace("tidiness,", "orderliness,") if i in keep else own[i] for i in range(6)]
    return _write(path, "\n".join([text[0], *tidy, *twin]) + "\n")


TWINS_REFUSED = (r"^{name}: dimensions that share at least half of either one's terms are one axis measured twice: "
                 r".*the sign of each one's values is decided by the basis, not by its words .*: 'tidiness' and "
                 r"'orderliness' share 5 of their 6 and 6 terms \(tidy, neat, orderly, messy, sloppy; on the same "
                 r"poles\)\. Merge them into one dimension, give each terms of its own \(fewer than half shared\), or "
                 r"profile each in a run of its own \(a dictionary with only one of them\)$")


def test_two_dimensions_sharing_most_terms_are_refused_before_any_embedding(tmp_path, loads):
    path = _twins(tmp_path / "twins.csv", 5)
    with pytest.raises(ParameterError, match=TWINS_REFUSED.format(name="dictionary_path")):
        v.check("04_profiles", dictionary_path=str(path), context_source="dictionary")
    with pytest.raises(ParameterError, match=TWINS_REFUSED.format(name="dictionary")):
        space.build_space(MINILM, dictionaries.load_dictionary(str(path)), "dictionary", 2)
    v.check("04_profiles", dictionary_path=str(_twins(tmp_path / "two.csv", 2)), context_source="dictionary")
    assert not loads


@pytest.mark.slow
def test_chapter_04_stops_at_its_check_on_look_alike_dimensions_and_writes_no_profile(tmp_path):
    path = _twins(tmp_path / "twins.csv", 5)
    proc = subprocess.run([sys.executable, "-m", "papermill", "--log-level", "ERROR",
                           str(paths.ROOT / "notebooks" / "04_profiles.ipynb"), str(tmp_path / "04.ipynb"),
                           "-p", "model", MINILM, "-p", "dictionary_path", str(path), "-p", "context_source",
                           "dictionary", "-p", "output_dir", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "PYTHONPATH": str(paths.ROOT)})
    assert proc.returncode != 0
    assert ("ParameterError: dictionary_path: dimensions that share at least half of either one's terms are one axis "
            "measured twice") in proc.stderr + proc.stdout
    assert "Merge them into one dimension" in proc.stderr + proc.stdout
    assert not list((tmp_path / "out").glob("profile_*"))  # no profile, so no gap of an axis the basis signed


@pytest.mark.slow
def test_axes_that_share_a_few_terms_get_a_warning_with_their_correlation(tmp_path):
    """Two of six terms shared (below the refusal): built, with a warning that their gaps are not independent."""
    path = _twins(tmp_path / "twins.csv", 2)
    with pytest.warns(UserWarning, match=r"axes tidiness and orderliness share 2 term\(s\) \(messy, tidy\); their "
                                         r"values correlate r = -?\d\.\d\d"):
        sp = space.build_space(MINILM, dictionaries.load_dictionary(str(path)), "dictionary", 2)
    assert sp.bases["dimensions"].dimensions == ("tidiness", "orderliness")


# --------------------------------------------------------------------------- a parameter the notebook lacks


@pytest.mark.slow
def test_papermill_with_a_misspelled_parameter_stops_at_the_check(tmp_path):
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "papermill", "--log-level", "ERROR",
                           str(paths.ROOT / "notebooks" / "04_profiles.ipynb"), str(tmp_path / "out.ipynb"),
                           "-p", "modle", MINILM], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": str(paths.ROOT)})
    assert proc.returncode != 0
    assert "ParameterError: modle: not a parameter of this notebook (did you mean 'model'?); its parameters are " \
           "model, dtype, context_source" in proc.stderr + proc.stdout
    print(f"stopped after {time.monotonic() - started:.0f} s")


# --------------------------------------------------------------------------- messages that name the cause and the fix


def test_a_misspelled_selection_name_says_which_one_was_meant(loads):
    for call in (lambda: v.check("06_bold_audit", selection="audti"), lambda: bold.run_audit(SMOL, selection="audti")):
        with pytest.raises(ParameterError, match=r"^selection: 'audti' is neither a named selection \('audit', "
                                                 r"'categories'\) nor a file; did you mean 'audit'\?$"):
            call()
    with pytest.raises(ParameterError, match=r"did you mean 'categories'\?$"):
        v.check("06_bold_audit", selection="Categories")
    with pytest.raises(ParameterError, match=r"^selection: 'nurses\.csv' does not exist"):  # a file, not a name
        v.check("06_bold_audit", selection="nurses.csv")
    assert not loads


def _without_tokenizer(folder: Path, *keep: str) -> str:
    """A model folder with MiniLM's config and weights (links) but none of its tokenizer files (``keep``: files
    written empty-handed, e.g. a tokenizer_config.json that names no vocabulary)."""
    from bias_utils.models.builtin_models import BUILTIN_MODELS, builtin_weights

    folder.mkdir()
    weights = builtin_weights(BUILTIN_MODELS[MINILM])
    for name in ("config.json", "model.safetensors"):
        (folder / name).symlink_to(weights / name)
    for name in keep:
        _write(folder / name, "{}")
    return str(folder)


def test_a_model_folder_without_a_tokenizer_is_refused_as_such(tmp_path, loads):
    folder = _without_tokenizer(tmp_path / "minilm-no-tokenizer")
    message = (rf"^model: {folder} is a model folder without a tokenizer \(none of tokenizer\.json, .*vocab\.txt.*\): "
               r"without one every word is the unknown token\. Copy the tokenizer files that came with the model into "
               r"the folder$")
    for call in (lambda: v.check("03_projection_accuracy", model=folder, context_source="dictionary"),
                 lambda: v.check("04_profiles", model=folder, context_source="dictionary"),
                 lambda: space.build_space(folder, SEED, "dictionary")):
        with pytest.raises(ParameterError, match=message):
            call()
    assert not loads


@pytest.mark.slow
def test_a_tokenizer_of_the_special_tokens_alone_is_refused_when_the_model_loads(tmp_path):
    """A folder whose only tokenizer file names no vocabulary passes the file check; transformers then builds a
    tokenizer of the special tokens, which loading refuses (every word would be [UNK])."""
    folder = _without_tokenizer(tmp_path / "minilm-config-only", "tokenizer_config.json")
    with pytest.raises(models.ModelError, match=r"has no tokenizer: the one transformers built from .* knows 5 tokens, "
                                                r"the model 30,522.* Copy the tokenizer files"):
        models.load_model(folder)


@pytest.mark.parametrize("check, chapter", [(partial(v.check, "08_completion_profiles"), "08"),
                                            (partial(v.check, "11_intrinsic_extrinsic"), "11")])
def test_chapters_that_read_completions_refuse_an_encoder_instead_of_sending_it_to_06(check, chapter, loads):
    with pytest.raises(ParameterError, match=rf"^model: 'minilm-l6' is an encoder .* cannot give text: chapter "
                                             rf"{chapter} \(it reads the BOLD completions chapter 06 writes, and only "
                                             r"a decoder writes them\) needs a decoder"):
        check(model=MINILM)
    check(model=SMOL)
    assert not loads


def test_the_kind_of_a_population_file_is_said_once_per_run(tmp_path):
    """The notebook's check, the run's own check and the embedding each read the file: one warning, not four."""
    from bias_utils.profiles import populations

    path = str(_write(tmp_path / "groups.json", json.dumps({"f": ["woman", "girl"], "m": ["man", "boy"]})))
    with pytest.warns(UserWarning) as said:
        v.check("04_profiles", model=MINILM, populations=[path], context_source="dictionary")
        profiles.check_profile_run(MINILM, [path])
        profiles._resolve_populations([path])
        populations.load_populations(path)
    assert [str(w.message) for w in said if "does not state its kind" in str(w.message)] == [
        f"{path}: the file does not state its kind; no word is a capitalised single word, so they are read as nouns, "
        "after \"the\" (\"this is the woman\") (state it with a kind column, or {\"kind\": \"name\" or \"noun\", "
        "\"groups\": {...}} in JSON)"]
    _write(tmp_path / "groups.json", json.dumps({"f": ["woman", "aunt"], "m": ["man", "uncle"]}))
    with pytest.warns(UserWarning, match="does not state its kind"):  # an edited file is read anew
        v.check("04_profiles", model=MINILM, populations=[path], context_source="dictionary")


@pytest.mark.slow
def test_a_population_of_unknown_tokens_names_the_cause(tmp_path):
    """Every entry an emoji: MiniLM's tokenizer reads each as [UNK]; the run stops naming that and the way out."""
    path = _write(tmp_path / "emoji.json", json.dumps({"kind": "noun", "groups": {"f": ["🙂", "🌷", "🌸"],
                                                                                "m": ["🚗", "🔧", "⚽"]}}))
    with pytest.raises(ParameterError, match=(
            r"^no population left to test: emoji: among the embedded words, group\(s\) 'f' \(0 words\), 'm' \(0 words\)"
            r"; 2 per group needed\. 6 word\(s\) could not be embedded in any template \(🙂, 🌷, 🌸, 🚗, 🔧, ⚽\): "
            r"1 of its 1 tokens are the unknown token '\[UNK\]' .*\. Give words this model's tokenizer knows, or use "
            r"a model whose tokenizer has no unknown token")):
        profiles.run_profiles(models.load_model(MINILM), {"warmth_competence": _basis(7)}, [str(path)])


# --------------------------------------------------------------------------- words that are not words


def _with_nonwords(path: Path, high: list[str]) -> Path:
    """tidiness with ``high`` as its high pole (real words with contexts of their own, made-up ones without) and
    three real low terms."""
    own = {"tidy": "a tidy room", "neat": "a neat desk", "orderly": "an orderly queue", "messy": "a messy kitchen",
           "sloppy": "sloppy work", "untidy": "an untidy shed"}
    rows = [f"tidiness,{t},high,{own.get(t, '')}" for t in high]
    rows += [f"tidiness,{t},low,{own[t]}" for t in ("messy", "sloppy", "untidy")]
    return _write(path, "dimension,term,direction,contexts\n" + "\n".join(rows) + "\n")


def test_a_pole_of_words_that_are_not_words_is_refused_before_generating(tmp_path, loads):
    """Two of the high pole's terms are made up: WordNet does not know them and MiniLM's tokenizer splits each into
    four pieces. They are left out before any context is generated, the pole keeps two terms, and with no axis left
    the build stops (the thin-pole rule), writing what reached no axis and naming the made-up words."""
    path = _with_nonwords(tmp_path / "tidy.csv", ["tidy", "neat", "brrzzkt", "blorftish"])
    with pytest.warns(UserWarning, match=r"2 term\(s\) are not words, left out before their contexts are found: "
                                         r"brrzzkt \(tidiness high\), blorftish \(tidiness high\)"):
        with pytest.raises(ParameterError, match=(
                r"^no axis can be built from the dictionary's words: .*tidiness high: 2 of its 4 terms are words "
                r"\(tidy, neat\)")):
            space.build_space(MINILM, dictionaries.load_dictionary(str(path)), "generated", 2, out=tmp_path / "out")
    assert not loads  # nothing generated, nothing embedded: the tokenizer alone was read
    dropped = pd.read_csv(tmp_path / "out" / "dropped_senses.csv", keep_default_na=False).set_index("term")
    assert dropped.loc["brrzzkt", "reason"].startswith(
        "not a word: WordNet does not know it, and the model's tokenizer splits it into 4 pieces (br, ##rz, ##z, "
        "##kt): left out before its contexts are found (give it contexts of its own, sentences that use it, to keep "
        "it)")
    assert dropped.loc["blorftish", "stage"] == "contexts"
    assert dropped.loc["tidy", "reason"].startswith("axis tidiness is untestable (its high pole: 2 of its 4 terms")


@pytest.mark.slow
def test_a_word_that_is_not_a_word_is_left_out_with_a_warning_and_the_axis_kept(tmp_path):
    path = _with_nonwords(tmp_path / "tidy.csv", ["tidy", "neat", "orderly", "brrzzkt"])
    with pytest.warns(UserWarning, match=r"1 term\(s\) are not words, .*: brrzzkt \(tidiness high\); a pole left with "
                                         r"fewer than 3 terms makes its axis untestable"):
        sp = space.build_space(MINILM, dictionaries.load_dictionary(str(path)), "generated", 2)
    assert sp.bases["dimensions"].dimensions == ("tidiness",) and "brrzzkt" not in set(sp.senses["term"])
    dropped = space.dropped_senses(sp)
    assert dropped.loc[dropped["term"] == "brrzzkt", "reason"].str.startswith("not a word: ").all()
    # the same word with a sentence of its own is the user's word: kept
    given = dictionaries.load_dictionary(str(path)).assign(
        contexts=lambda d: d["contexts"].where(d["term"] != "brrzzkt", '["The black cat was brrzzkt the red fox."]'))
    assert "brrzzkt" in set(space.build_space(MINILM, given, "generated", 2).senses["term"])
