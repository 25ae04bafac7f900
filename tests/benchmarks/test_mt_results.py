"""benchmarks/mt_results.py: the table of the translation suite's finished runs (``--suite``, nothing
trained) and of earlier ``--out`` files (``--combine``): BLEU mean ± sample sd over seeds per test set,
BiG minus Transformer, the settings and ``Suite:`` lines, checked to the digit on run directories
holding known scores; and the budget cuts ``prepared_spec`` makes of the shipped specs for
``cuda_checks.py``."""
import json
import statistics
import sys
from pathlib import Path

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import mt_results  # noqa: E402
import results_md  # noqa: E402

SUITE = ROOT / "jsonnet_configs" / "suites" / "mt.jsonnet"


def fake_bleu(encoder: str, seed: int, name: str) -> float:
    return 20.0 + (1.5 if encoder == "big" else 0.0) + (seed - 13) * 0.7 + len(name) / 10


def fake_result(spec: dict, run_dir, spec_hash: str = "h") -> dict:
    """A finished run of ``spec``: BLEU ``fake_bleu`` on each of its test sets."""
    encoder = spec["model"]["encoder"]["type"]
    sets = {name: {"data": entry["path"], "examples": 100,
                   "metrics": {"bleu": fake_bleu(encoder, spec["seed"], name), "chrf": 40.0},
                   "tracking_tags": {"sacrebleu_signature": f"nrefs:{mt_results.REFERENCES[name]}|case:lc"}}
            for name, entry in spec["test_sets"].items()}
    return {"finished": True, "run_dir": str(run_dir), "spec_hash": spec_hash, "training_seconds": 120.0 * spec["seed"],
            "epochs_completed": 1, "best_epoch": 1, "device": "CPU Fake", "validation": {"bleu": 10.0},
            "test_sets": sets}


@pytest.fixture
def no_training(monkeypatch):
    """Any training fails the test; parameters are 1,000 (Transformer) and 1,100 (BiG), counted from
    the run directories the table reads (their list is returned)."""
    from multigrain.platform.runs import Run

    counted = []

    def count_parameters(spec, run_dir):
        counted.append(Path(run_dir))
        return 1000 if spec["model"]["encoder"]["type"] == "transformer" else 1100

    monkeypatch.setattr(results_md, "train_or_reuse", lambda *a, **k: pytest.fail("trained"))
    monkeypatch.setattr(Run, "train_or_reuse", lambda *a, **k: pytest.fail("trained"))
    monkeypatch.setattr(Run, "train", lambda *a, **k: pytest.fail("trained"))
    monkeypatch.setattr(mt_results, "count_parameters", count_parameters)
    monkeypatch.chdir(ROOT)
    return counted


def finish_runs(runs_dir: Path, only=None, overrides=(), skip=lambda run: False) -> list:
    """Every run of the mt suite (``only`` those entries, with the suite call's ``overrides``) finished
    with ``fake_result`` in its directory under ``runs_dir``, but those ``skip`` picks."""
    from multigrain.platform import suite as suites

    runs = suites.plan(SUITE, suites.load_suite(SUITE), runs_dir, only=only, check_data_paths=False,
                       overrides=list(overrides))
    for r in runs:
        if not skip(r):
            Path(r.run_dir).mkdir(parents=True, exist_ok=True)
            Path(r.run_dir, "metrics.json").write_text(json.dumps(fake_result(r.spec, r.run_dir, r.spec_hash)))
    return runs


def table_cells(results: Path) -> dict[str, list[str]]:
    """First cell -> the row's cells, of every table row of ``results``."""
    return {line.split(" | ")[0].strip("| "): [c.strip() for c in line.strip("|").split("|")]
            for line in results.read_text(encoding="utf-8").splitlines() if line.startswith("| ")}


def mean_sd(values: list[float]) -> str:
    return f"{statistics.fmean(values):.2f} ± {statistics.stdev(values):.2f}"


def test_the_table_of_a_suites_finished_runs_trains_nothing(no_training, tmp_path):
    """``--suite``: the table of the translation suite's runs finished in their run directories
    (``multigrain suite`` trained them), every figure of the table; an unfinished one is left out."""
    runs = finish_runs(tmp_path / "runs", skip=lambda r: (r.spec["model"]["encoder"]["type"], r.seed, r.tag)
                       == ("transformer", 15, ""))
    results, out = tmp_path / "RESULTS.md", tmp_path / "mt.json"
    results.write_text("# Benchmark results\n\n## Other\nkept\n", encoding="utf-8")
    assert mt_results.main(["--suite", str(SUITE), "--runs-dir", str(tmp_path / "runs"), "--results", str(results),
                            "--out", str(out)]) == 0
    small = {Path(r.run_dir) for r in runs if Path(r.spec_path).stem in ("tvsub_transformer_small", "tvsub_big_small")
             and r.tag == "" and (r.spec["model"]["encoder"]["type"], r.seed) != ("transformer", 15)}
    assert set(no_training) == small and len(no_training) == 5
    text = results.read_text(encoding="utf-8")
    assert "## Other\nkept" in text and mt_results.SECTION in text
    lines = table_cells(results)
    assert lines["encoder"][5:] == ["tvsub (3 refs)", "wmt22 (2 refs)", "wmt18 (1 ref)", "wmt19 (1 ref)",
                                    "wmt20 (1 ref)", "tatoeba (1 ref)"]
    for encoder, seeds, params, minutes in (("transformer", (13, 14), "1,000", "27.00 ± 1.41"),
                                            ("big", (13, 14, 15), "1,100", "28.00 ± 2.00")):
        assert lines[encoder][:5] == [encoder, str(len(seeds)), params, minutes, "10.00 ± 0.00"]
        assert lines[encoder][5:] == [mean_sd([fake_bleu(encoder, s, name) for s in seeds])
                                      for name in mt_results.TEST_SETS]
    # the means are over different seeds: BiG's 1.5 plus 0.35 (seed 15 is in BiG's mean alone)
    assert lines["BiG − Transformer (means)"][5:] == ["+1.85"] * 6
    assert "Signatures: nrefs:1|case:lc, nrefs:2|case:lc, nrefs:3|case:lc." in text
    assert f"Settings: size `small`, 10 epochs, batch 64, all 429,501 TVsub training pairs, seeds 13, 14, 15; " \
           f"device: CPU Fake;" in text
    assert f"Suite: `multigrain suite {SUITE} --only 'tvsub_*_small'`." in text
    assert "Scored after training" not in text and "Smoke test" not in text
    saved = json.loads(out.read_text(encoding="utf-8"))
    assert saved["settings"]["size"] == "small" and saved["settings"]["seeds"] == "13, 14, 15"
    assert saved["settings"]["argv"].startswith("--suite") and len(saved["runs"]) == 5
    big13 = next(r for r in saved["runs"] if (r["encoder"], r["seed"]) == ("big", 13))
    assert big13["bleu"]["tvsub"] == fake_bleu("big", 13, "tvsub") and big13["parameters"] == 1100
    assert big13["training_seconds"] == 120.0 * 13 and big13["examples"]["wmt22"] == 100

    # a configuration's runs (the entries' [160k-e1]): their own table, their own Suite: line
    assert mt_results.main(["--suite", str(SUITE), "--config", "160k-e1", "--only", "big", "--runs-dir",
                            str(tmp_path / "runs"), "--results", str(results), "--out", str(out)]) == 0
    text = results.read_text(encoding="utf-8")
    assert f"Suite: `multigrain suite {SUITE} --only 'tvsub_big_small [160k-e1]'`." in text
    assert "Settings: size `small`, 1 epochs, batch 64, 160,000 TVsub training pairs, seeds 13, 14, 15;" in text
    lines = table_cells(results)
    assert "transformer" not in lines and "BiG − Transformer (means)" not in lines
    assert lines["encoder"][5:] == ["tvsub (3 refs)", "tatoeba (1 ref)"]  # the configuration's test sets
    assert lines["big"][:2] == ["big", "3"]
    assert lines["big"][5:] == [mean_sd([fake_bleu("big", s, name) for s in (13, 14, 15)])
                                for name in ("tvsub", "tatoeba")]
    assert json.loads(out.read_text(encoding="utf-8"))["settings"]["epochs"] == 1

    # the base size on a GPU: the entries' only configuration, [gpu-280k-e1], every test set of the specs
    assert mt_results.main(["--suite", str(SUITE), "--size", "base", "--config", "gpu-280k-e1", "--runs-dir",
                            str(tmp_path / "runs"), "--results", str(results), "--out", str(out),
                            "--section", "## Translation on a GPU: base"]) == 0
    base = results.read_text(encoding="utf-8").split("## Translation on a GPU: base", 1)[1]
    assert f"Suite: `multigrain suite {SUITE} --only 'tvsub_* [gpu-280k-e1]'`." in base
    assert "Settings: size `base`, 1 epochs, batch 128, 280,000 TVsub training pairs, seeds 13;" in base
    rows = {line.split(" | ")[0].strip("| "): line for line in base.splitlines() if line.startswith("| ")}
    assert rows["transformer"].startswith("| transformer | 1 | 1,000 | 26.00 | 10.00 | ")
    assert rows["BiG − Transformer (means)"].endswith(" | +1.50" * 6 + " |")
    # no untagged base runs
    assert mt_results.main(["--suite", str(SUITE), "--size", "base", "--runs-dir", str(tmp_path / "runs"),
                            "--results", str(results), "--out", str(out)]) == 1


def test_device_session_mt_call(no_training, tmp_path):
    """``device_session.sh mt``'s call: the gpu recipe's runs of the suite call with its ``-o`` cuts
    (their hashes include them), under a section of its own."""
    cut = ["trainer.num_epochs=1", "+dataset_reader.max_instances=300"]
    gpu_runs = {Path(r.run_dir) for r in finish_runs(tmp_path / "mt", "tvsub_*_small_gpu", cut)
                if Path(r.spec_path).stem.endswith("_small_gpu")}
    results, out = tmp_path / "mt.md", tmp_path / "mt.json"
    argv = ["--suite", "jsonnet_configs/suites/mt.jsonnet", "--variant", "gpu", "--runs-dir", str(tmp_path / "mt"),
            *[x for o in cut for x in ("-o", o)], "--out", str(out), "--results", str(results),
            "--section", "## Translation on a GPU"]
    assert mt_results.main(argv) == 0
    text = results.read_text(encoding="utf-8")
    assert "## Translation on a GPU\n" in text and mt_results.SECTION not in text
    assert "Settings: size `small (gpu recipe)`, 1 epochs, batch at most 8,192 tokens (source + target), 300 TVsub " \
           "training pairs, seeds 13, 14, 15;" in text
    assert "Suite: `multigrain suite jsonnet_configs/suites/mt.jsonnet --only 'tvsub_*_small_gpu' " \
           "-o trainer.num_epochs=1 -o +dataset_reader.max_instances=300`." in text
    lines = table_cells(results)
    assert lines["encoder"][5:] == ["tvsub (3 refs)", "wmt22 (2 refs)", "tatoeba (1 ref)"]
    assert lines["transformer"][:3] == ["transformer", "3", "1,000"] and lines["big"][:3] == ["big", "3", "1,100"]
    assert lines["BiG − Transformer (means)"][5:] == ["+1.50"] * 3
    assert len(no_training) == 6 and set(no_training) == gpu_runs
    # without the cuts, the runs of the suite call are others (other hashes): none finished
    assert mt_results.main(argv[:6] + argv[-6:]) == 1


def test_parts_made_apart_make_one_table(no_training, tmp_path):
    """``--combine``: one table of the runs of several ``--out`` files; each part's Suite: line kept; a
    part of this script's former own trainings (seed 14 tested on three sets, the news sets scored
    after training) has its cells say which seeds a mean is over, and its later sets named."""
    finish_runs(tmp_path / "runs")
    results = tmp_path / "RESULTS.md"
    for encoder in mt_results.ENCODERS:
        assert mt_results.main(["--suite", str(SUITE), "--only", encoder, "--runs-dir", str(tmp_path / "runs"),
                                "--results", str(results), "--out", str(tmp_path / f"{encoder}.json")]) == 0
    assert mt_results.main(["--combine", str(tmp_path / "transformer.json"), str(tmp_path / "big.json"),
                            "--results", str(results), "--out", str(tmp_path / "all.json")]) == 0
    text = results.read_text(encoding="utf-8")
    assert text.count(mt_results.SECTION) == 1
    assert f"Suite: `multigrain suite {SUITE} --only 'tvsub_transformer_small'` and " \
           f"`multigrain suite {SUITE} --only 'tvsub_big_small'`." in text
    lines = table_cells(results)
    assert lines["transformer"][:3] == ["transformer", "3", "1,000"] and lines["big"][:3] == ["big", "3", "1,100"]
    assert lines["BiG − Transformer (means)"][5:] == ["+1.50"] * 6
    saved = json.loads((tmp_path / "all.json").read_text(encoding="utf-8"))
    assert saved["settings"]["seeds"] == "13, 14, 15" and len(saved["runs"]) == 6
    assert saved["settings"]["argv"].count("--suite") == 2 and " ` + `" in saved["settings"]["argv"]

    # an --out file of the former training path: seed 13 on every set, seed 14 on three, news sets later
    big = json.loads((tmp_path / "big.json").read_text(encoding="utf-8"))
    old_runs = []
    for seed, sets, later in ((13, mt_results.TEST_SETS, ["wmt18"]), (14, ("tatoeba", "tvsub", "wmt22"), [])):
        spec = {"model": {"encoder": {"type": "big"}}, "seed": seed,
                "test_sets": {name: {"path": name} for name in sets}}
        old_runs.append(mt_results.row_of("big", seed, "small", fake_result(spec, f"old{seed}"), 1100)
                        | {"scored_after_training": later, "cpu_seconds": 5.0})
    settings = {k: v for k, v in big["settings"].items() if k != "suite"} | \
        {"argv": "--size small --seeds 2", "max_test_sentences": None, "max_dev_sentences": None}
    (tmp_path / "old.json").write_text(json.dumps({"settings": settings, "runs": old_runs}), encoding="utf-8")
    assert mt_results.main(["--combine", str(tmp_path / "old.json"), "--results", str(results), "--out",
                            str(tmp_path / "old_all.json"), "--section", "## Translation, earlier"]) == 0
    earlier = results.read_text(encoding="utf-8").split("## Translation, earlier", 1)[1]
    assert earlier.count("| big |") == 1 and "Suite:" not in earlier
    cells = dict(zip(mt_results.TEST_SETS, next(line for line in earlier.splitlines()
                                                 if line.startswith("| big |")).strip("|").split("|")[5:]))
    assert cells["tvsub"].strip() == mean_sd([fake_bleu("big", s, "tvsub") for s in (13, 14)])
    assert cells["wmt18"].strip() == f"{fake_bleu('big', 13, 'wmt18'):.2f} (seed 13)"
    assert "to the models): wmt18." in earlier and "Smoke test" not in earlier
    # the first table is left as it was
    assert results.read_text(encoding="utf-8").startswith(text.rstrip("\n"))

    # a part with a suite's runs and one without: no Suite: line names them all
    assert mt_results.main(["--combine", str(tmp_path / "transformer.json"), str(tmp_path / "old.json"), "--results",
                            str(results), "--out", str(tmp_path / "mixed.json"), "--section", "## Mixed"]) == 0
    mixed = results.read_text(encoding="utf-8").split("## Mixed", 1)[1]
    assert "Suite:" not in mixed and "| transformer | 3 |" in mixed and "| big | 2 |" in mixed
    # parts of different budgets are not one table
    other = json.loads((tmp_path / "big.json").read_text(encoding="utf-8"))
    other["settings"]["epochs"] = 9
    (tmp_path / "e9.json").write_text(json.dumps(other), encoding="utf-8")
    assert mt_results.main(["--combine", str(tmp_path / "transformer.json"), str(tmp_path / "e9.json"), "--results",
                            str(results), "--out", str(tmp_path / "x.json")]) == 2
    assert not (tmp_path / "x.json").exists()


def test_a_smoke_test_file_is_marked_when_combined(no_training, tmp_path):
    """An --out file of a former smoke test (cut test sets): its figures are marked as not results."""
    spec = {"model": {"encoder": {"type": "transformer"}}, "seed": 13, "test_sets": {"tvsub": {"path": "t"}}}
    rows = [mt_results.row_of("transformer", 13, "small", fake_result(spec, "r"), 1000)]
    settings = {"size": "small", "epochs": 1, "batch_size": 64, "train_pairs": "300", "seeds": "13",
                "date": "2026-11-20", "argv": "--max-test-sentences 10", "max_test_sentences": 10,
                "max_dev_sentences": 20}
    (tmp_path / "smoke.json").write_text(json.dumps({"settings": settings, "runs": rows}), encoding="utf-8")
    results = tmp_path / "R.md"
    assert mt_results.main(["--combine", str(tmp_path / "smoke.json"), "--results", str(results), "--out",
                            str(tmp_path / "out.json")]) == 0
    text = results.read_text(encoding="utf-8")
    assert "**Smoke test**: every test set cut to its first 10 sentences, the validation set to 20; these figures " \
           "are not results." in text
    assert table_cells(results)["transformer"] == ["transformer", "1", "1,000", "26.00", "10.00",
                                                   f"{fake_bleu('transformer', 13, 'tvsub'):.2f}"]


def test_it_trains_nothing_and_its_options_are_the_tables(no_training, tmp_path, capsys):
    """Neither --suite nor --combine, a former training option, or a --suite option with --combine:
    usage errors (exit 2), nothing written."""
    common = ["--results", str(tmp_path / "R.md"), "--out", str(tmp_path / "o.json")]
    for argv, says in (([], "one of the arguments --suite --combine is required"),
                       (["--seeds", "1", "--suite", str(SUITE)], "unrecognized arguments: --seeds 1"),
                       (["--suite", str(SUITE), "--epochs", "1"], "unrecognized arguments: --epochs 1"),
                       (["--suite", str(SUITE), "--score-sets", "wmt22"], "unrecognized arguments: --score-sets"),
                       (["--suite", str(SUITE), "--combine", "a.json"], "not allowed with argument"),
                       (["--combine", "a.json", "--config", "160k-e1"], "--config: with --suite only"),
                       (["--combine", "a.json", "--variant", "gpu", "-o", "x=1"], "--variant, -o: with --suite only")):
        with pytest.raises(SystemExit) as caught:
            mt_results.main(argv + common)
        assert caught.value.code == 2 and says in capsys.readouterr().err, argv
    assert not (tmp_path / "R.md").exists() and not (tmp_path / "o.json").exists()
    # a suite with no finished run: no table
    assert mt_results.main(["--suite", str(SUITE), "--runs-dir", str(tmp_path / "runs"), *common]) == 1
    assert "no finished run" in capsys.readouterr().err and not (tmp_path / "R.md").exists()


def test_budget_cuts_keep_the_dev_set_whole():
    """``prepared_spec`` (``cuda_checks.py``'s plan_mt): the seed, epochs and training cut asked for, the
    validation set whole in its own reader, only the test sets named."""
    spec = mt_results.prepared_spec("big", "small", 14, epochs=2, max_train_pairs=2000, test_sets=("tvsub",))
    assert spec["seed"] == 14 and spec["trainer"]["num_epochs"] == 2
    assert spec["dataset_reader"]["max_instances"] == 2000
    assert "max_instances" not in spec["validation_dataset_reader"]
    assert spec["validation_dataset_reader"]["lattice_builder"] == {"type": "lexicon"}
    assert list(spec["test_sets"]) == ["tvsub"]
    assert mt_results.prepared_spec("big", "base", 13, test_sets=())["test_sets"] == {}
    plain = mt_results.prepared_spec("transformer", "small", 13)
    assert "validation_dataset_reader" not in plain and "max_instances" not in plain["dataset_reader"]
    assert plain["trainer"]["num_epochs"] == 10 and sorted(plain["test_sets"]) == sorted(mt_results.TEST_SETS)


def test_variants_are_issue_40s_recipe_specs():
    assert mt_results.spec_path("big", "small", "gpu").name == "tvsub_big_small_gpu.jsonnet"
    assert mt_results.spec_path("transformer", "small").name == "tvsub_transformer_small.jsonnet"
    assert mt_results.spec_path("transformer", "base").name == "tvsub_transformer.jsonnet"
    cpu = mt_results.prepared_spec("big", "small", 13, variant="cpu")
    assert cpu["dataset_reader"]["max_instances"] == 180_000 and set(cpu["test_sets"]) == {"tvsub", "wmt22"}
    cut = mt_results.prepared_spec("big", "small", 13, max_train_pairs=300, variant="cpu")
    assert cut["dataset_reader"]["max_instances"] == 300
    assert "max_instances" not in cut["validation_dataset_reader"]  # never the training cut
    gpu = mt_results.prepared_spec("transformer", "small", 13, variant="gpu")
    assert gpu["data_loader"]["max_tokens"] == 8192 and gpu["model"]["decoder"]["pre_norm"] is True


def test_tiny_tatoeba_spec_is_cut_to_the_check():
    """``cuda_checks.py``'s train_mt spec: one epoch, the Tatoeba test set alone, the cuts asked for."""
    spec = mt_results.tiny_tatoeba_spec(200, 50, 40)
    assert spec["dataset_reader"]["max_instances"] == 200 and spec["validation_dataset_reader"]["max_instances"] == 50
    assert spec["trainer"]["num_epochs"] == 1 and list(spec["test_sets"]) == ["tatoeba"]
    assert spec["test_sets"]["tatoeba"]["reader"]["max_instances"] == 40


def test_parameters_are_counted_from_the_spec_and_vocabulary_without_the_weights(tmp_path, monkeypatch):
    """A device call brings its runs back without checkpoints (results.tar.gz): the count made from
    the spec and the saved vocabulary equals that of the trained archive, before and after the
    checkpoints are gone."""
    from multigrain.platform import suite as suites
    from multigrain.platform.runs import Run

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("CI", "true")
    smoke = ROOT / "jsonnet_configs" / "suites" / "smoke.jsonnet"
    (run,) = suites.plan(smoke, suites.load_suite(smoke), tmp_path, only="tvsub_transformer_small [smoke]")
    Run(run.spec, run.run_dir).train()
    model = Run(run.spec, run.run_dir).load_archive(device="cpu").model
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert mt_results.count_parameters(run.spec, Path(run.run_dir)) == trained
    checkpoints = sorted(Path(run.run_dir).glob("*.pt"))
    assert [p.name for p in checkpoints] == ["best.pt", "last.pt"]
    for checkpoint in checkpoints:
        checkpoint.unlink()
    assert mt_results.count_parameters(run.spec, Path(run.run_dir)) == trained > 1_000_000
