"""Axis validity: the AUC against the pole-label permutation null.

The batched basis rebuild against the plain ``projection.polar_basis`` path and
scipy's Mann-Whitney U; the statistic and null on synthetic projections (a large
common offset with unbalanced poles, where the raw gate fails and the AUC gate
passes; the false-positive rate on pure-noise axes); the untestable rule; a real
SmolLM2 slice against an independent U / (n_high n_low)."""

import numpy as np
import pandas as pd
import pytest
from scipy import linalg
from scipy import stats as sps

from bias_utils.profiles import axis_validity as av
from bias_utils.profiles import projection
from bias_utils.profiles.space import StereotypeSpace, TermEmbeddings

# ----------------------------------------------------------------- a hand-sized space


def toy_space(rng, L=2, H=6, n_terms=6):
    """Four dimensions with 6 seed senses per pole and ``n_terms`` extra terms per pole."""
    rows, emb, terms, X = [], [], [], []
    centre = {d: rng.normal(size=H) for d in ("sociability", "morality", "ability", "agency")}
    for dim in centre:
        for direction, s in (("high", 1), ("low", -1)):
            for i in range(6):
                rows.append({"sense_id": f"{dim}{direction}{i}", "dimension": dim, "term": f"{dim}{direction}{i}",
                             "direction": direction, "n_contexts": 1, "n_embedded": 1})
                emb.append(s * centre[dim][None] + 0.7 * rng.normal(size=(L, H)))
            for i in range(n_terms):
                terms.append({"sense_id": f"{dim}{direction}{i}x", "dimension": dim, "term": f"{dim}{direction}{i}x",
                              "direction": direction, "n_contexts": 1, "n_embedded": 1})
                X.append(s * centre[dim][None] + 1.5 * rng.normal(size=(L, H)))
    senses, S = pd.DataFrame(rows), np.stack(emb)
    bases = {sp: projection.polar_basis(S, senses, sp) for sp in ("dimensions", "warmth_competence")}
    space = StereotypeSpace(bases, senses, None, pd.DataFrame(), "toy", "generated", S)
    terms = pd.DataFrame(terms)
    return space, TermEmbeddings(np.stack(X), terms, terms, pd.DataFrame())


def test_pinv_row_matches_scipy_pinv():
    rng = np.random.default_rng(12)
    A = rng.normal(size=(3, 4, 7, 40))
    A[..., 1, :] = A[..., 0, :] + 0.05 * rng.normal(size=(3, 4, 40))  # two nearly parallel axes
    for d in range(7):
        want = np.array([[linalg.pinv(A[i, j].T)[d] for j in range(4)] for i in range(3)])
        np.testing.assert_allclose(av._pinv_row(A, d), want, rtol=1e-7, atol=1e-10)
    A[0, 0, 2] = A[0, 0, 3]  # rank deficient: falls back to the SVD pseudo-inverse
    np.testing.assert_allclose(av._pinv_row(A[:1, :1], 2)[0, 0], linalg.pinv(A[0, 0].T)[2], atol=1e-8)


@pytest.mark.slow
def test_validity_table_against_the_plain_polar_basis_path():
    space, terms = toy_space(np.random.default_rng(8), n_terms=10)
    K = 30
    got = av.validity_table(space, terms, n_permutations=K, seed=11)
    assert len(got) == 6 * 3 and set(got["verdict"]) <= set(av.VERDICTS)
    # redo it independently: same label draws, every sense relabelled, full polar_basis, project, scipy's U
    rng = np.random.default_rng(11)
    for name, basis in space.bases.items():
        groups = projection.space_groups(space.senses, name)
        for d, axis in enumerate(basis.dimensions):
            idx = np.flatnonzero(space.senses["dimension"].isin(groups[axis]).to_numpy())
            draws = av._shuffled_high(space.senses, idx, K, rng)
            sel = terms.table["dimension"].isin(groups[axis]).to_numpy()
            high = (terms.table.loc[sel, "direction"] == "high").to_numpy()

            def stats(b):
                v = projection.project(b, terms.X[sel], "all")[:, :, d]
                v = np.column_stack([v, v.mean(axis=1)])  # the layers, then their mean
                u = [sps.mannwhitneyu(v[high, j], v[~high, j]).statistic / (high.sum() * (~high).sum())
                     for j in range(v.shape[1])]
                return np.array(u), ((v > 0) == high[:, None]).mean(axis=0)

            null_auc, null_raw = [], []
            for h in draws:
                senses = space.senses.copy()
                senses.loc[idx, "direction"] = np.where(h, "high", "low")
                a, r = stats(projection.polar_basis(space.sense_emb, senses, name))
                null_auc.append(a)
                null_raw.append(r)
            null_auc, null_raw = np.array(null_auc), np.array(null_raw)  # [K, L + 1]
            obs_auc, obs_raw = stats(basis)
            for li, label in enumerate([*map(str, basis.layers), "mean"]):
                row = got[(got.dimension == axis) & (got.layer == label)].iloc[0]
                assert row["auc"] == pytest.approx(obs_auc[li])
                assert row["null_mean"] == pytest.approx(null_auc[:, li].mean())
                assert row["p"] == pytest.approx((1 + (null_auc[:, li] >= obs_auc[li] - 1e-12).sum()) / (K + 1))
                assert row["raw_accuracy"] == pytest.approx(obs_raw[li])
                assert row["raw_p"] == pytest.approx((1 + (null_raw[:, li] >= obs_raw[li] - 1e-12).sum()) / (K + 1))
    assert (got["p_floor"] == 1 / (K + 1)).all() and (got["null_low"] <= got["null_high"]).all()
    assert ((got["verdict"] == "supported") == (got["p"] < 0.05)).all()  # 10 + 10 terms per axis: all testable
    assert (got["raw_verdict"] == np.where(got["raw_p"] < 0.05, "passed", "failed")).all()


def test_an_axis_without_terms_is_untestable_not_missing():
    space, terms = toy_space(np.random.default_rng(8), n_terms=10)
    keep = (terms.table["dimension"] != "agency").to_numpy()
    got = av.validity_table(space, TermEmbeddings(terms.X[keep], terms.table[keep], terms.table[keep],
                                                  pd.DataFrame()), n_permutations=20)
    agency = got[got.dimension == "agency"]
    assert len(agency) == 3 and (agency["verdict"] == "untestable").all()
    assert (agency[["n_high", "n_low"]] == 0).all().all() and agency["auc"].isna().all()
    assert (agency["raw_verdict"] == "untested").all()
    assert "agency" in av.unreadable_axes(got)
    phrase = av.verdict_phrase(agency.iloc[0])
    assert phrase == "untestable (0 covered high-pole terms and 0 covered low-pole terms; 10 per pole needed)"
    # the other axes keep their own permutations: dropping agency's terms changes nothing else
    full = av.validity_table(space, terms, n_permutations=20)
    pd.testing.assert_frame_equal(got[got.dimension == "sociability"].reset_index(drop=True),
                                  full[full.dimension == "sociability"].reset_index(drop=True))


# ----------------------------------------------------------------- the statistic and its null on arrays


def _synthetic(rng, *, n_high, n_low, signal, offset, K=199, H=20, n_seeds=8):
    """Projections [n, K + 1] of extra terms on a seed-built axis (index 0) and on K axes from
    shuffled seed labels. ``signal``: how far the terms' and seeds' poles sit along a shared
    direction; ``offset``: a shift of every term along it (a common offset of the projections)."""
    u = np.zeros(H)
    u[0] = 1.0
    seed_high = np.r_[np.ones(n_seeds, bool), np.zeros(n_seeds, bool)]
    seeds = rng.normal(size=(2 * n_seeds, H)) + signal * np.where(seed_high, 1, -1)[:, None] * u
    high = np.r_[np.ones(n_high, bool), np.zeros(n_low, bool)]
    X = rng.normal(size=(n_high + n_low, H)) + (signal * np.where(high, 1, -1) + offset)[:, None] * u
    labels = [seed_high] + [rng.permutation(seed_high) for _ in range(K)]
    axes = np.stack([seeds[h].mean(axis=0) - seeds[~h].mean(axis=0) for h in labels])  # [K + 1, H]
    return X @ axes.T, high


def test_common_offset_and_unbalanced_poles_fail_the_raw_gate_not_the_auc():
    res = av._auc_null_test(*_synthetic(np.random.default_rng(3), n_high=60, n_low=15, signal=1.0, offset=8.0))
    # every term projects positive on the real axis: raw accuracy is the larger pole's share
    assert res["raw_accuracy"] == pytest.approx(res["majority_share"]) == pytest.approx(0.8)
    assert res["raw_verdict"] == "failed" and res["raw_p"] > 0.05
    assert res["verdict"] == "supported" and res["p"] < 0.05 and res["auc"] > 0.7
    assert res["null_low"] < 0.5 < res["null_high"] < res["auc"]


def test_auc_gate_false_positive_rate_on_pure_noise_axes():
    """No pole signal anywhere: over 300 seeds the gate may reject at most ~alpha of the time."""
    rejected = [av._auc_null_test(*_synthetic(np.random.default_rng(1000 + i), n_high=25, n_low=12,
                                             signal=0.0, offset=3.0, K=99))["verdict"] == "supported"
                for i in range(300)]
    assert np.mean(rejected) <= 0.07


def test_detectable_auc_is_the_threshold_of_p_below_alpha():
    values, high = _synthetic(np.random.default_rng(5), n_high=20, n_low=14, signal=0.3, offset=0.0, K=99)
    res = av._auc_null_test(values, high, alpha=0.05)
    null = av._rank_auc(values, high)[1:]
    det = float(res["detectable_auc"])

    def p(auc):
        return (1 + (null >= auc - 1e-12).sum()) / 100

    assert p(det + 1e-9) < 0.05 <= p(det)
    assert det == pytest.approx(np.quantile(null, 0.95), abs=0.05)
    assert np.isnan(av._auc_null_test(values[:, :10], high)["detectable_auc"])  # 9 permutations: p >= 0.1


def test_rank_auc_equals_mann_whitney_with_ties():
    rng = np.random.default_rng(2)
    v = rng.integers(0, 5, size=(30, 3)).astype(float)  # many ties
    high = rng.random(30) < 0.4
    want = [sps.mannwhitneyu(v[high, j], v[~high, j]).statistic / (high.sum() * (~high).sum()) for j in range(3)]
    np.testing.assert_allclose(av._rank_auc(v, high), want)


def test_untestable_below_ten_terms_a_pole_and_the_phrases():
    values, high = _synthetic(np.random.default_rng(4), n_high=40, n_low=9, signal=2.0, offset=0.0)
    res = av._auc_null_test(values, high)
    assert res["verdict"] == "untestable" and res["p"] < 0.05  # a strong AUC, but too few low-pole terms
    row = {k: (v.item() if isinstance(v, np.ndarray) else v) for k, v in res.items()}
    assert av.verdict_phrase(row) == "untestable (9 covered low-pole terms; 10 per pole needed)"
    assert av.verdict_phrase({**row, "n_low": 1}) == "untestable (1 covered low-pole term; 10 per pole needed)"
    row.update(n_low=10, verdict="supported", p=1 / 200, auc=0.861, null_low=0.31, null_high=0.712)
    assert av.verdict_phrase(row) == ("supported (AUC 0.86, null 95% band 0.31–0.71, p ≤ 1/200, "
                                      "n 40 high / 10 low)")
    row.update(verdict="not shown", p=0.21, auc=0.58, detectable_auc=0.714)
    assert av.verdict_phrase(row) == ("not shown to beat its null (AUC 0.58, null 95% band 0.31–0.71, p = 0.21; "
                                      "n 40 high / 10 low; detectable AUC 0.71)")


def test_unreadable_axes_and_an_old_table():
    table = pd.DataFrame({"dimension": ["warmth", "warmth", "competence", "religion"],
                          "layer": ["mean", "3", "mean", "mean"],
                          "verdict": ["supported", "not shown", "not shown", "untestable"]})
    assert av.unreadable_axes(table) == ["competence", "religion"]
    assert av.unreadable_axes(table, 3) == ["warmth"]
    with pytest.raises(ValueError, match="older version"):
        av.unreadable_axes(table.drop(columns="verdict").assign(beats_null=True))


# ----------------------------------------------------------------- a real model


@pytest.mark.slow
def test_axis_validity_on_smollm2_matches_an_independent_auc():
    from bias_utils.models.loading import load_model
    from bias_utils.profiles.dictionaries import load_dictionary
    from bias_utils.profiles.space import build_space, direction_prediction

    m = load_model("smollm2-135m-instruct")
    sp = build_space(m, load_dictionary(), "generated")
    got = av.axis_validity(m, sp, limit=12, n_permutations=20)
    assert list(got.columns) == av._COLUMNS and len(got) == 9 * (m.n_layers + 2)
    assert set(got["verdict"]) <= set(av.VERDICTS) and (got["term_contexts"] == "generated").all()
    # Table 2's own values of the same terms (same limit, seed and coverage rule), U from scipy
    values = direction_prediction(m, sp, limit=12, layer="mean", n_boot=10).values
    values = values[values["evaluation"] == "extra terms"]
    mean = got[got.layer == "mean"].set_index("dimension")
    for dim, v in values.groupby("dimension"):
        high = (v["direction"] == "high").to_numpy()
        x = v["value"].to_numpy()
        u = sps.mannwhitneyu(x[high], x[~high]).statistic / (high.sum() * (~high).sum())
        assert mean.loc[dim, "auc"] == pytest.approx(u)
        assert mean.loc[dim, "raw_accuracy"] == pytest.approx(((x > 0) == high).mean())
        assert (mean.loc[dim, "n_high"], mean.loc[dim, "n_low"]) == (high.sum(), (~high).sum())
    readable = set(mean.index) - set(av.unreadable_axes(got))
    assert readable == set(mean.index[mean["verdict"] == "supported"])
