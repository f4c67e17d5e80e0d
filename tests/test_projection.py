"""Projection (Eqs. 1-5) and direction accuracy against direct numpy computations."""

import numpy as np
import pandas as pd
import pytest

from bias_utils.core.errors import ParameterError
from bias_utils.profiles import projection as P

L, H = 3, 12


def template_contexts(rng):
    """Senses of all 7 dimensions with 1-3 contexts each; one context row unembeddable (NaN)."""
    rows = []
    for d in P.DIMENSION_ORDER:
        for direction in ("high", "low"):
            for k in range(2):
                for c in range(rng.integers(1, 4)):
                    rows.append({"sense_id": f"{d}-{direction}-{k}", "dimension": d, "term": f"w{k}",
                                 "direction": direction})
    table = pd.DataFrame(rows)
    values = rng.normal(size=(len(table), L, H))
    values[3] = np.nan
    return table, values


def _direct_basis(table, values, groups):
    """Eqs. 1-3 written out with plain loops, and pinv per layer with numpy (not scipy)."""
    sense = {}
    for sid, idx in table.groupby("sense_id").groups.items():
        rows = [values[i] for i in idx if np.isfinite(values[i]).all()]
        sense[sid] = np.mean(rows, axis=0)  # Eq. 1
    meta = table.drop_duplicates("sense_id").set_index("sense_id")
    vecs = []
    for subdims in groups:
        pole = {}
        for direction in ("high", "low"):
            ids = [s for s in sense if meta.loc[s, "dimension"] in subdims and meta.loc[s, "direction"] == direction]
            pole[direction] = np.mean([sense[s] for s in ids], axis=0)  # Eq. 2
        vecs.append(pole["high"] - pole["low"])  # Eq. 3
    A = np.stack(vecs, axis=1)  # [L, D, H]
    return A, np.stack([np.linalg.pinv(A[l].T) for l in range(L)])


@pytest.mark.parametrize("space,groups", [
    ("dimensions", [(d,) for d in P.DIMENSION_ORDER]),
    ("warmth_competence", [("sociability", "morality"), ("ability", "agency")]),
])
def test_basis_and_projection_match_direct_numpy(space, groups):
    rng = np.random.default_rng(7)
    table, values = template_contexts(rng)
    S, senses = P.sense_embeddings(values, table)
    basis = P.polar_basis(S, senses, space)
    A, pinv = _direct_basis(table, values, groups)
    np.testing.assert_allclose(basis.directions, A, rtol=1e-10)
    np.testing.assert_allclose(basis.pinv, pinv, rtol=1e-8, atol=1e-10)

    X = rng.normal(size=(4, L, H))
    expected = np.stack([[pinv[l] @ X[n, l] for l in range(L)] for n in range(4)])  # Eq. 5
    np.testing.assert_allclose(P.project(basis, X, "all"), expected, rtol=1e-8)
    np.testing.assert_allclose(P.project(basis, X, "mean"), expected.mean(axis=1), rtol=1e-8)
    np.testing.assert_allclose(P.project(basis, X, "last"), expected[:, -1], rtol=1e-8)
    np.testing.assert_allclose(P.project(basis, X, 1), expected[:, 1], rtol=1e-8)
    tab = P.projection_table(basis, X, pd.DataFrame({"word": list("abcd")}), "all")
    assert len(tab) == 4 * L * len(groups)
    row = tab[(tab.word == "c") & (tab.layer == 2) & (tab.dimension == basis.dimensions[-1])]
    assert row["value"].item() == pytest.approx(expected[2, 2, -1])


def test_direction_vectors_are_recovered_by_projection():
    # pinv(A^T) A^T = I when the D direction vectors are independent: each basis
    # vector projects to 1 on its own dimension and 0 elsewhere.
    rng = np.random.default_rng(1)
    table, values = template_contexts(rng)
    basis = P.polar_basis(*P.sense_embeddings(values, table))
    proj = P.project(basis, np.transpose(basis.directions, (1, 0, 2)), "all")  # [D, L, D]
    for l in range(L):
        np.testing.assert_allclose(proj[:, l, :], np.eye(len(basis.dimensions)), atol=1e-8)


def test_unembedded_sense_is_reported_and_empty_pole_raises():
    rng = np.random.default_rng(3)
    table, values = template_contexts(rng)
    lone = table["sense_id"] == "status-low-0"
    values[lone.to_numpy()] = np.nan
    S, senses = P.sense_embeddings(values, table)
    assert senses.set_index("sense_id").loc["status-low-0", "n_embedded"] == 0
    assert np.isnan(S[senses.sense_id == "status-low-0"]).all()
    basis = P.polar_basis(S, senses)
    assert basis.poles.set_index(["dimension", "direction"]).loc[("status", "low"), "n_senses"] == 1
    values[(table["sense_id"] == "status-low-1").to_numpy()] = np.nan
    with pytest.raises(ParameterError, match="low of 'status'"):
        P.polar_basis(*P.sense_embeddings(values, table))


def test_user_dimensions_and_missing_composites():
    table = pd.DataFrame({"sense_id": ["a", "b", "c"], "dimension": ["tidiness"] * 3,
                          "term": ["neat", "messy", "tidy"], "direction": ["high", "low", "high"]})
    S, senses = P.sense_embeddings(np.random.default_rng(0).normal(size=(3, 2, 5)), table)
    assert P.polar_basis(S, senses).dimensions == ("tidiness",)
    with pytest.raises(ParameterError, match="lacks"):
        P.polar_basis(S, senses, "warmth_competence")


def test_direction_accuracy_against_hand_computation():
    values = pd.DataFrame({
        "dimension": ["morality"] * 6,
        "direction": ["high", "high", "high", "low", "low", "low"],
        "layer": "mean",
        "value": [0.5, 0.2, -0.1, -0.4, 0.3, -0.6],
    })
    acc = P.direction_accuracy(values, n_boot=500).set_index("cutoff")
    # raw: predicted high for >0 -> H,H,L | L,H,L -> correct 2 + 2 = 4/6
    assert acc.loc["raw", "accuracy"] == pytest.approx(4 / 6)
    # centred: mean = -0.01667 -> H,H,L | L,H,L -> also 4/6; shift values to separate the cut-offs
    shifted = values.assign(value=values["value"] + 0.25)
    acc2 = P.direction_accuracy(shifted, n_boot=500).set_index("cutoff")
    # raw on shifted: 0.75,0.45,0.15 | -0.15,0.55,-0.35 -> H,H,H | L,H,L -> 3 + 2 = 5/6
    assert acc2.loc["raw", "accuracy"] == pytest.approx(5 / 6)
    # centring removes a constant shift: back to 4/6
    assert acc2.loc["centred", "accuracy"] == pytest.approx(4 / 6)
    assert (acc2["ci_low"] <= acc2["accuracy"]).all() and (acc2["accuracy"] <= acc2["ci_high"]).all()
    assert acc2["n"].eq(6).all()


def test_own_dimension_values_pick_own_and_composite_axes():
    rng = np.random.default_rng(5)
    table, values = template_contexts(rng)
    S, senses = P.sense_embeddings(values, table)
    bases = {sp: P.polar_basis(S, senses, sp) for sp in P._SPACES}
    terms = pd.DataFrame({"term": ["x", "y"], "dimension": ["morality", "status"], "direction": ["high", "low"]})
    X = rng.normal(size=(2, L, H))
    out = P.own_dimension_values(bases, X, terms, "mean")
    assert sorted(out["dimension"]) == ["morality", "status", "warmth"]
    expected = P.project(bases["warmth_competence"], X[:1], "mean")[0, 0]
    assert out.set_index("dimension").loc["warmth", "value"] == pytest.approx(expected)


def test_dropped_senses_summary_counts_per_stage_and_reason():
    from bias_utils.profiles import space

    dropped = pd.DataFrame({"sense_id": ["a|1", "a|1", "b|2", "c|3"], "term": ["a", "a", "b", "c"],
                            "context": ["x", "y", "", "z"], "stage": ["filter", "filter", "contexts", "filter"],
                            "reason": ["meta", "meta", "no context", "gendered"]}, columns=space.DROPPED_COLUMNS)
    counts = space.dropped_by_reason(dropped).set_index(["stage", "reason"])["n"].to_dict()
    assert counts == {("contexts", "no context"): 1, ("filter", "gendered"): 1, ("filter", "meta"): 2}
    # a sentence, never a line ending in a colon with nothing after it
    text = space.describe_dropped(dropped)
    assert text.startswith("3 senses lost a context") and text.endswith("by stage and reason.")
    assert space.dropped_by_reason(dropped.iloc[:0]).empty
    assert space.describe_dropped(dropped.iloc[:0]).endswith("none was dropped.")


def test_direction_skips_in_a_sentence_without_per_term_detail():
    from bias_utils.profiles import space

    reasons = ["none of 5 generated contexts (1 round) was usable (gendered 5)",
               "none of 5 generated contexts (1 round) was usable (first word 2, meta-text 3)",
               "no WordNet example"]
    skipped = pd.DataFrame({"sense_id": ["a|x", "b|x", "c|x"], "term": ["a", "b", "c"], "context": "",
                            "reason": reasons})
    text = space.describe_direction_skipped(skipped)
    assert text.startswith("3 extra terms were left out") and "direction_skipped.csv" in text
    # each reason once, counted, most frequent first, without the per-term parentheses
    assert text.endswith(": none of 5 generated contexts was usable (2); no WordNet example (1).")
    assert "none was left out" in space.describe_direction_skipped(skipped.iloc[:0])


def test_table2_side_by_side_per_context_of_the_extra_terms():
    from bias_utils.profiles import space
    from bias_utils.report import table_html

    rng = np.random.default_rng(3)
    dims = ["sociability", "warmth", "religion"]
    rows = [{"model_id": "m--1--fp32", "context_source": "generated", "term_contexts": tc, "evaluation": "extra terms",
             "layer": "mean", "dimension": d, "cutoff": c, "accuracy": rng.uniform(), "n": int(rng.integers(3, 30))}
            for tc in ("generated", "dictionary") for d in dims for c in ("raw", "centred")]
    both = pd.DataFrame(rows)
    for r in both[both["cutoff"] == "centred"].itertuples():  # both cut-offs are computed on the same terms
        both.loc[(both["term_contexts"] == r.term_contexts) & (both["dimension"] == r.dimension), "n"] = r.n
    acc = space.table2_by_term_contexts(both)
    assert list(acc.columns) == ["term_contexts", "cutoff", "warmth", "sociability", "religion"]
    assert list(zip(acc["term_contexts"], acc["cutoff"])) == [
        ("generated sentences", "raw"), ("generated sentences", "centred"),
        ("WordNet examples", "raw"), ("WordNet examples", "centred")]
    for r in both.itertuples():  # every cell is its row of the tidy table
        name = space._TERM_CONTEXT_NAMES[r.term_contexts]
        cell = acc.loc[(acc["term_contexts"] == name) & (acc["cutoff"] == r.cutoff), r.dimension]
        assert cell.item() == pytest.approx(r.accuracy)
    n = space.table2_by_term_contexts(both, values="n")
    assert list(n["term_contexts"]) == ["generated sentences", "WordNet examples"] and "cutoff" not in n
    assert n.set_index("term_contexts").loc["WordNet examples", "religion"] == \
        both.query("term_contexts == 'dictionary' and dimension == 'religion'")["n"].iloc[0]
    # as the chapter shows it: headed by what each column holds, no column named by a value of another
    page = table_html.table_html(acc)
    assert "Extra terms&#x27; contexts" in page and "<th>dictionary</th>" not in page and "Context source" not in page
    assert "seed senses' generated contexts, at the mean layer" in space.describe_table2(both)
    with pytest.raises(ValueError, match="values"):
        space.table2_by_term_contexts(both, values="p")
    assert space.table2_by_term_contexts(both.iloc[:0]).empty and "No direction accuracy" in space.describe_table2(
        both.iloc[:0])
