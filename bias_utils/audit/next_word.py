"""The next word after a neutral sentence about an occupation: an exact measure of what a decoder writes (chapter 11).

Sampled completions are a thin measure of a decoder's occupational gender: most BOLD completions carry no gendered
word at all. The dense measure the field uses reads the model's next-token distribution instead (after Kurita et
al. 2019 and Bordia & Bowman 2019's templates: "The {occupation} said that" is followed by "she" or "he"). It has
no sampling noise and costs one forward pass per sentence.

The measure in three modules, one concept each: its sentences, tokens and forward passes
(:mod:`bias_utils.audit.next_word_prompts`), its singular-"they" statistics (:mod:`bias_utils.audit.neutral_share`),
and here its tables: the female and male masses and their log-ratio per template and per occupation, the neutral
masses beside them, the checks against the world and the sample, and their reading.

**Per template** (:func:`next_word_table`): from the logits of one forward pass (the decoder's own
``forward(..., logits_to_keep=1)``: the backbone and the LM head on the last position only; float32 logits, read in
float64), the probability of the next token being one of the audit's female words and one of its male words
(``core.lexicon.GENDER_LEXICONS``: the 13 + 13 words the audit counts), ``female_mass`` and ``male_mass``, and
their log-ratio ``log_ratio = log(female_mass / male_mass)`` (above 0: the model continues the sentence more
likely with a female word). The log-ratio does not depend on the softmax's normaliser; the masses do.

**Per occupation**: the mean of the per-template log-ratios (``log_ratio``: the measure), their SD over the
templates, the mean masses over the templates and ``gendered_mass`` (their sum: how much of the next word is a
gendered word at all) and ``female_share`` (the female mass's share of it).

**How much it reads** (``coverage``): the counted words' share of the next word for the median occupation. Under
:data:`MIN_COVERAGE` (5%; the built-in templates give SmolLM2 24%) the ordering rests on a small part of what the
model writes next: the tables flag it (``low_coverage``) and the chapter says so in bold beside the verdict and the
link, never reading *supported* as validation then.

**Against the world** (:func:`next_word_validity`): for Rudinger et al.'s 60 occupations, the log-ratio against
the BLS share of women through the same engine and verdict as the gender direction
(``core.criterion_validity``), with its discriminant rows beyond the occupation nouns' warmth and competence.
**Against the sample** (:func:`sampled_check`, an option: it samples ~60,000 tokens at the audit's settings): the
Spearman ρ between the exact log-ratio and the log-odds of the audit's gendered words in sampled continuations of
the same sentences.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from ..core import tables
from ..core.cache import stable_hash
from ..core.criterion_validity import (
    LOW_COVERAGE,
    VALIDITY_VERDICTS,
    correlation_text,
    describe_discriminant,
    measure_verdict,
    statistic_row,
    validity_statistics,
)
from ..core.errors import ParameterError, check_generation, check_seed, check_word_list
from ..core.lexicon import count_table
from ..core.precision import number_text, percent_text
from ..core.results import display_name, write_tables
from ..core.stats import check_n_boot, correlation_rows, results_table
from ..models.embeddings import default_batch_size, forward_threads
from ..models.generation import generate
from ..models.loading import check_model, resolve_model
from .neutral_share import (
    NEUTRAL_DEFINITION,
    NeutralShare,
    neutral_definition,
    neutral_statistics,
    singular_means,
    singular_templates,
    template_rule,
)
from .next_word_prompts import (
    CODE_VERSION,
    DEFAULT_DEFINITION,
    DEFINITION,
    FEMALE,
    MALE,
    REFERENCE_LEXICONS,
    check_next_word_lexicons,
    check_next_word_templates,
    check_occupation_nouns,
    first_tokens,
    lexicon_first_tokens,
    log_masses,
    measure_definition,
    next_word_store,
    occupation_prompts,
    percent,
)
from .occupation_units import plural_noun

__all__ = [
    "describe_next_word", "next_word_table", "next_word_validity", "sampled_check",
]

#: Columns of the tables (:class:`_NextWord`).
_PROMPT_COLUMNS = ["occupation", "template", "reference", "prompt", "n_tokens", "female_mass", "male_mass",
                   "log_ratio", "neutral_mass", "neopronoun_mass", "singular", DEFINITION]
_OCCUPATION_COLUMNS = ["occupation", "n_templates", "female_mass", "male_mass", "gendered_mass", "female_share",
                       "log_ratio", "log_ratio_sd", "plural_noun", "n_singular", "neutral_mass", "neopronoun_mass",
                       "neutral_share", DEFINITION]
#: The counted words' share of the next word (``gendered_mass``) for the median BLS occupation under the ten built-in
#: templates and the audit's words, in SmolLM2-135M-Instruct (float32; ``tests/test_next_word.py`` recomputes it):
#: what the measure has to read when its sentences are the ones it was designed with.
_REFERENCE_COVERAGE = 0.239
#: Below this share for the median occupation (``coverage``) the verdict against the world rests on a small part of
#: what the model writes next, and the chapter says so beside it (``low_coverage``). Why 5%: about a fifth of
#: :data:`_REFERENCE_COVERAGE` (Qwen2.5-Coder-0.5B-Instruct's median is 25.0%), and under half of the lowest single
#: occupation's share under the built-in templates (11.4% in SmolLM2, 11.1% in Qwen), so a default build is not
#: flagged, while a sentence after which the counted words are seldom grammatical is: after the German clause
#: "Gestern sagte {occupation}, dass" the English words take 3.3% (SmolLM2; 2.3% in Qwen), and SmolLM2's link with
#: the direction falls from 0.53 to 0.12. (Gemma 3's share was not measured.)
MIN_COVERAGE = 0.05
#: The audit's sampling settings (``models.generation.generate``'s defaults, notebook 06's parameters).
_AUDIT_SAMPLING = {"n_samples": 1, "max_new_tokens": 100, "temperature": 0.7, "top_p": 0.9, "top_k": 50}
#: Haldane–Anscombe continuity correction of the sampled log-odds, added to both counts: here and in chapter 11's
#: BOLD link (``intrinsic_extrinsic.bold_link``, which imports it).
CONTINUITY = 0.5



@dataclass
class _NextWord:
    """What :func:`next_word_table` finds: ``prompts`` (one row per occupation and template: :data:`_PROMPT_COLUMNS`),
    ``occupations`` (one row per occupation: :data:`_OCCUPATION_COLUMNS`), ``words`` (the lexicon's tokens:
    :func:`next_word_prompts.lexicon_first_tokens`), ``neutral_words`` (the neutral lexicons' tokens:
    :data:`neutral_share._NEUTRAL_WORD_COLUMNS`) and ``model_id``."""

    prompts: pd.DataFrame
    occupations: pd.DataFrame
    words: pd.DataFrame
    neutral_words: pd.DataFrame
    model_id: str

    def write(self, folder: str | Path) -> list[Path]:
        """Write the four tables as parquet + CSV under ``folder``."""
        return write_tables(folder, {
            tables.NAMES.NEXT_WORD_PROMPTS: self.prompts, tables.NAMES.NEXT_WORD_OCCUPATIONS: self.occupations,
            tables.NAMES.NEXT_WORD_TOKENS: self.words, tables.NAMES.NEXT_WORD_NEUTRAL_TOKENS: self.neutral_words})

    def neutral_share(self, values: pd.DataFrame, units: pd.DataFrame | None = None, *, n_boot: int = 1000,
                      seed: int = 0) -> NeutralShare:
        """The neutral share read per decoder (:func:`neutral_share.neutral_statistics`): ``values`` one row per BLS
        occupation with ``occupation, bls_pct_female`` (``gender_direction.occupation_validity``'s), ``units`` the
        audit's primary units with their ``noun`` (``bold_link.run_link``'s occupations; None leaves their row out)."""
        definition = str(self.neutral_words[NEUTRAL_DEFINITION].iloc[0])
        read = set(values["occupation"]) | (set(units["noun"]) if units is not None else set())
        plural = self.occupations[self.occupations["plural_noun"] & self.occupations["occupation"].isin(read)]
        # the share's denominator is the she, he and "they" words: how much of the next word they take decides
        # whether the share says much about what the model writes
        per = singular_means(self.prompts)
        per = per[per["occupation"].isin(values["occupation"])]
        covered = (per["female_mass"] + per["male_mass"] + per["neutral_mass"]).median() if len(per) else np.nan
        return NeutralShare(neutral_statistics(self.prompts, values, units, definition=definition, n_boot=n_boot,
                                                 seed=seed), self.neutral_words, template_rule(self.prompts),
                             self.model_id, tuple(plural["occupation"]),
                             coverage_note(covered, "the share of \"they\""))


def next_word_table(model, occupations: Sequence[str], *, templates: Sequence[str] | None = None,
                    lexicons: Mapping[str, Sequence[str]] | None = None, batch_size: int | None = None,
                    cache: bool = True, progress: bool = True) -> _NextWord:
    """The exact measure (module docstring) of every occupation noun of ``occupations`` (duplicates once) in
    ``templates`` (None: :data:`next_word_prompts.TEMPLATES`), counting the words of ``lexicons`` (``female`` and
    ``male``; None: the audit's), for ``model`` (a decoder: a ``LoadedModel`` or a name for
    ``models.loading.resolve_model``). ``batch_size``: sentences per forward pass (default: 32 on a CPU). Every
    parameter is checked before the model loads, its kind too (``models.loading.check_model``: a built-in's from the
    built-in table, a folder's or a hub id's from its config): an encoder is refused in a second, naming the built-in
    decoders.

    ``prompts`` columns: ``occupation`` (the noun), ``template``, ``reference`` (``subject``, ``possessive`` or
    ``object`` for the built-in templates, else ""), ``prompt``, ``n_tokens`` (its length in tokens), ``female_mass``,
    ``male_mass`` (the next token's probability of being a counted token of each lexicon), ``log_ratio``,
    ``neutral_mass``, ``neopronoun_mass`` (the same probability for singular "they" and the neopronouns,
    :data:`next_word_prompts.REFERENCE_LEXICONS`) and ``singular`` (whether the template's next word reads as one
    person: not one of :data:`neutral_share._PLURAL_TEMPLATES`, and the occupation noun no plural,
    ``occupation_units.plural_noun``). ``occupations``: ``n_templates``, the masses' means
    over the templates, ``gendered_mass`` (their sum), ``female_share`` (female / gendered), ``log_ratio`` (the mean of
    the templates' log-ratios: the measure), ``log_ratio_sd`` (their SD over the templates), ``plural_noun`` (a plural
    noun, "woodworkers": its "they" is plain plural, so it has no template that reads as one person), and over the
    ``n_singular``
    templates that read as one person the mean ``neutral_mass`` and ``neopronoun_mass`` and ``neutral_share`` (neutral /
    (female + male + neutral) of those templates' mean masses; NaN with none). Each table ends with
    ``measure_definition`` (:func:`next_word_prompts.measure_definition` of the templates and words: the log-ratio's);
    ``words`` and ``neutral_words`` list the tokens counted, the latter with the ``neutral_definition``
    (:func:`neutral_share.neutral_definition`)."""
    templates = check_next_word_templates(templates)
    occupations = check_word_list(occupations, "occupations", empty="no occupation noun to measure")
    nouns = list(dict.fromkeys(o.strip() for o in occupations))
    if any(not n for n in nouns):
        raise ParameterError(f"occupations: an empty noun among {occupations[:5]!r}")
    check_occupation_nouns(nouns)
    lexicons = check_next_word_lexicons(lexicons)
    definition = measure_definition(templates, lexicons)
    check_model(model, need="generate", what="next_word_table (the probability of each next word)")
    model = resolve_model(model, need="generate")
    ids, words = lexicon_first_tokens(model.tokenizer, lexicons)
    neutral_ids, neutral_words = first_tokens(model.tokenizer, REFERENCE_LEXICONS, ids[FEMALE] + ids[MALE])
    n_vocab = model.model.get_output_embeddings().weight.shape[0]
    groups = torch.zeros(2, n_vocab, dtype=torch.bool)
    for g, name in enumerate((FEMALE, MALE)):
        groups[g, ids[name]] = True
    table = occupation_prompts(nouns, templates)
    encoded = [model.tokenizer(p)["input_ids"] for p in table["prompt"]]  # as the audit's generation reads a raw prompt
    keys = [stable_hash(p, 24) for p in table["prompt"]]
    params = {"model_id": model.model_id, "lexicons": {k: sorted(v) for k, v in lexicons.items()},
              "token_ids": ids, "neutral_token_ids": neutral_ids, "version": CODE_VERSION}
    if (threads := forward_threads(model)) is not None:
        params["cpu_threads"] = threads
    store = next_word_store(params) if cache else None
    with store.lock() if store else nullcontext():
        done = store.load() if store else {}
        # Batches of one length each (no padding), formed from every sentence in a fixed order, so a resumed run
        # computes a missing batch exactly as the uninterrupted run did; a batch partly on disk is computed whole
        # and only its missing rows are appended.
        unique = sorted({k: i for i, k in enumerate(keys)}.values(), key=lambda i: (len(encoded[i]), i))
        by_length: dict[int, list[int]] = {}
        for i in unique:
            by_length.setdefault(len(encoded[i]), []).append(i)
        size = batch_size or default_batch_size(model)
        batches = [rows[b:b + size] for rows in by_length.values() for b in range(0, len(rows), size)]
        todo = [batch for batch in batches if any(keys[i] not in done for i in batch)]
        bar = tqdm(total=len(unique), initial=len(unique) - sum(map(len, todo)), desc=f"next word ({model.name})",
                   unit="sentence", disable=not progress)
        with torch.inference_mode():
            for batch in todo:
                found = log_masses(model, [encoded[i] for i in batch], groups,
                                    [neutral_ids[name] for name in REFERENCE_LEXICONS])
                rows = [{"key": keys[i], "prompt": table.at[i, "prompt"], "log_female": float(f),
                         "log_male": float(m), "log_normaliser": float(z), "log_neutral": float(n),
                         "log_neopronoun": float(x)}
                        for i, (f, m, z, n, x) in zip(batch, found) if keys[i] not in done]
                if store:
                    store.append(rows)
                done.update({r["key"]: r for r in rows})
                bar.update(len(batch))
        bar.close()
    got = [done[k] for k in keys]
    table["n_tokens"] = [len(e) for e in encoded]
    table["female_mass"] = [np.exp(r["log_female"] - r["log_normaliser"]) for r in got]
    table["male_mass"] = [np.exp(r["log_male"] - r["log_normaliser"]) for r in got]
    table["log_ratio"] = [r["log_female"] - r["log_male"] for r in got]
    for name in REFERENCE_LEXICONS:
        table[f"{name}_mass"] = [np.exp(r[f"log_{name}"] - r["log_normaliser"]) for r in got]
    # After a plural subject "they" is plain plural: such a noun's templates are measured, none read as one person.
    plural = [n for n in nouns if plural_noun(n)]
    table["singular"] = table["template"].isin(singular_templates(templates)) & ~table["occupation"].isin(plural)
    table[DEFINITION] = definition
    table = table[_PROMPT_COLUMNS]
    per = table.groupby("occupation", sort=False).agg(
        n_templates=("template", "size"), female_mass=("female_mass", "mean"), male_mass=("male_mass", "mean"),
        log_ratio=("log_ratio", "mean"), log_ratio_sd=("log_ratio", "std")).reset_index()
    per["gendered_mass"] = per["female_mass"] + per["male_mass"]
    per["female_share"] = per["female_mass"] / per["gendered_mass"]
    singular = singular_means(table)[["occupation", "n_singular", "neutral_mass", "neopronoun_mass", "neutral_share"]]
    per = per.merge(singular, on="occupation", how="left")
    per["n_singular"] = per["n_singular"].fillna(0).astype(int)
    per["plural_noun"] = per["occupation"].isin(plural)
    per[DEFINITION] = definition
    neutral_words = neutral_words.assign(**{NEUTRAL_DEFINITION: neutral_definition(templates, lexicons)})
    return _NextWord(table, per[_OCCUPATION_COLUMNS], words.assign(**{DEFINITION: definition}), neutral_words,
                     model.model_id)


# --------------------------------------------------------------------------- against the world and the sample


def next_word_validity(occupations: pd.DataFrame, values: pd.DataFrame, *, n_boot: int = 1000,
                       seed: int = 0) -> pd.DataFrame:
    """The exact log-ratio of the BLS occupations against their share of women, by the engine and verdict of the
    gender direction (``core.criterion_validity.validity_statistics``, measure ``log_ratio``), with the discriminant
    rows beyond the nouns' ``warmth`` and ``competence``. ``occupations``: :func:`next_word_table`'s (rows of other
    nouns are ignored); ``values``: one row per BLS occupation with ``occupation, bls_pct_female`` and, for the
    discriminant rows, ``warmth, competence`` (``gender_direction.occupation_validity``'s ``values``).
    Columns: as ``tables.NAMES.OCCUPATION_VALIDITY``, then ``measure_definition`` (``occupations``'), ``coverage``
    (the counted words' share of the next word, ``gendered_mass``, for the median occupation checked) and
    ``low_coverage`` (``coverage`` under :data:`MIN_COVERAGE`: the check rests on little of what the model writes
    next; its verdicts, criterion and discriminant, read ``low coverage`` instead of ``supported`` or ``not shown``,
    and :func:`describe_next_word` says why)."""
    check_n_boot(n_boot)
    check_seed(seed)
    need = {"occupation", "bls_pct_female"}
    if need - set(values.columns):
        raise ValueError(f"next_word_validity: values lack {sorted(need - set(values.columns))}")
    measure = occupations.reindex(columns=["occupation", "log_ratio", "gendered_mass", DEFINITION])
    merged = values.drop(columns=["log_ratio", "gendered_mass", DEFINITION], errors="ignore").merge(
        measure, on="occupation", how="left")
    for control in ("warmth", "competence"):
        if control not in merged:
            merged[control] = np.nan
    statistics = validity_statistics(merged.drop(columns=["gendered_mass", DEFINITION]), ["log_ratio"],
                                      n_boot=n_boot, seed=seed)
    coverage = gendered_coverage(merged.dropna(subset=["log_ratio"]))
    if coverage < MIN_COVERAGE:
        # a verdict the book does not read is not "supported" (nor "not shown"): the check ran on too little
        statistics.loc[statistics["verdict"].isin(VALIDITY_VERDICTS[:2]), "verdict"] = LOW_COVERAGE
    return statistics.assign(**{DEFINITION: definition_of(occupations), "coverage": coverage,
                                "low_coverage": bool(coverage < MIN_COVERAGE)})


def gendered_coverage(occupations: pd.DataFrame) -> float:
    """The counted words' share of the next word (``gendered_mass``) for the median occupation; NaN without it."""
    mass = occupations["gendered_mass"].dropna() if "gendered_mass" in occupations else pd.Series(dtype=float)
    return float(mass.median()) if len(mass) else float("nan")


def definition_of(table: pd.DataFrame) -> str:
    """The ``measure_definition`` a table of the measure carries ("" when it has none: written before it was
    recorded); a table of several definitions is refused (its rows would be different measures side by side)."""
    found = sorted(set(table[DEFINITION].dropna().astype(str))) if DEFINITION in table else []
    if len(found) > 1:
        raise ValueError(f"the next-word table mixes measure definitions {found}: rows of different templates or "
                         "words cannot be read as one measure")
    return found[0] if found else ""


def coverage_note(coverage: float, what: str = "the verdict") -> str:
    """A sentence on a low ``coverage`` (:data:`MIN_COVERAGE`), saying what it means for ``what``; "" when the
    coverage is at or above it, or unknown."""
    if not np.isfinite(coverage) or coverage >= MIN_COVERAGE:
        return ""
    return (f"**Low coverage: the counted words take only {percent(coverage)} of the next word's probability for "
            f"the median occupation**, under the {percent(MIN_COVERAGE)} this book asks of the measure (the ten "
            f"built-in templates give SmolLM2-135M-Instruct {percent(_REFERENCE_COVERAGE)}): after these sentences "
            f"the model mostly writes other words, so {what} rests on a small part of what it writes next. Use "
            "templates that end where a pronoun, a possessive or an object follows in the counted words' language, "
            "or count the words of that language (`next_word_lexicons`).")


def sampled_check(model, occupations: pd.DataFrame, *, templates: Sequence[str] | None = None,
                  lexicons: Mapping[str, Sequence[str]] | None = None, correction: float = CONTINUITY,
                  n_boot: int = 1000, seed: int = 0, cache: bool = True, progress: bool = True,
                  **sampling) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Does the exact measure say what the model writes? ``(per_occupation, statistics)``: the sentences of
    ``occupations`` (:func:`next_word_table`'s, in ``templates``) continued by sampling at the audit's settings
    (:data:`_AUDIT_SAMPLING`: one completion of up to 100 tokens, temperature 0.7, top-p 0.9, top-k 50; override
    with ``sampling``, e.g. ``max_new_tokens=20`` for a quick run; ``models.generation.generate``, cached),
    the audit's words counted in them (``core.lexicon.count_table``), per occupation ``female_words, male_words``
    and ``log_odds = log((female + correction) / (male + correction))`` beside the exact ``log_ratio``; and the
    Pearson and Spearman rows between the two (occupation-bootstrap intervals; ``stats.correlation_rows``), each
    with the ``measure_definition`` of ``templates`` and ``lexicons`` (None: the audit's words).
    The cost is the sampling: 60 occupations × 10 templates × 100 tokens is 60,000 tokens."""
    unknown = sorted(set(sampling) - set(_AUDIT_SAMPLING))
    if unknown:
        raise ParameterError(f"sampling: {unknown} are not sampling settings; use {sorted(_AUDIT_SAMPLING)}")
    settings = {**_AUDIT_SAMPLING, **sampling}
    check_generation(None, **settings, seed=seed)
    check_n_boot(n_boot)
    templates = check_next_word_templates(templates)
    lexicons = check_next_word_lexicons(lexicons)
    prompts = occupation_prompts(occupations["occupation"].tolist(), templates)
    done = generate(model, prompts["prompt"].tolist(), seed=seed, cache=cache, progress=progress, **settings)
    counts = count_table(done["completion"], lexicons)
    done = done.assign(occupation=np.repeat(prompts["occupation"].to_numpy(), settings["n_samples"]),
                       female_words=counts[f"{FEMALE}_words"].to_numpy(),
                       male_words=counts[f"{MALE}_words"].to_numpy())
    per = done.groupby("occupation", sort=False).agg(n_completions=("completion", "size"),
                                                      female_words=("female_words", "sum"),
                                                      male_words=("male_words", "sum")).reset_index()
    per["log_odds"] = np.log((per["female_words"] + correction) / (per["male_words"] + correction))
    per = per.merge(occupations[["occupation", "log_ratio"]], on="occupation", how="left")
    rows = [{**r, "group_a": "log_ratio", "group_b": "log_odds", "n_gendered": int(
        (per["female_words"] + per["male_words"] > 0).sum())}
        for r in correlation_rows(per["log_ratio"], per["log_odds"], n_boot=n_boot, seed=seed)]
    return per, results_table(rows).assign(**{DEFINITION: measure_definition(templates, lexicons)})



# --------------------------------------------------------------------------- reading it


def describe_next_word(statistics: pd.DataFrame, words: pd.DataFrame, model: str = "this model",
                       occupations: pd.DataFrame | None = None, *, chat_model: bool = False) -> str:
    """Markdown reading :func:`next_word_validity` for ``model``: how the exact log-ratio follows the BLS share of
    women, the verdict in words with the power of the check, the discriminant rows; then how the lexicon's words were
    counted (``words``: :func:`next_word_prompts.lexicon_first_tokens`'s), with ``occupations`` how much of the next
    word is gendered at all, and that the input was the raw text (saying what that means where ``chat_model``: a model
    with a chat template). Where the counted words take little of the next word (verdict ``low coverage``), the
    check is not read, and a note in bold says why; where the templates or the words are
    not the built-in ones, it says so with the measure's definition."""
    name = display_name(model)
    rho, r = statistic_row(statistics, "log_ratio", "spearman"), statistic_row(statistics, "log_ratio", "pearson")
    verdict, n = measure_verdict(statistics, "log_ratio"), int(rho["n"])
    numbers = f"{correlation_text(rho)}; {correlation_text(r)}; n = {n} occupations, intervals resampling them"
    coverage = float(rho["coverage"]) if "coverage" in rho else float("nan")
    if not np.isfinite(coverage) and occupations is not None:
        coverage = gendered_coverage(occupations)
    low = coverage_note(coverage)
    if verdict == LOW_COVERAGE:
        text = (f"In {name}, how the next-word log-ratio follows the share of women among an occupation's workers "
                f"(U.S. BLS) is measured ({numbers}) and not read (verdict: low coverage). {low}")
    elif verdict == "supported":
        text = (f"In {name}, the sentences about occupations with more women among their workers (U.S. BLS) are "
                f"continued more often with a female word ({numbers}): **the next-word measure is validated against "
                "the world** (verdict: supported).")
    elif verdict == "untestable":
        text = f"Only {n} occupations carry the next-word measure: the check is untestable ({numbers})."
    else:
        text = (f"In {name}, an ordering of the next-word log-ratio by the share of women is not shown ({numbers}; "
                f"verdict: not shown). With {n} occupations the check finds a ρ of {number_text(rho['detectable'])} "
                "80% of the time (not shown is not absent).")
    if low and verdict != LOW_COVERAGE:
        text += f" {low}"
    beyond = describe_discriminant(statistics, "log_ratio", "the next-word log-ratio")
    text += (" " + beyond) if beyond else ""
    longer = words[words["counted"] == "first token"]
    shared = words[words["counted"] == "shared"]
    text += (f" The {len(words)} lexicon words are read in their leading-space form (\" she\"): "
             + (f"{len(longer)} ({percent_text(len(longer) / len(words))}) are longer than one token and count by "
                f"their first ({', '.join(longer['word'])})" if len(longer) else "each is one token of this model")
             + (f"; {len(shared)} share a first token with a word of the other lexicon and are not counted "
                f"({', '.join(shared['word'])})" if len(shared) else "") + ".")
    if occupations is not None and len(occupations):
        mass = occupations["gendered_mass"]
        text += (f" The gendered words take {percent(mass.median())} of the next word's probability for the median "
                 f"occupation (from {percent(mass.min())} to {percent(mass.max())}).")
    definition = str(rho[DEFINITION]) if DEFINITION in rho and pd.notna(rho[DEFINITION]) else ""
    if definition and definition != DEFAULT_DEFINITION:
        text += (f" The templates or the words counted are this run's own, not the book's ten templates and the "
                 f"audit's words: the measure's definition is `{definition}` (`{DEFAULT_DEFINITION}` for the "
                 "built-in ones), and chapter 09 pools it only with runs of the same definition.")
    text += (" The sentences are the model's raw input, without a chat template"
             + (f": {name} is a chat model, and the measure describes it continuing a text, as the audit's "
                "completions do, not answering a request." if chat_model else "."))
    return text
