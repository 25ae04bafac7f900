"""benchmarks/device_kit.py without the network: the data archive holds exactly the folders of the
parts asked for; a missing data folder is refused in one line before any archive is written; a kit
over the travel limit is refused in one line (its archive stays, to be repacked with fewer parts)."""
import sys
import tarfile

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import device_kit  # noqa: E402


@pytest.fixture
def kit(tmp_path, monkeypatch):
    data = tmp_path / "data"
    for folder in ("tvsub_zh_en", "wmt22_generaltest_zh_en", "wmt_newstest_zh_en", "tatoeba_cmn_eng"):
        (data / folder).mkdir(parents=True)
        (data / folder / "part.txt").write_text(f"{folder}\n", encoding="utf-8")

    def fetch_wheels(target, python_version):
        target.mkdir(parents=True, exist_ok=True)
        (target / f"jieba-0.42.1-py3-none-any-{python_version}.whl").write_bytes(b"wheel")

    monkeypatch.setattr(device_kit, "DATA", data)
    monkeypatch.setattr(device_kit, "KIT", tmp_path / ".device")
    monkeypatch.setattr(device_kit, "fetch_wheels", fetch_wheels)
    return tmp_path


def test_archive_holds_the_parts_folders_and_the_calls_are_printed(kit, capsys):
    assert device_kit.main(["--parts", "speed", "mt"]) == 0
    with tarfile.open(kit / ".device" / "data.tar.gz") as tar:
        names = sorted(tar.getnames())
    mt_folders = ("tatoeba_cmn_eng", "tvsub_zh_en", "wmt22_generaltest_zh_en", "wmt_newstest_zh_en")
    assert [n for n in names if n.endswith("part.txt")] == [f"data/{f}/part.txt" for f in mt_folders]
    out = capsys.readouterr().out
    assert ('command "SESSION_S=570 MT_SEEDS=3 bash benchmarks/device_session.sh speed mt", '
            'carry [".device"], timeout_s 590') in out  # issue 40's recipe on every TVsub pair
    assert "LB_CHARS" not in out

def test_with_the_checks_in_the_call_the_pairs_are_sized_there(kit, capsys, monkeypatch):
    monkeypatch.setitem(device_kit.FOLDERS, "checks", ())  # the fixture's data holds the mt folders alone
    assert device_kit.main(["--parts", "checks", "mt"]) == 0
    out = capsys.readouterr().out
    assert "MT_PAIRS=auto MT_BATCH_PAIRS=350 MT_SEEDS=3 bash benchmarks/device_session.sh checks mt" in out


def test_missing_data_folder_is_refused_and_nothing_is_written(kit):
    with pytest.raises(SystemExit, match=r"data: missing bq_corpus, .*thucnews_titles") as refused:
        device_kit.main(["--parts", "lb"])
    assert "resume_ner" in str(refused.value)  # every missing folder named at once
    assert not (kit / ".device" / "data.tar.gz").exists()
    assert not list((kit / ".device").glob("*.tmp"))


def test_kit_over_the_travel_limit_is_refused(kit, monkeypatch, capsys):
    monkeypatch.setattr(device_kit, "LIMIT", 1024)
    assert device_kit.main(["--parts", "mt"]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == "too large to travel: fewer --parts"
    assert "device run" not in captured.out


def test_lbert_and_ner_parts_pack_their_data(kit, capsys, monkeypatch):
    monkeypatch.setitem(device_kit.FOLDERS, "lbert", ("tvsub_zh_en",))  # the fixture's folders
    monkeypatch.setitem(device_kit.FOLDERS, "ner", ("tatoeba_cmn_eng",))
    assert device_kit.main(["--parts", "lbert", "ner"]) == 0
    with tarfile.open(kit / ".device" / "data.tar.gz") as tar:
        assert sorted(n for n in tar.getnames() if n.endswith("part.txt")) == \
            ["data/tatoeba_cmn_eng/part.txt", "data/tvsub_zh_en/part.txt"]
    out = capsys.readouterr().out
    assert "LB_CHARS=N LB_S=S bash benchmarks/device_session.sh lbert ner" in out
    assert device_kit.FOLDERS["lb"] == tuple(device_kit.CORPUS) + ("thucnews_titles",)
