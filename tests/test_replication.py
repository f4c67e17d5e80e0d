"""bias_utils.audit.replication: the published audit re-analysed with our code."""

import re

import pytest

from bias_utils.audit import bold, replication
from bias_utils.report import rendering


@pytest.fixture(scope="module")
def published_metrics():
    return bold.completion_metrics(replication.load_published_completions())


def test_metrics_match_published_columns_row_by_row(published_metrics):
    assert replication.compare_published_columns(published_metrics).empty


@pytest.fixture(scope="module")
def rep():
    return replication.replicate_published_audit(n_boot=50)


def test_replication_agrees_to_three_significant_digits(rep):
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


def test_replication_rows_print_each_quantity_by_its_kind(rep):
    """Chapter 07's table: names, not keys; p values, counts and relative differences as the book prints them."""
    shown = replication.replication_rows(rep)
    assert len(shown) == len(rep) and list(shown["source"]) == list(rep["source"])
    assert not shown["quantity"].str.contains("_").any() and shown["quantity"].is_unique
    for (key, ours, rel), row in zip(rep[["quantity", "ours", "rel_diff"]].itertuples(index=False),
                                     shown.itertuples(index=False)):
        if key.startswith(("n_", "table_")) or key.endswith("_df"):  # a count: a whole number, no decimals
            assert row.ours == f"{round(ours):,}", (key, row.ours)
        elif re.search(r"(^|_)p(_|$)", key) and ours < 0.001:
            assert row.ours == "< 0.001", (key, row.ours)
        if rel == 0:
            assert row.rel_diff == "0"
        elif rel < 1e-12:  # float64 rounding, never its digits written out
            assert row.rel_diff == "< 10⁻¹²", (key, rel)
        else:
            mantissa, exponent = re.fullmatch(r"(\d\.\d) × 10⁻([⁰¹²³⁴⁵⁶⁷⁸⁹]+)", row.rel_diff).groups()
            power = int(exponent.translate(str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789")))
            assert abs(float(mantissa) * 10 ** -power - rel) <= 0.05 * 10 ** -power, (key, rel)
    # the chapter's table: neither a p written out in zeros nor a count with decimals
    page = rendering._table_html(shown)
    assert "0.0000" not in page and not re.search(r">\d+\.00<", page) and "table male" not in page
    with pytest.raises(ValueError, match="quantities"):
        replication.replication_rows(rep.assign(quantity="new_number"))
