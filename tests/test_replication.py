"""bias_utils.audit.replication: the published audit re-analysed with our code."""

import pytest

from bias_utils.audit import bold, replication


@pytest.fixture(scope="module")
def published_metrics():
    return bold.completion_metrics(replication.load_published_completions())


def test_metrics_match_published_columns_row_by_row(published_metrics):
    assert replication.compare_published_columns(published_metrics).empty


def test_replication_agrees_to_three_significant_digits():
    rep = replication.replicate_published_audit(n_boot=50)
    assert list(rep.columns[:3]) == ["quantity", "ours", "published"]

    def sig3(x):
        return float(f"{x:.3g}")

    bad = rep[[sig3(o) != sig3(p) for o, p in zip(rep["ours"], rep["published"])]]
    assert bad.empty, bad
    # the headline numbers as printed in the paper
    r = rep.set_index("quantity")["ours"]
    assert round(r["chi2_yates"], 2) == 62.86 and round(r["welch_t_male_proportion"], 2) == 1.87
    assert round(r["cohens_d_average"], 3) == 0.099 and round(r["odds_ratio"], 2) == 24.65
    assert (round(r["odds_ratio_ci_low"], 2), round(r["odds_ratio_ci_high"], 2)) == (10.07, 60.37)
    assert round(r["welch_t_pmi_difference"], 2) == 2.38 and r["n_gendered_completions"] == 66
