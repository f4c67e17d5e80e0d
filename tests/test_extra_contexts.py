"""The extra terms' generated contexts: the committed data file, and Table 2 with either context source."""

import json

import numpy as np
import pytest

from bias_utils.profiles import context_filters as F
from bias_utils.profiles import contexts as C
from bias_utils.profiles import extra_contexts as X
from bias_utils.profiles.dictionaries import load_full_dictionary_terms


@pytest.fixture(scope="module")
def extra():
    return X._read_extra_contexts()


def test_extra_contexts_file_records_its_settings(extra):
    _, settings = extra
    for key in ("model_id", "seed", "generation", "prompt_template", "filter_version", "chat", "n_keep",
                "n_terms_done", "n_terms_total", "command"):
        assert key in settings, key
    assert settings["prompt_template"] == C._GENERATION_INSTRUCTION
    assert set(settings["generation"]) >= {"n_samples", "max_new_tokens", "temperature", "top_p"}
    assert X._extra_contexts_path().stat().st_size < 2_000_000


def test_extra_contexts_file_rows_are_usable_contexts_of_real_terms(extra):
    table, settings = extra
    assert len(table) == settings["n_terms_done"] and table["term"].is_unique
    full = load_full_dictionary_terms().set_index("term")
    assert set(table["term"]) <= set(full.index)
    pole = ["dimension", "direction"]
    assert (full.loc[table["term"], pole].to_numpy() == table[pole].to_numpy()).all()
    assert (table["n_generated"] == settings["generation"]["n_samples"]).all()
    assert (table["contexts"].str.len() <= settings["n_keep"]).all()
    # Every kept context passes the filters of the recorded version: the term as a word, no gender marker,
    # no quality issue; and every generated sample is either kept or counted as a drop.
    names = F._names()
    for r in table.itertuples():
        for c in r.contexts:
            assert F._contains_term(c, r.term), (r.term, c)
            assert not F._gender_markers(c, r.term, names), (r.term, c)
            if settings["filter_version"] == F._FILTER_VERSION:
                assert F._quality_issue(c, r.term, r.dimension) is None, (r.term, c)
        accounted = len(r.contexts) + sum(r.dropped.values())
        # Fewer than n_keep kept: every sample was kept or dropped; otherwise the surplus was not needed.
        assert accounted == r.n_generated if len(r.contexts) < settings["n_keep"] else accounted <= r.n_generated


def test_coverage_counts_the_file(extra):
    table, _ = extra
    cov = X.extra_coverage()
    total = cov[cov["dimension"] == "total"].iloc[0]
    assert total["n_terms"] == len(load_full_dictionary_terms())
    assert total["n_generated"] == len(table)
    assert total["n_covered_round1"] == (table["contexts"].str.len() > 0).sum()
    # a term's contexts are its first round's, else its second round's (when that file exists)
    assert total["n_covered"] == total["n_covered_round1"] + total["n_covered_round2"]
    per = cov[cov["dimension"] != "total"]
    assert per["n_covered"].sum() == total["n_covered"] and (per["coverage"] <= 1).all()


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(C._ContextError, match="generate-extra"):
        X._read_extra_contexts(tmp_path / "none.jsonl")


@pytest.mark.slow
def test_direction_prediction_with_generated_and_wordnet_term_contexts(tmp_path, extra):
    from bias_utils.models.loading import load_model
    from bias_utils.profiles import space
    from bias_utils.profiles.dictionaries import load_seed_dictionary

    table, settings = extra
    # A small slice: two covered terms per warmth/competence member dimension and pole ...
    covered = table[table["contexts"].str.len() > 0]
    dims = ["sociability", "morality", "ability", "agency"]
    pick = covered[covered["dimension"].isin(dims)].groupby(["dimension", "direction"]).head(2)
    # ... and one of them left out of a copy of the file: its generated contexts are "missing".
    missing = pick.iloc[0]["term"]
    path = tmp_path / "extra.jsonl"
    rows = [json.dumps({**r._asdict(), "contexts": list(r.contexts)}) for r in table.itertuples(index=False)
            if r.term != missing]
    path.write_text("\n".join(rows) + "\n")
    path.with_suffix(".json").write_text(json.dumps(settings))
    full = load_full_dictionary_terms()
    terms = full[full["term"].isin(pick["term"])]

    model = load_model("minilm-l6")
    sp = space.build_space(model, load_seed_dictionary())
    gen = space.direction_prediction(model, sp, terms, n_boot=50, contexts_file=path)
    wn = space.direction_prediction(model, sp, terms, n_boot=50, term_contexts="dictionary")

    assert set(gen.accuracy["term_contexts"]) == {"generated"} and set(wn.accuracy["term_contexts"]) == {"dictionary"}
    assert gen.skipped["term"].tolist() == [missing]
    assert "not in the generated contexts file" in gen.skipped["reason"].item()
    # (The space's other dimensions have no extra term in the slice: they are evaluated leave-one-out.)
    gen_values, wn_values = (r.values[r.values["evaluation"] == "extra terms"] for r in (gen, wn))
    assert set(gen_values["term"]) == set(pick["term"]) - {missing}
    assert set(wn_values["term"]) == set(pick["term"]) and wn.skipped.empty
    # The two sources embed different sentences, so the projections differ term by term.
    both = gen_values.merge(wn_values, on=["term", "term_dimension"], suffixes=("_gen", "_wn"))
    assert len(both) and not np.allclose(both["value_gen"], both["value_wn"])
    n = gen.accuracy.query("cutoff == 'raw' and dimension in @dims").set_index("dimension")["n"]
    assert n.sum() == len(pick) - 1
    # With a limit, the sample is drawn among the terms that have a generated context; the others stay recorded.
    lim = space.direction_prediction(model, sp, terms, n_boot=20, contexts_file=path, limit=1)
    lim_values = lim.values[lim.values["evaluation"] == "extra terms"]
    kept = pick[pick["term"] != missing]
    assert lim_values["term"].nunique() == kept.groupby(["dimension", "direction"]).ngroups
    assert set(lim_values["term"]) <= set(kept["term"]) and lim.skipped["term"].tolist() == [missing]
    with pytest.raises(ValueError, match="term_contexts"):
        space.direction_prediction(model, sp, terms, term_contexts="wordnet")


def _first_round(path, *, limit: int, chunk: int):
    """The first round on the first 40 full-dictionary terms, small SmolLM2 samples; returns its terms."""
    terms = load_full_dictionary_terms().head(40)
    X._generate_extra_contexts("smollm2-135m-instruct", terms, path=path, generation=SMALL_GENERATION, limit=limit,
                              chunk=chunk, progress=False)
    return terms


SMALL_GENERATION = {"n_samples": 2, "max_new_tokens": 24}


@pytest.mark.slow
def test_generate_extra_contexts_writes_and_resumes(tmp_path):
    path = tmp_path / "extra.jsonl"
    settings = SMALL_GENERATION
    terms = _first_round(path, limit=3, chunk=2)
    first = path.read_text()
    table, meta = X._read_extra_contexts(path)
    assert len(table) == 3 == meta["n_terms_done"] and meta["n_terms_total"] == 40
    assert meta["generation"] == {**C._GENERATION_SETTINGS, **settings} and meta["seed"] == 0
    assert set(table["term"]) <= set(terms["term"]) and (table["n_generated"] == 2).all()
    # A rerun takes every completion from the generation cache: the same file.
    X._generate_extra_contexts("smollm2-135m-instruct", terms, path=path, generation=settings, limit=3, chunk=2,
                              progress=False)
    assert path.read_text() == first


@pytest.mark.slow
def test_generate_extra_contexts_continues_from_the_file_without_its_cache(tmp_path, monkeypatch):
    # A new checkout has the tracked file but no generation cache: terms already in the file are not
    # generated again (the cache stays empty for them), the missing ones are, and the file grows.
    path = tmp_path / "extra.jsonl"
    settings = {"n_samples": 2, "max_new_tokens": 16}
    terms = load_full_dictionary_terms().head(40)
    monkeypatch.setenv("BIAS_CACHE_DIR", str(tmp_path / "cache-a"))
    X._generate_extra_contexts("smollm2-135m-instruct", terms, path=path, generation=settings, limit=2, chunk=2,
                              progress=False)
    first = path.read_text().splitlines()
    monkeypatch.setenv("BIAS_CACHE_DIR", str(tmp_path / "cache-b"))
    X._generate_extra_contexts("smollm2-135m-instruct", terms, path=path, generation=settings, limit=4, chunk=2,
                              progress=False)
    grown = path.read_text().splitlines()
    assert grown[:2] == first and len(grown) == 4
    cached = "".join(p.read_text() for p in (tmp_path / "cache-b").rglob("*.jsonl"))
    assert all(json.loads(line)["term"] not in cached for line in first)
    assert all(json.dumps(json.loads(line)["term"]) in cached for line in grown[2:])
    # Other settings never reuse the file's lines.
    X._generate_extra_contexts("smollm2-135m-instruct", terms, path=path, generation={**settings, "n_samples": 1},
                              limit=2, chunk=2, progress=False)
    assert (X._read_extra_contexts(path)[0]["n_generated"] == 1).all()


@pytest.mark.slow
def test_second_round_retries_only_the_first_rounds_failures_and_the_reader_merges(tmp_path):
    path = tmp_path / "extra.jsonl"
    terms = _first_round(path, limit=6, chunk=3)
    first, _ = X._read_extra_contexts(path)
    failed = first[first["contexts"].str.len() == 0]
    assert len(failed), "the slice needs a first-round failure (SmolLM2 drops most of these terms)"
    X._generate_extra_contexts("smollm2-135m-instruct", path=path, generation=SMALL_GENERATION, chunk=3,
                              progress=False, round=2)
    second, meta2 = X._read_extra_contexts(path, round=2)
    assert second["term"].tolist() == failed["term"].tolist()
    assert meta2["round"] == 2 and meta2["prompt_template"] == X._RETRY_INSTRUCTION
    merged, settings_merged = X.merged_extra_contexts(path)
    assert settings_merged["round2"]["n_terms_done"] == len(failed)
    retry = second.set_index("term")
    for row in merged.itertuples():
        if row.term in retry.index:
            assert row.round == 2 and list(row.contexts) == list(retry.loc[row.term, "contexts"])
            assert row.n_generated == 4
        else:
            assert row.round == 1 and list(row.contexts) == list(first.set_index("term").loc[row.term, "contexts"])
    cov = X.extra_coverage(terms, path).set_index(["dimension", "direction"])
    total = cov.loc[("total", "")]
    assert total["n_generated"] == 6 and total["n_round2"] == len(failed)
    assert total["n_covered"] == total["n_covered_round1"] + total["n_covered_round2"]
    assert total["n_covered_round2"] == (second["contexts"].str.len() > 0).sum()
    # The first round's lines are untouched by the second round.
    assert X._read_extra_contexts(path)[0].equals(first)



def test_read_model_choice_gives_the_generator_comparison_of_chapter_03():
    choice = X.read_model_choice()
    assert set(choice) == set(X._MODEL_CHOICE_FILES)
    summary = choice["summary"]
    assert len(summary) >= 2 and summary["model_id"].is_unique
    assert set(choice["kept"]["model_id"]) <= set(summary["model_id"])
    assert set(choice["reasons"]["model_id"]) <= set(summary["model_id"])
