"""The tokenisation confound: how many subword tokens each word takes, by group, and
whether a profile gap survives a regression on gender and token count (chapter 10).

A name the tokenizer splits into several pieces is embedded as the mean of those
pieces; if one group's names are split more often, a gap can be a token-count
effect. :func:`token_table` counts the tokens where the profile templates put the
word, :func:`token_shares` summarises them per group and :func:`token_regression`
refits the gap with the count as a covariate and on one-token words only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.stats import ols
from ..models.embeddings import find_word, token_indices
from .population_profiles import DEFAULT_TEMPLATES, fill_template

__all__ = [
    "token_regression", "token_shares", "token_table",
]


def _word_token_count(tokenizer, context: str, word: str) -> int:
    """Number of subword tokens ``word`` takes at its first occurrence in ``context`` (as ``embeddings`` locates it)."""

    span = find_word(context, word)
    if span is None:
        raise ValueError(f"word {word!r} not found in {context!r}")
    enc = tokenizer(context, return_offsets_mapping=True)
    return len(token_indices(enc["offset_mapping"], span))


def token_table(model, words: pd.DataFrame, template: str = DEFAULT_TEMPLATES[0]) -> pd.DataFrame:
    """Token count of every word inside ``template`` (by default "this is {word}": mid-sentence,
    after a space, where most templates put it). ``words``: ``population, group, word`` and
    optionally ``article`` (``PopulationEmbeddings.words``). Adds ``context, n_tokens``."""

    out = words.copy()
    article = out["article"] if "article" in out else pd.Series(False, index=out.index)
    out["context"] = [fill_template(template, w, bool(a)) for w, a in zip(out["word"], article)]
    out["n_tokens"] = [_word_token_count(model.tokenizer, c, w) for c, w in zip(out["context"], out["word"])]
    return out


def token_shares(tokens: pd.DataFrame) -> pd.DataFrame:
    """Per population and group: ``n, n_one_token, n_multi_token, share_one_token, mean_tokens``."""
    g = tokens.groupby(["population", "group"], sort=False)["n_tokens"]
    out = g.agg(n="size", n_one_token=lambda v: int((v == 1).sum()), mean_tokens="mean").reset_index()
    out["n_multi_token"] = out["n"] - out["n_one_token"]
    out["share_one_token"] = out["n_one_token"] / out["n"]
    return out[["population", "group", "n", "n_one_token", "n_multi_token", "share_one_token", "mean_tokens"]]


def token_regression(values: pd.DataFrame, tokens: pd.DataFrame, group_a: str = "female") -> pd.DataFrame:
    """Does the gap survive the token count? Per population and dimension, three fits of ``z``:

    ``gender``: z ~ 1 + [group == group_a]; ``gender + tokens``: z ~ 1 + [group ==
    group_a] + n_tokens; ``one-token words``: z ~ 1 + [group == group_a] on the
    words of one token only (matched on token count; left out when a group has
    fewer than two). ``values``: ``population, group, word, dimension, z``;
    ``tokens``: :func:`token_table`. Columns: ``population, dimension, model,
    term`` (``group_a`` = the gap, ``n_tokens``), ``coef, se, t, df, p, ci_low, ci_high, n``.
    """
    data = values.merge(tokens[["population", "group", "word", "n_tokens"]], on=["population", "group", "word"])
    rows = []
    for (pop, dim), d in data.groupby(["population", "dimension"], sort=False):
        a = (d["group"] == group_a).to_numpy(float)
        one = (d["n_tokens"] == 1).to_numpy()
        fits = [("gender", np.column_stack([np.ones(len(d)), a]), ["intercept", group_a], slice(None))]
        if d["n_tokens"].nunique() > 1:
            fits.append(("gender + tokens", np.column_stack([np.ones(len(d)), a, d["n_tokens"]]),
                         ["intercept", group_a, "n_tokens"], slice(None)))
        if min(a[one].sum(), (1 - a[one]).sum()) >= 2:
            fits.append(("one-token words", np.column_stack([np.ones(one.sum()), a[one]]), ["intercept", group_a], one))
        for name, X, names, keep in fits:
            fit = ols(d["z"].to_numpy()[keep], X, names)
            rows.append(fit[fit["term"] != "intercept"].assign(population=pop, dimension=dim, model=name, n=len(X)))
    out = pd.concat(rows, ignore_index=True)
    return out[["population", "dimension", "model", "term", "coef", "se", "t", "df", "p", "ci_low", "ci_high", "n"]]
