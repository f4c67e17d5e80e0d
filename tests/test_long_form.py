"""The long-form measure (``audit.long_form``): its counts against a hand count, a planted share recovered through the
real generation engine from a toy server, the engine's cache and resume rules, the checks before a model loads, and
the real model."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bias_utils.audit import long_form as lf
from bias_utils.core import lexicon, tables
from bias_utils.core.errors import ParameterError
from bias_utils.models.endpoints import OpenAIEndpoint

FIXTURES = Path(__file__).parent / "fixtures"

# --------------------------------------------------------------------------- counts


def test_counts_equal_a_hand_count_on_five_texts():
    """Golden: five texts whose words were counted by hand (``tests/fixtures/long_form_hand_count.csv``): the audit's
    tokenisation ("SHE'S" is she, "his/her" both, "Herbert" and "Theyre" neither), the neopronouns among the neutral
    words and on their own, the "they" forms on their own."""
    hand = pd.read_csv(FIXTURES / "long_form_hand_count.csv")
    found = lf.text_counts(hand["text"])
    columns = ["female_words", "male_words", "neutral_words", "they_words", "neopronoun_words"]
    assert found[columns].to_dict("records") == hand[columns].to_dict("records")
    assert found["any_gendered"].tolist() == [True, True, False, True, True]
    assert found.loc[4, "female_words_list"] == "her,she,sister,lady"


def test_an_instruction_takes_an_before_a_vowel_letter():
    assert lf.instruction_text("Write a short biography of a {occupation}.", "engineer") == (
        "Write a short biography of an engineer.")
    assert lf.instruction_text("A {occupation} at work.", "accountant") == "An accountant at work."
    assert lf.instruction_text("Tell a story about a {occupation}.", "nurse") == "Tell a story about a nurse."
    assert lf.instruction_text("Write about the {occupation}.", "engineer") == "Write about the engineer."


def test_the_hand_check_of_they_gives_the_counts_the_module_states():
    """The recorded reading (``tests/fixtures/long_form_they_check.csv``: 30 "they" forms of SmolLM2's default texts,
    each in its context, read as the one person, a group or unclear) gives :data:`THEY_READING`, and the chapter's
    sentence says it."""
    check = pd.read_csv(FIXTURES / "long_form_they_check.csv")
    assert len(check) == 30 and set(check["instruction"]) <= set(lf.INSTRUCTIONS)
    assert set(check["word"]) <= set(lexicon.THEY_WORDS)
    assert all(f"[[{w}]]" in c.lower() for w, c in zip(check["word"], check["context"]))
    assert check["reading"].value_counts().to_dict() == {k: v for k, v in lf.THEY_READING.items() if v}
    assert lf.they_reading_text().startswith('of 30 "they" forms in SmolLM2-135M-Instruct\'s texts read by hand, 19 '
                                             "referred to the one person the instruction named, 7 to a group")


# --------------------------------------------------------------------------- a toy model with a planted share

#: The planted shares per occupation: female among the gendered words, "they" among all three, and the chance that a
#: text has no pronoun at all.
_PLANTED = {"nurse": (0.9, 0.1), "baker": (0.6, 0.3), "plumber": (0.2, 0.0), "chef": (0.4, 0.2),
            "janitor": (0.1, 0.1), "teacher": (0.75, 0.05)}
_SILENT = 0.25
_PRONOUNS = 8


class _Toy(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat server whose texts follow :data:`_PLANTED`: each text draws, from the request's seed,
    whether it has pronouns (1 - :data:`_SILENT`), then :data:`_PRONOUNS` pronouns, each "they" with the planted
    probability and otherwise female with the planted share. It counts the requests it answers."""

    requests = 0

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][0]["content"]
        noun = next(n for n in _PLANTED if re.search(rf"\b{n}\b", prompt))
        female, they = _PLANTED[noun]
        rng = np.random.default_rng(body["seed"])
        words = []
        if rng.random() >= _SILENT:
            for _ in range(_PRONOUNS):
                u = rng.random()
                words.append("they" if u < they else "she" if rng.random() < female else "he")
        text = f"The {noun} works all day. " + " ".join(f"Then {w} rests." for w in words)
        type(self).requests += 1
        out = json.dumps({"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                          "usage": {"completion_tokens": len(text.split())}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


@pytest.fixture
def toy():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Toy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Toy.requests = 0
    try:
        yield OpenAIEndpoint(f"http://127.0.0.1:{server.server_port}", mode="chat", parallel=4)
    finally:
        server.shutdown()


def test_a_planted_share_is_recovered_within_its_interval(toy, isolated_cache):
    """Planted: a toy model whose female share, "they" share and share of texts with a gendered word per occupation
    are known; the measure, through the real generation engine (the HTTP backend, its seeds and cache), recovers
    them within its intervals resampling the occupation's texts (as often as 95% intervals do), close to each, and in
    the planted order."""
    found = lf.long_form_table(toy, list(_PLANTED), n_samples=20, n_boot=1000, progress=False).occupations
    assert found["n_texts"].tolist() == [60] * len(_PLANTED)
    truth = pd.DataFrame([{"occupation": n, "female_share": f, "they_share": t,
                           "any_gendered_share": (1 - _SILENT) * (1 - t ** _PRONOUNS)}
                          for n, (f, t) in _PLANTED.items()])
    merged = found.merge(truth, on="occupation", suffixes=("", "_planted"))
    covered = []
    for share in ("female_share", "they_share", "any_gendered_share"):
        planted, low, high = merged[f"{share}_planted"], merged[f"{share}_ci_low"], merged[f"{share}_ci_high"]
        covered += ((low <= planted) & (planted <= high)).tolist()
        assert (merged[share] - planted).abs().max() < 0.1
    # 95% intervals: of these 18, 17.1 cover on average; 16 or more do with probability 0.94 (binomial)
    assert sum(covered) >= 16, covered
    assert merged["female_share"].rank().tolist() == merged["female_share_planted"].rank().tolist()


def test_an_interrupted_run_resumes_and_a_rerun_asks_the_model_nothing(toy, isolated_cache):
    """The audit's engine and cache: a rerun reads every text from the cache (the server is asked nothing), and a
    run whose cache lost its last rows (as a run stopped mid-way leaves it) asks only for those, with the texts of an
    uninterrupted run."""
    nouns = ["nurse", "plumber"]
    first = lf.long_form_table(toy, nouns, n_samples=3, progress=False)
    assert _Toy.requests == 2 * 3 * 3
    again = lf.long_form_table(toy, nouns, n_samples=3, progress=False)
    assert _Toy.requests == 18
    pd.testing.assert_frame_equal(again.texts, first.texts)
    rows = next((isolated_cache / "generations").glob("*/rows.jsonl"))
    lines = rows.read_text(encoding="utf-8").splitlines(keepends=True)
    rows.write_text("".join(lines[:11]), encoding="utf-8")
    resumed = lf.long_form_table(toy, nouns, n_samples=3, progress=False)
    assert _Toy.requests == 18 + 7
    pd.testing.assert_frame_equal(resumed.texts, first.texts)
    pd.testing.assert_frame_equal(resumed.occupations, first.occupations)


def test_the_reading_says_plainly_whether_the_next_word_predicts_the_long_form(toy, isolated_cache):
    """The primary (ρ of the long-form female share with the next-word log-ratio) read both ways: a next word that
    orders the toy's occupations as its planted shares do predicts the long form; one that orders them the other way
    predicts the reverse; each sentence, the chapter's and the front page's, says which, from the table."""
    measure = lf.long_form_table(toy, list(_PLANTED), n_samples=10, progress=False)
    planted = np.array([f for f, _ in _PLANTED.values()])
    values = pd.DataFrame({"occupation": list(_PLANTED), "group": "female", "bls_pct_female": 100 * planted})
    for sign, said in ((1, "predicts the female share"), (-1, "predicts the reverse of the female share")):
        exact = pd.DataFrame({"occupation": list(_PLANTED), "log_ratio": sign * np.log(planted / (1 - planted)),
                              "neutral_share": [t for _, t in _PLANTED.values()]})
        link = measure.link(exact, values, n_boot=200)
        row = link.statistics[link.statistics["primary"]].iloc[0]
        assert row["effect_size"] == pytest.approx(sign * 1.0) and lf.predicts(row) == sign
        assert lf.at_length_clause(link.statistics, "[SmolLM2](x)") == (
            f"in [SmolLM2](x), the next word {said} of what it writes at length")
        text = link.describe()
        assert ("**The next word predicts what" in text) == (sign == 1)
        assert "For each of 6 occupations the model wrote 10 seeded samples of each of 3 instructions" in text
        assert "through its chat template" in text and "up to 80 new tokens" in text
    share = link.statistics[link.statistics["test"] == "share of texts"].iloc[0]
    assert share["n"] == 180 and share["effect_size"] == pytest.approx(measure.texts["any_gendered"].mean())


def test_chapter_09_sets_each_models_long_form_rho_side_by_side_and_pools_it(toy, isolated_cache):
    """Chapter 09 (``pooling.pooled_link``'s ``at_length``): each model's long-form primary with its chapter's own
    interval, their random-effects pool on Fisher's z (two models of one n: equal weights, so the pool is the mean z,
    computed here by hand), and a model whose long form has other instructions kept apart, saying so."""
    from bias_utils.book import pooling

    values = pd.DataFrame({"occupation": list(_PLANTED), "group": "female",
                           "bls_pct_female": [100 * f for f, _ in _PLANTED.values()]})
    exact = pd.DataFrame({"occupation": list(_PLANTED), "log_ratio": [0.3, 1.0, -2.0, 0.2, -1.0, 0.1],
                          "neutral_share": 0.1})
    one = lf.long_form_table(toy, list(_PLANTED), n_samples=4, progress=False).link(exact, values, n_boot=200)
    other = lf.long_form_table(toy, list(_PLANTED), n_samples=4, instructions=["Describe a {occupation}."],
                               progress=False).link(exact.assign(log_ratio=exact["log_ratio"][::-1].to_numpy()),
                                                    values, n_boot=200)
    stacked = pd.concat([one.statistics.assign(model_id="a"), one.statistics.assign(
        model_id="b", effect_size=0.2), other.statistics.assign(model_id="c")], ignore_index=True)
    pooled = pooling.pooled_link(pd.DataFrame(), at_length=stacked).set_index("model_id")
    assert set(pooled["intrinsic"]) == {"next_word_log_ratio"}
    primary = one.statistics[one.statistics["primary"]].iloc[0]
    assert tuple(pooled.loc["a", ["estimate", "ci_low", "ci_high"]]) == tuple(primary[["effect_size", "ci_low",
                                                                                      "ci_high"]])
    by_hand = np.tanh(np.mean(np.arctanh([primary["effect_size"], 0.2])))
    assert pooled.loc[pooling._POOLED, "estimate"] == pytest.approx(by_hand, abs=1e-12)
    assert pooled.loc["c", "kept_apart"].startswith("its long form is defined by other instructions, samples or "
                                                    "length")
    text = pooling.describe_pooling(pooled.reset_index(), intrinsic="next_word_log_ratio")
    assert text.startswith("Pooled over 2 models (DerSimonian–Laird random effects), the Spearman ρ between the "
                           "next-word log-ratio and the long-form female share")
    assert "Kept apart" in text


# --------------------------------------------------------------------------- bad input, before the model loads


@pytest.mark.parametrize("kwargs, message", [
    ({"instructions": ["Write a short biography of a nurse."]}, r"instructions: .* has no \{occupation\}"),
    ({"instructions": []}, r"instructions is empty"),
    ({"instructions": "Write about a {occupation}."}, r"instructions must be a list of strings, not one string"),
    ({"instructions": ["About a {occupation} and {name}."]}, r"instructions: .* a field other than"),
    ({"instructions": ["A {occupation}.", "A {occupation}."]}, r"listed twice"),
    ({"n_samples": 0}, r"n_samples must be a positive integer, got 0"),
    ({"max_new_tokens": 0}, r"max_new_tokens must be a positive integer"),
])
def test_bad_input_is_a_parameter_error_before_the_model_loads(kwargs, message, loads):
    with pytest.raises(ParameterError, match=message):
        lf.long_form_table("smollm2-135m-instruct", ["nurse"], **kwargs)
    assert loads == []


def test_a_model_that_cannot_generate_is_refused_before_it_loads(loads):
    with pytest.raises(ParameterError, match=r"model: 'minilm-l6' is an encoder .* the long-form measure"):
        lf.long_form_table("minilm-l6", ["nurse"])
    with pytest.raises(ParameterError, match=r"occupations is empty"):
        lf.long_form_table("smollm2-135m-instruct", [])
    assert loads == []


def test_the_notebook_parameters_say_their_own_names(loads):
    from bias_utils.book import validation

    with pytest.raises(ParameterError, match=r"^long_form_n_samples must be a positive integer"):
        validation.check("11_intrinsic_extrinsic", long_form_n_samples=0)
    with pytest.raises(ParameterError, match=r"^long_form must be True or False"):
        validation.check("11_intrinsic_extrinsic", long_form="yes")
    assert loads == []
    with pytest.raises(ParameterError, match=r"^long_form_instructions: .* has no"):
        lf.check_long_form(["Write."], prefix="long_form_")
    assert lf.check_long_form() == lf.INSTRUCTIONS


# --------------------------------------------------------------------------- the real model


@pytest.mark.slow
def test_smollm2_writes_through_its_chat_template_and_the_tables_are_as_declared(smollm, isolated_cache, tmp_path):
    """The real decoder: the texts go through SmolLM2's chat template (its first words answer the instruction, they
    do not continue it), every table has its declared columns, and the link's primary row is the one stated."""
    found = lf.long_form_table(smollm, ["nurse", "carpenter", "engineer"], n_samples=2, max_new_tokens=24,
                               n_boot=200, progress=False)
    assert found.chat and len(found.texts) == 3 * len(lf.INSTRUCTIONS) * 2
    assert (found.texts["n_tokens"] > 0).all()
    assert found.texts["prompt"].str.contains("an engineer").sum() == 2 * len(lf.INSTRUCTIONS)
    values = pd.DataFrame({"occupation": ["nurse", "carpenter", "engineer"], "group": ["female", "male", "male"],
                           "bls_pct_female": [90.0, 1.5, 12.0]})
    exact = pd.DataFrame({"occupation": ["nurse", "carpenter", "engineer"], "log_ratio": [1.0, -2.0, -1.0],
                          "neutral_share": [0.1, 0.2, 0.3]})
    link = found.link(exact, values, n_boot=200)
    found.write(tmp_path)
    link.write(tmp_path)
    for name in (tables.NAMES.LONG_FORM_TEXTS, tables.NAMES.LONG_FORM_OCCUPATIONS, tables.NAMES.LONG_FORM_LINK,
                 tables.NAMES.LONG_FORM_LINK_OCCUPATIONS):
        assert tuple(pd.read_parquet(tmp_path / f"{name}.parquet").columns) == tables.table(name).columns
    primary = link.statistics[link.statistics["primary"]]
    assert primary[["analysis", "test", "x", "y"]].values.tolist() == [["primary", "spearman", "log_ratio",
                                                                        "female_share"]]


def test_chapter_11_states_the_long_forms_primary_before_computing_it():
    """The section's heading cell names the primary analysis (the code's :data:`LONG_FORM_PRIMARY`: Spearman's ρ of the
    long-form female share with the next-word log-ratio) before the cell that computes it, and the notebook's
    defaults are the module's."""
    import nbformat

    from bias_utils.core import paths

    cells = nbformat.read(paths.ROOT / "notebooks" / "11_intrinsic_extrinsic.ipynb", as_version=4).cells
    stated = next(i for i, c in enumerate(cells) if "## What it writes at length" in c.source)
    computed = next(i for i, c in enumerate(cells) if c.cell_type == "code" and "long_form_table(" in c.source)
    assert stated < computed
    text = " ".join(cells[stated].source.split())
    assert "The primary analysis, stated before the results: across the BLS occupations, Spearman's ρ" in text
    assert lf.LONG_FORM_PRIMARY == {"analysis": "primary", "test": "spearman"}
    parameters = next(c.source for c in cells if "parameters" in c.metadata.get("tags", []))
    assert f"long_form_n_samples: int = {lf.N_SAMPLES} " in parameters
    assert f"long_form_max_new_tokens: int = {lf.MAX_NEW_TOKENS} " in parameters
