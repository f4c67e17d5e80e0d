"""The verified data layer: manifest -> local cache -> mirror -> download, never unverified."""

import hashlib

import pytest

from bias_utils.core import data
from bias_utils.core.errors import DataError


def _sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_resolves_from_mirror_into_local_cache_and_verifies(isolated_data, real_mirror, monkeypatch):
    item = data.entry("schuster_terms")
    path = data.resolve("schuster_terms")
    assert path == isolated_data / "schuster_terms" / "terms.json"
    assert _sha256(path) == item.sha256 == _sha256(real_mirror / item.mirror_path)
    # The second call is served by the local cache alone.
    monkeypatch.setenv("BIAS_DATA_MIRROR", "")
    assert data.resolve("schuster_terms") == path


def test_corrupted_mirror_copy_is_refused_naming_file_and_hashes(isolated_data, real_mirror, tmp_path, monkeypatch):
    item = data.entry("schuster_names")
    mirror = tmp_path / "mirror"
    bad = mirror / item.mirror_path
    bad.parent.mkdir(parents=True)
    content = bytearray((real_mirror / item.mirror_path).read_bytes())
    content[10] ^= 0x01  # one flipped bit
    bad.write_bytes(bytes(content))
    monkeypatch.setenv("BIAS_DATA_MIRROR", str(mirror))
    with pytest.raises(DataError, match="failed verification") as err:
        data.resolve("schuster_names")
    message = str(err.value)
    assert "names.json" in message
    assert item.sha256 in message
    assert hashlib.sha256(bytes(content)).hexdigest() in message
    assert not (isolated_data / "schuster_names" / "names.json").exists()


def test_damaged_local_copy_is_replaced_from_the_mirror(isolated_data, real_mirror):
    item = data.entry("schuster_terms")
    path = data.resolve("schuster_terms")
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.warns(UserWarning, match="damaged cached copy"):
        again = data.resolve("schuster_terms")
    assert _sha256(again) == item.sha256


def test_missing_file_without_mirror_or_network_says_what_to_fetch_and_where(isolated_data, monkeypatch):
    monkeypatch.setenv("BIAS_DATA_MIRROR", "")
    item = data.entry("bold_gender_prompts")
    with pytest.raises(DataError) as err:
        data.resolve("bold_gender_prompts")
    message = str(err.value)
    assert item.url in message
    assert item.sha256 in message
    assert str(isolated_data / "bold_gender_prompts" / "gender_prompt.json") in message
    assert "BIAS_DATA_MIRROR" in message and "BIAS_OFFLINE" in message


def test_mirror_without_the_file_and_no_url_names_the_mirror_path(isolated_data, tmp_path, monkeypatch):
    monkeypatch.setenv("BIAS_DATA_MIRROR", str(tmp_path / "empty_mirror"))
    with pytest.raises(DataError, match="derived/nicolas2021_additional_terms_wordnet_examples.csv"):
        data.resolve("derived_additional_terms")


def test_real_mirror_profession_wiki_now_verifies(isolated_data, real_mirror):
    # The mirror's copy was once one byte off and refused; it is now the published file.
    item = data.entry("bold_profession_wiki")
    assert _sha256(real_mirror / item.mirror_path) == item.sha256
    assert _sha256(data.resolve("bold_profession_wiki")) == item.sha256


def test_unknown_key_lists_known_keys():
    with pytest.raises(DataError, match="schuster_seed_dictionary"):
        data.resolve("no_such_dataset")


@pytest.mark.parametrize("value, expected", [("1", True), ("TRUE", True), ("yes", True), ("0", False), ("", False)])
def test_offline_switch(monkeypatch, value, expected):
    monkeypatch.setenv("BIAS_OFFLINE", value)
    assert data._offline() is expected


def test_status_reports_every_manifest_entry(isolated_data, real_mirror, capsys):
    rows = {r["key"]: r for r in data._status()}
    assert set(rows) == set(data.manifest())
    assert [k for k, r in rows.items() if not r["ok"]] == []
    assert data._print_status() == 0
    assert "bold_profession_wiki" in capsys.readouterr().out


def test_status_reports_a_corrupt_mirror_copy(isolated_data, real_mirror, tmp_path, monkeypatch):
    item = data.entry("schuster_terms")
    copy = tmp_path / "mirror" / item.mirror_path
    copy.parent.mkdir(parents=True)
    copy.write_bytes((real_mirror / item.mirror_path).read_bytes() + b" ")
    monkeypatch.setenv("BIAS_DATA_MIRROR", str(tmp_path / "mirror"))
    rows = {r["key"]: r for r in data._status()}
    assert not rows["schuster_terms"]["ok"] and "expected sha256" in rows["schuster_terms"]["problem"]


def test_install_does_not_leave_temporary_files(isolated_data, real_mirror):
    data.resolve("schuster_terms")
    folder = isolated_data / "schuster_terms"
    assert [p.name for p in folder.iterdir()] == ["terms.json"]
