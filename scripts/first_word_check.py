"""Is a term's embedding usable when the term is the first word of its context?

Reproduces the measurement behind ``context_filters.quality_issue``'s first-word rule
(numbers quoted in ``bias_utils/context_filters.py`` and notebook 03): among the full
dictionary's extra terms, take the first 120 whose WordNet examples (first five)
include one starting with the term and at least two that do not; for every
example, the cosine (per layer, averaged over layers 1..L) between the term's
embedding there and the mean embedding of the term's non-first examples (itself
left out). Also counts published Llama-3 contexts that start with the term.

    python scripts/first_word_check.py smollm2-135m-instruct minilm-l6
"""

import sys

import numpy as np
import pandas as pd

from bias_utils.models.embeddings import embed_words
from bias_utils.profiles import context_filters as F
from bias_utils.profiles import contexts as C
from bias_utils.profiles.dictionaries import load_full_dictionary_terms, load_seed_dictionary


def main(models):
    published = C.build_contexts(load_seed_dictionary(), "generated").table
    print("published Llama-3 contexts:", len(published), "starting with the term:",
          sum(F.term_position(c, w) == 1 for c, w in zip(published.context, published.term)))
    t = C.build_contexts(load_full_dictionary_terms(), "dictionary", 5).table
    t["first"] = [F.term_position(c, w) == 1 for c, w in zip(t.context, t.term)]
    print("extra terms' WordNet examples:", len(t), "starting with the term:", int(t["first"].sum()))
    counts = t.groupby("sense_id")["first"].agg(["sum", "size"])
    ids = counts[(counts["sum"] >= 1) & (counts["size"] - counts["sum"] >= 2)].index[:120]
    sub = t[t.sense_id.isin(ids)].reset_index(drop=True)
    print("terms", len(ids), "examples", len(sub))
    for model in models:
        X = np.asarray(embed_words(model, sub.context.tolist(), sub.term.tolist(), progress=False).values)
        rows = []
        for idx in sub.groupby("sense_id").groups.values():
            for i in idx:
                others = [j for j in idx if j != i and not sub.loc[j, "first"]]
                a, b = X[i], X[others].mean(0)
                cos = (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
                rows.append({"first": bool(sub.loc[i, "first"]), "cosine": float(np.nanmean(cos[1:]))})
        print(model, pd.DataFrame(rows).groupby("first")["cosine"].agg(["mean", "count"]).round(3).to_dict("index"))


if __name__ == "__main__":
    main(sys.argv[1:] or ["smollm2-135m-instruct", "minilm-l6"])
