"""What each BOLD key of a selection is: its kind (a person, a field, an event, a list), the unit it belongs to,
and whether the primary analysis uses it.

BOLD's keys are Wikipedia article titles, not occupations. Some name a person who does the work
("Midwife"), most of the audit's male-dominated keys name a field ("Civil_engineering"), and a few a day
("International_Nurses_Day"), a glossary or a document ("Nursing_care_plan"). Some keys are spelling variants
whose prompts are the same sentences ("Registered_Nurse", "Registered_nurse"), and one prompt set sits in both
of the audit's groups ("Social_Worker" male-dominated, "Social_worker" female-dominated).

The rules, all in code below:

- **Head noun.** The key as a lower-case phrase (``noun``); its head is the last word, or the word before
  the first "of" or "in" ("Glossary of civil engineering" -> glossary, "Road foreman of engines" -> foreman),
  reduced to its singular by WordNet's ``morphy`` ("woodworkers" -> woodworker).
- **Kind** of the head noun, from the lexicographer files of its WordNet 3.0 common-noun senses (senses whose
  lemma is the head itself, in lower case, and not an instance, so "Day" the writer does not make "day" a
  person). Precedence, first match wins: a ``noun.person`` sense -> ``person``; a ``noun.communication``
  sense under list, word book or written record -> ``list``; a ``noun.cognition`` sense under
  ``knowledge_domain.n.01`` (a discipline) or a ``noun.act`` sense -> ``field``; a ``noun.time`` or
  ``noun.event`` sense -> ``event``; anything else -> ``other`` ("plan" is an idea, a compact an agreement).
  A field comes before an event because many activities also have an event sense (a drama, a dance); a
  person comes first because a person noun's other senses (a golf driver, a maths operator) are not what a
  job title means. A head WordNet lacks is decided by its suffix (:data:`SUFFIX_KINDS`);
  :data:`HEAD_OVERRIDES`, checked first, holds the heads neither settles, each with its reason; a head no rule
  settles is ``other``. See :data:`KINDS`.
- **Units.** Keys of one group whose prompt sets (the sets of prompt texts) are identical are one unit. Its
  kind is ``person`` when every key of it names a person, else the kind of its first key that does not (the
  prompts of "Security_engineer" are the article on security engineering, which is also
  "Security_engineering"'s). The unit is named by the noun of its first key of that kind, in the selection's
  order (the *canonical* key); the other keys are its duplicates.
- **Group conflicts.** A unit whose prompt set is also a unit of another group cannot be both male- and
  female-dominated: it is named (``conflict``), left out of the primary two-group analysis and kept in the
  published selection, which stays as it is for the sensitivity analysis.
- **Primary units** are person-noun units without a group conflict, one row (the canonical key) each.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from ..core.errors import ParameterError
from ..core.wordnet import wordnet
from ..report import rendering
from . import bold_prompts

__all__ = [
    "annotate", "describe_units", "primary_completions",
]

#: The kinds of a BOLD key, and what each means.
_KINDS = {
    "person": "a noun for a person who does the work (engineer, midwife, tailor)",
    "field": "a discipline, activity or domain (civil engineering, construction, wound care, nurse education)",
    "event": "a day or event (International Nurses Day)",
    "list": "a glossary, list or register (Glossary of engineering, Nurse registry)",
    "other": "a document or agreement (Nursing care plan, Nurse Licensure Compact)",
}

#: Heads that WordNet 3.0 lacks, by suffix: (suffix, kind), the first that matches wins.
_SUFFIX_KINDS = (
    ("engineering", "field"), ("ology", "field"), ("ing", "field"), ("ics", "field"),
    ("maker", "person"), ("smith", "person"), ("wife", "person"), ("man", "person"), ("ian", "person"),
    ("ist", "person"), ("er", "person"), ("or", "person"),
)

#: Heads that neither WordNet 3.0 nor a suffix settles: head -> (kind, reason).
_HEAD_OVERRIDES = {
    "licensure": ("field", "'licensure' (not in WordNet 3.0, no suffix rule) is the process of granting "
                           "licences, an activity"),
}

#: Columns of :func:`unit_table`.
_UNIT_COLUMNS = ["group", "key", "categories", "n_prompts", "n_distinct_prompts", "noun", "head", "kind",
                "kind_rule", "unit", "unit_kind", "duplicate_of", "conflict", "primary"]
#: Columns of :func:`partial_overlaps`.
_OVERLAP_COLUMNS = ["group", "key", "other_group", "other_key", "n_shared", "n_distinct_prompts",
                   "other_n_distinct_prompts"]
#: Columns of :func:`unit_counts`.
_COUNT_COLUMNS = ["group", "kind", "keys", "units", "primary_units", "duplicate_keys", "conflict_units"]

# A noun.communication sense under one of these names a list of items (glossary -> wordbook, register ->
# written record).
_LIST_SYNSETS = ("list.n.01", "wordbook.n.01", "written_record.n.01")
_DISCIPLINE = "knowledge_domain.n.01"
_EVENT_FILES = ("noun.time", "noun.event")


def key_noun(key: str) -> str:
    """A BOLD key as a lower-case phrase: underscores as spaces, runs of white space as one (``Registered_Nurse`` ->
    ``registered nurse``); the one rule for a key's noun (:func:`_head_noun`; chapter 11's
    ``intrinsic_extrinsic.bold_link.occupation_noun``)."""
    return " ".join(str(key).replace("_", " ").split()).lower()


def _written_head(key: str) -> tuple[str, str]:
    """``(noun, head)`` of a BOLD key: the key as a lower-case phrase (:func:`key_noun`) and its head noun as
    written."""
    noun = key_noun(key)
    words = [w.strip(",;:()\"'") for w in noun.split()]
    words = [w for w in words if w]
    if not words:
        raise ParameterError(f"key: {key!r} has no word to take a head noun from")
    # A prepositional post-modifier follows the head: "glossary of civil engineering", "nursing in germany".
    after = next((i for i, w in enumerate(words) if i and w in ("of", "in")), None)
    return noun, words[after - 1] if after else words[-1]


def _head_noun(key: str) -> tuple[str, str]:
    """``(noun, head)`` of a BOLD key: :func:`_written_head`'s, the head singular (WordNet's ``morphy``)."""
    noun, head = _written_head(key)
    return noun, wordnet().morphy(head, "n") or head


def plural_noun(noun: str) -> bool:
    """Whether an occupation noun names more than one person: its head noun (:func:`_written_head`: the word before
    "of" or "in", else the last) is an inflected plural by WordNet's ``morphy`` ("woodworkers" -> woodworker; "road
    foreman of engines" is one foreman). A head WordNet does not know is plural where it is a person suffix's word
    plus "s" ("moldmakers", :data:`_SUFFIX_KINDS`), else read as written: singular."""
    head = _written_head(noun)[1]
    singular = wordnet().morphy(head, "n")
    if singular is None:
        return head.endswith("s") and any(head[:-1].endswith(suffix) for suffix, kind in _SUFFIX_KINDS
                                          if kind == "person")
    return singular != head


def _is_under(synset, names) -> bool:
    return any(s.name() in names for path in synset.hypernym_paths() for s in path)


def _wordnet_kind(head: str) -> tuple[str, str] | None:
    lemma = head.replace(" ", "_")
    senses = [x.synset() for x in wordnet().lemmas(lemma, "n")
              if x.name() == lemma and not x.synset().instance_hypernyms()]
    if not senses:
        return None
    rules = (
        ("person", lambda s: s.lexname() == "noun.person", "a noun.person sense"),
        ("list", lambda s: s.lexname() == "noun.communication" and _is_under(s, _LIST_SYNSETS),
         "a noun.communication sense that is a list, word book or written record"),
        ("field", lambda s: s.lexname() == "noun.cognition" and _is_under(s, (_DISCIPLINE,)),
         "a noun.cognition sense that is a discipline"),
        ("field", lambda s: s.lexname() == "noun.act", "a noun.act sense"),
        ("event", lambda s: s.lexname() in _EVENT_FILES, "a {lexname} sense"),
    )
    for kind, matches, phrase in rules:
        hit = next((s for s in senses if matches(s)), None)
        if hit is not None:
            return kind, f"WordNet: '{head}' has {phrase.format(lexname=hit.lexname())} ({hit.name()})"
    files = ", ".join(sorted({s.lexname() for s in senses}))
    return "other", (f"WordNet: '{head}' has only {files} senses (no person, time, list, act or discipline "
                     "sense)")


def _key_kind(head: str) -> tuple[str, str]:
    """``(kind, kind_rule)`` of a head noun: :data:`HEAD_OVERRIDES`, else WordNet 3.0, else a suffix; a head
    none of them settles is ``other``. ``kind_rule`` says which rule decided, in words."""
    if head in _HEAD_OVERRIDES:
        kind, reason = _HEAD_OVERRIDES[head]
        return kind, f"override: {reason}"
    decided = _wordnet_kind(head)
    if decided is not None:
        return decided
    # A plural WordNet does not know ("moldmakers") is matched by its singular's suffix.
    for word in (head, head[:-1]) if head.endswith("s") else (head,):
        for suffix, kind in _SUFFIX_KINDS:
            if word.endswith(suffix):
                meaning = "a field" if kind == "field" else "a person"
                return kind, f"suffix rule: '-{suffix}' names {meaning} ('{head}' is not in WordNet)"
    return "other", f"no rule: '{head}' is not in WordNet and has no known suffix"


def _key_table(sel: pd.DataFrame) -> pd.DataFrame:
    """One row per (group, key) in the selection's order, with its prompt set."""
    cats = sel["category"] if "category" in sel.columns else pd.Series("", index=sel.index)
    frame = sel.assign(_category=cats.astype(str))
    grouped = frame.groupby(["group", "occupation"], sort=False)
    keys = grouped.agg(categories=("_category", lambda c: "; ".join(dict.fromkeys(x for x in c if x))),
                       n_prompts=("prompt", "size"), n_distinct_prompts=("prompt", "nunique"),
                       prompts=("prompt", frozenset)).reset_index()
    return keys.rename(columns={"occupation": "key"})


def _selection(selection, name: str) -> pd.DataFrame:
    sel = bold_prompts.resolve_selection(selection)
    if sel.empty:
        raise ParameterError(f"{name}: the selection has no prompts")
    return sel


def unit_table(selection: "str | Mapping[str, str] | pd.DataFrame" = "audit") -> pd.DataFrame:
    """One row per (group, BOLD key) of a selection (``"audit"``, ``"categories"``, an occupation -> group
    mapping or file, or a selection table): what the key is and which unit it belongs to.

    Columns (:data:`UNIT_COLUMNS`): ``group, key``; ``categories`` ("; "-joined BOLD categories);
    ``n_prompts``, ``n_distinct_prompts`` (prompt texts); ``noun``, ``head``, ``kind``, ``kind_rule`` (the
    module's rules, :func:`key_kind`); ``unit`` (the canonical unit's name: the noun of its canonical key),
    ``unit_kind``; a second unit of a group with the same noun is named "noun (Key)"; ``duplicate_of`` (the
    canonical key this key's identical prompt set merges into, else "");
    ``conflict`` ("group/key; ..." of the keys of other groups that hold the same prompt set, else "");
    ``primary`` (True on the canonical row of a person-noun unit without a conflict). With
    ``"categories"`` the groups are BOLD categories, so a key listed in two categories is a conflict.
    """
    keys = _key_table(_selection(selection, "selection"))
    nouns = [_head_noun(k) for k in keys["key"]]
    keys["noun"] = [n for n, _ in nouns]
    keys["head"] = [h for _, h in nouns]
    decided = {h: _key_kind(h) for h in dict.fromkeys(keys["head"])}
    keys["kind"] = [decided[h][0] for h in keys["head"]]
    keys["kind_rule"] = [decided[h][1] for h in keys["head"]]

    keys["unit"] = keys["unit_kind"] = keys["duplicate_of"] = keys["conflict"] = ""
    taken: set[tuple] = set()
    for (group, _), unit in keys.groupby(["group", "prompts"], sort=False):
        kinds = unit["kind"]
        unit_kind = "person" if (kinds == "person").all() else kinds[kinds != "person"].iloc[0]
        canonical = unit.index[(kinds == unit_kind).to_numpy()][0]
        name = keys.at[canonical, "noun"]
        if (group, name) in taken:  # case variants of one noun whose prompts differ stay two units
            name = f"{name} ({keys.at[canonical, 'key']})"
        taken.add((group, name))
        keys.loc[unit.index, ["unit", "unit_kind"]] = [name, unit_kind]
        keys.loc[unit.index.drop(canonical), "duplicate_of"] = keys.at[canonical, "key"]
    for _, same in keys.groupby("prompts", sort=False):
        for i in same.index:
            others = same[same["group"] != keys.at[i, "group"]]
            keys.at[i, "conflict"] = "; ".join(others["group"].astype(str) + "/" + others["key"])
    keys["primary"] = (keys["duplicate_of"] == "") & (keys["unit_kind"] == "person") & (keys["conflict"] == "")
    return keys[_UNIT_COLUMNS]


def _partial_overlaps(selection: "str | Mapping[str, str] | pd.DataFrame" = "audit") -> pd.DataFrame:
    """Pairs of keys (any groups) that share some prompt texts but not all: information, not merged.

    One row per pair (:data:`OVERLAP_COLUMNS`), the pair in the selection's order; on the audit's
    selection "Transport_engineering"'s one prompt is among "Transportation_engineering"'s four.
    """
    keys = _key_table(_selection(selection, "selection"))
    holders: dict[str, list[int]] = {}
    for i, prompts in enumerate(keys["prompts"]):
        for text in prompts:
            holders.setdefault(text, []).append(i)
    pairs = sorted({(a, b) for idx in holders.values() for a in idx for b in idx if a < b})
    rows = []
    for a, b in pairs:
        pa, pb = keys.at[a, "prompts"], keys.at[b, "prompts"]
        if pa != pb:
            rows.append((keys.at[a, "group"], keys.at[a, "key"], keys.at[b, "group"], keys.at[b, "key"],
                         len(pa & pb), len(pa), len(pb)))
    return pd.DataFrame(rows, columns=_OVERLAP_COLUMNS)


def _check_units(units: pd.DataFrame) -> None:
    if not isinstance(units, pd.DataFrame) or set(_UNIT_COLUMNS) - set(units.columns):
        raise ParameterError(f"units: expected the table of unit_table() with columns {_UNIT_COLUMNS}")


def unit_counts(units: pd.DataFrame) -> pd.DataFrame:
    """Per group and kind (every kind of :data:`KINDS`, zeros included), of a :func:`unit_table`:

    ``keys`` (BOLD keys of that kind), ``units`` (canonical keys, i.e. units of that kind), ``primary_units``,
    ``duplicate_keys`` (keys merged into another key of their group: ``keys = units + duplicate_keys``) and
    ``conflict_units`` (units whose prompt set is also another group's). Columns :data:`COUNT_COLUMNS`.
    """
    _check_units(units)
    canonical = units["duplicate_of"] == ""
    rows = []
    for group in dict.fromkeys(units["group"]):
        mine = units["group"] == group
        for kind in _KINDS:
            of_kind = mine & (units["kind"] == kind)
            rows.append((group, kind, int(of_kind.sum()), int((of_kind & canonical).sum()),
                         int((of_kind & units["primary"]).sum()), int((of_kind & ~canonical).sum()),
                         int((of_kind & canonical & (units["conflict"] != "")).sum())))
    return pd.DataFrame(rows, columns=_COUNT_COLUMNS)


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _joined(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


_KIND_NOUNS = {"person": ("person noun", "person nouns"), "field": ("field", "fields"),
               "event": ("event", "events"), "list": ("list", "lists"),
               "other": ("other text (a document or agreement)", "other texts (documents or agreements)")}
_RULE_SOURCES = (("WordNet", "WordNet 3.0"), ("suffix", "the suffix rule"), ("override", "a stated override"),
                 ("no rule", "no rule"))


def describe_units(units: pd.DataFrame) -> str:
    """Two sentences with the counts of :func:`unit_counts`, how the kinds were decided and the conflicts'
    names, for the front page and chapter 06."""
    counts = unit_counts(units)
    by_group = counts.groupby("group", sort=False)[["keys", "primary_units"]].sum()
    by_kind = counts.groupby("kind", sort=False)["keys"].sum()

    def per_group(column: str) -> str:
        return ", ".join(f"{by_group.at[g, column]} {rendering.group_label(g)}" for g in by_group.index)

    kinds = [_plural(int(by_kind[k]), *_KIND_NOUNS[k]) for k in _KINDS if by_kind[k]]
    sources = [f"{name} for {n}" for prefix, name in _RULE_SOURCES
               if (n := int(units["kind_rule"].str.startswith(prefix).sum()))]
    first = (f"The selection's {_plural(len(units), 'BOLD key', 'BOLD keys')} ({per_group('keys')}) are "
             f"{_joined(kinds)}, by their head noun ({_joined(sources)}).")
    n_dup, n_units = int(counts["duplicate_keys"].sum()), int(counts["units"].sum())
    merged = (f"{_plural(n_dup, 'key holds', 'keys hold')} exactly the prompts of another key of "
              f"{'its' if n_dup == 1 else 'their'} group and {'is' if n_dup == 1 else 'are'} merged into it, "
              f"leaving {_plural(n_units, 'unit', 'units')}" if n_dup else
              f"no key holds exactly the prompts of another key of its group, so the {n_units} keys are the units")
    second = (f"{merged}; the primary analysis uses the "
              f"{int(counts['primary_units'].sum())} person-noun units ({per_group('primary_units')})")
    conflicted = units[(units["duplicate_of"] == "") & (units["conflict"] != "")]
    named = [f'"{unit}" (the same prompts in the {_joined([rendering.group_label(g) for g in groups])} groups)'
             for unit, groups in conflicted.groupby("unit", sort=False)["group"]]
    second += f" without a group conflict, leaving out {'; '.join(named)}." if named else "."
    return f"{first} {second[0].upper()}{second[1:]}"


def _primary_selection(selection: "str | Mapping[str, str] | pd.DataFrame", units: pd.DataFrame) -> pd.DataFrame:
    """The selection restricted to its primary units, with a ``unit`` column (the canonical name) after
    ``group``.

    Only the canonical key's prompts are kept: a duplicate key's prompts are the same texts, so its
    completions would sample the same prompts again. Within a unit each distinct prompt text is kept once (its
    first row in the selection's order), so a prompt listed under two BOLD categories is sampled once. The
    published selection is not changed; it stays the sensitivity analysis. ``units`` must be
    :func:`unit_table` of this selection.
    """
    sel = _selection(selection, "selection")
    _check_units(units)
    pairs = set(zip(sel["group"], sel["occupation"]))
    listed = set(zip(units["group"], units["key"]))
    if pairs != listed:
        raise ParameterError(f"units: not the unit table of this selection ({len(pairs - listed)} (group, key) "
                             f"pairs of the selection are not in it, e.g. {sorted(pairs - listed)[:3]}; "
                             f"{len(listed - pairs)} of its rows are not in the selection)")
    primary = units[units["primary"]].set_index(["group", "key"])["unit"]
    index = pd.MultiIndex.from_arrays([sel["group"], sel["occupation"]])
    kept = sel.assign(unit=primary.reindex(index).to_numpy())
    kept = kept[kept["unit"].notna()].drop_duplicates(["group", "unit", "prompt"])
    columns = ["group", "unit"] + [c for c in sel.columns if c not in ("group", "unit")]
    return kept[columns].reset_index(drop=True)


def annotate(completions: pd.DataFrame, selection: "str | Mapping[str, str] | pd.DataFrame | None" = None,
             units: pd.DataFrame | None = None) -> pd.DataFrame:
    """``completions`` (rows with ``group``, ``occupation`` (the BOLD key) and ``prompt_id``) with three columns
    added: ``unit`` (the canonical unit of its key), ``unit_kind`` and ``in_primary`` (its prompt is one that
    :func:`primary_selection` keeps: a person-noun unit without a group conflict, the canonical key, each distinct
    prompt text once). ``selection``: what the completions were sampled from; None takes it from the completions'
    own prompts (they then need ``prompt``). ``units``: :func:`unit_table` of ``selection`` (computed when None)."""
    missing = {"group", "occupation", "prompt_id"} - set(completions.columns)
    if missing:
        raise ParameterError(f"completions: lacks columns {sorted(missing)} (the audit's per-completion rows)")
    if selection is None:
        if "prompt" not in completions:
            raise ParameterError("completions: without a selection, the completions need their 'prompt' column to "
                                 "find their units")
        columns = [c for c in ("group", "category", "occupation", "prompt", "prompt_id") if c in completions]
        selection = completions.drop_duplicates("prompt_id")[columns].reset_index(drop=True)
    units = unit_table(selection) if units is None else units
    kept = _primary_selection(selection, units)
    info = units.set_index(["group", "key"])[["unit", "unit_kind"]]
    out = completions.drop(columns=["unit", "unit_kind", "in_primary"], errors="ignore").join(
        info, on=["group", "occupation"])
    if out["unit"].isna().any():
        bad = out.loc[out["unit"].isna(), ["group", "occupation"]].drop_duplicates().head(3).values.tolist()
        raise ParameterError(f"units: {int(out['unit'].isna().sum())} completions have no unit (group, key), "
                             f"e.g. {bad}")
    out["in_primary"] = out["prompt_id"].isin(kept["prompt_id"])
    return out


#: Columns of :func:`excluded_completions` (the ``bold_excluded`` table).
_EXCLUDED_COLUMNS = ["group", "reason", "why", "keys", "n_keys", "n_completions", "n_gendered_completions",
                     "male_words", "female_words"]
#: Why a completion is not in the primary analysis, in the order the reasons are decided (the first that holds).
_EXCLUSIONS = {
    "group conflict": "the prompt set is a unit of both groups, which cannot be both male- and female-dominated",
    "not a person noun": "the key names a field, an event, a list or a document, not a person who does the work",
    "duplicate key": "the key holds exactly the prompts of another key of its group (a spelling variant), so its "
                     "completions sample the same prompts again",
    "second category": "the prompt is listed under a second BOLD category of the same key, so its completions "
                       "sample the same prompt again",
    "repeated prompt": "the prompt text is listed twice under the same key and category, so its completions sample "
                       "the same prompt again",
}


_EXCLUSION_NAMES = {"group conflict": "a group conflict", "not a person noun": "a key that is not a person noun",
                    "duplicate key": "a duplicate key", "second category": "a prompt's second category",
                    "repeated prompt": "a repeated prompt"}


def excluded_completions(metrics: pd.DataFrame, units: pd.DataFrame | None = None) -> pd.DataFrame:
    """What the primary analysis leaves out of ``metrics`` (completions with ``group, occupation`` (the BOLD key),
    ``prompt_id``, ``prompt``, ``in_primary`` and the word counts; :func:`annotate`), by group and reason (the
    keys of :data:`EXCLUSIONS`, the first that holds): one row per (group, reason) with ``why`` (the reason in
    words), ``keys`` (its BOLD keys, "; "-joined) and ``n_keys``, ``n_completions``, ``n_gendered_completions``,
    ``male_words``, ``female_words``. ``units``: :func:`unit_table` of the completions' selection (None: from the
    completions' own prompts). Empty (these columns) when nothing is left out."""
    missing = {"group", "occupation", "prompt_id", "prompt", "in_primary", "male_words", "female_words"} - set(metrics)
    if missing:
        raise ParameterError(f"metrics: lacks columns {sorted(missing)} (annotated per-completion metrics)")
    if units is None:
        columns = [c for c in ("group", "category", "occupation", "prompt", "prompt_id") if c in metrics]
        units = unit_table(metrics.drop_duplicates("prompt_id")[columns].reset_index(drop=True))
    _check_units(units)
    info = units.set_index(["group", "key"])[["unit", "unit_kind", "duplicate_of", "conflict"]]
    m = metrics.drop(columns=["unit", "unit_kind"], errors="ignore").join(info, on=["group", "occupation"])
    category = m["category"].astype(str) if "category" in m else pd.Series("", index=m.index)
    kept = m[m["in_primary"].astype(bool)].assign(_category=category)
    kept_categories = kept.groupby(["group", "unit", "prompt"])["_category"].agg(set)
    dropped = m[~m["in_primary"].astype(bool)].assign(_category=category)
    again = [kept_categories.get((g, u, p), set()) for g, u, p in zip(dropped["group"], dropped["unit"],
                                                                      dropped["prompt"])]
    reason = np.select(
        [dropped["conflict"] != "", dropped["unit_kind"] != "person", dropped["duplicate_of"] != "",
         [c not in seen for c, seen in zip(dropped["_category"], again)]],
        list(_EXCLUSIONS)[:4], default="repeated prompt")
    dropped = dropped.assign(reason=reason, _gendered=(dropped["male_words"] + dropped["female_words"]) > 0)
    rows = []
    for (group, why), part in dropped.groupby(["group", "reason"], sort=False):
        keys = list(dict.fromkeys(part["occupation"].astype(str)))
        rows.append((group, why, _EXCLUSIONS[why], "; ".join(keys), len(keys), len(part), int(part["_gendered"].sum()),
                     int(part["male_words"].sum()), int(part["female_words"].sum())))
    out = pd.DataFrame(rows, columns=_EXCLUDED_COLUMNS)
    order = {r: i for i, r in enumerate(_EXCLUSIONS)}
    return out.sort_values(["group", "reason"], key=lambda c: c.map(order) if c.name == "reason" else c,
                           kind="stable").reset_index(drop=True)


def describe_excluded(excluded: pd.DataFrame, n_completions: int) -> str:
    """One sentence: how many of ``n_completions`` the primary analysis leaves out, and per reason how many
    completions and gendered words, with why."""
    if excluded.empty:
        return f"The primary analysis keeps all {n_completions:,} completions."
    total = int(excluded["n_completions"].sum())
    by = excluded.groupby("reason", sort=False)[["n_completions", "male_words", "female_words", "n_keys"]].sum()
    by = by.reindex([r for r in _EXCLUSIONS if r in by.index])
    parts = [f"{_plural(int(r.n_completions), 'completion', 'completions')} of "
             f"{_plural(int(r.n_keys), 'key', 'keys')} for {_EXCLUSION_NAMES[why]} "
             f"({_plural(int(r.male_words + r.female_words), 'gendered word', 'gendered words')}: "
             f"{int(r.male_words)} male, {int(r.female_words)} female), as {_EXCLUSIONS[why]}"
             for why, r in by.iterrows()]
    return (f"The primary analysis leaves out {total:,} of the {n_completions:,} completions, each for the first "
            f"reason that holds: {'; '.join(parts)}.")


def primary_completions(completions: pd.DataFrame) -> pd.DataFrame:
    """The completions of the primary units (``in_primary``, :func:`annotate`; found from the completions' own
    prompts where a results table predates the units), with ``occupation`` the unit (the deduplicated person-noun
    occupation) and ``key`` the BOLD key it was sampled under: what chapters 08 and 11 analyse."""
    if not {"unit", "in_primary"} <= set(completions.columns):
        completions = annotate(completions)
    primary = completions[completions["in_primary"].astype(bool)]
    return primary.assign(key=primary["occupation"], occupation=primary["unit"])
