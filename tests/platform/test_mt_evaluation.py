"""Translation scores that say what they are, on a tiny translator trained on the first 30
sentences of TVsub's test set (so that it translates them, and the scores are far from 0):

- ``multigrain evaluate`` of a bare file says how many reference streams it scored against and
  the sacrebleu signature; ``--test-set`` scores a spec's set with all its references;
  ``--references`` adds files (a length mismatch: exit 2 naming both files and both counts);
- the training tags each scored set's signature under its own name, and the run's plain tag is
  its leaderboard's (the test set named as its data set);
- lower-cased references rank by case-insensitive BLEU, cased ones by cased BLEU (beside it the
  lower-cased one), and every leaderboard format shows the signature;
- sources over ``max_source_length`` are cut, never silently (predict, serve, evaluate).

sacrebleu, called on the model's own predictions, is the oracle of every score."""
from __future__ import annotations

import asyncio
import csv
import io
import json
import logging

import pytest
import sacrebleu
from mlflow.tracking import MlflowClient

from multigrain.components.metrics.bleu import normalize_quotes
from multigrain.components.readers.nist import parse_sgm_systems
from multigrain.platform.commands import main as cli_main
from multigrain.platform.errors import ConfigurationError
from multigrain.testing import tiny_spec
from tests.components.models.test_translator import TINY
from tests.conftest import DATA

SENTENCES = 30
LIMIT = 16  # max_source_length: a few of the 30 sources are longer (up to 23 characters)


def write_lines(path, lines) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The first 30 TVsub test sentences (``test.zh``, the cased one-reference ``test.en`` beside
    it, the three lower-cased references of the SGML refset as ``ref1..3``), a translator trained
    on them with ``ref2`` as its target (another translation than ``test.en``) and the test sets
    ``tvsub`` (3 lower-cased references) and ``cased`` (the cased ``test.en``), logged to MLflow."""
    import torch

    from multigrain.platform.runs import Run
    from multigrain.platform.tracking import RunLogger

    folder = tmp_path_factory.mktemp("mt_evaluation")
    tvsub = DATA / "tvsub_zh_en"
    zh = write_lines(folder / "test.zh", (tvsub / "test/test.orignal.zh").read_text(encoding="utf-8")
                     .splitlines()[:SENTENCES])
    en = write_lines(folder / "test.en", (tvsub / "test/test.orignal.en").read_text(encoding="utf-8")
                     .splitlines()[:SENTENCES])
    streams = parse_sgm_systems(str(tvsub / "processed/test/test_trg.sgm"))
    refs = [write_lines(folder / f"ref{i + 1}", [s.text for s in system.segments.values()][:SENTENCES])
            for i, system in enumerate(streams)]
    model = dict(TINY, max_source_length=LIMIT, truncate=True)
    spec = tiny_spec(model, {"type": "tvsub", "references": [refs[1]]}, zh, zh, epochs=25, lr=0.01, batch_size=10,
                     task="mt", dataset="tvsub", validation_metric="+bleu", grad_clipping=1.0)
    spec["test_dataset_reader"] = {"type": "tvsub"}  # a bare test.zh: its one reference test.en
    spec["test_sets"] = {"tvsub": {"path": zh, "reader": {"type": "tvsub", "references": refs}},
                         "cased": {"path": zh, "reader": {"type": "parallel_refs", "references": [en],
                                                          "detokenize_references": True}}}
    uri = f"sqlite:///{folder / 'm.db'}"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny ops on a loaded machine: one thread is faster
    try:
        run = Run(spec, folder / "run")
        result = run.train(logger=RunLogger(uri))
        archive = run.load_archive()
        sets = {name: archive.read(entry["path"], run.experiment.test_sets[name].reader)
                for name, entry in spec["test_sets"].items()}
        hypotheses = [p["translation"] for p in archive.predict_batches(sets["tvsub"])]
    finally:
        torch.set_num_threads(threads)
    return {"folder": folder, "spec": spec, "uri": uri, "result": result, "run": run, "archive": archive,
            "zh": zh, "en": en, "refs": refs, "sets": sets, "hypotheses": hypotheses}


def oracle(trained, streams: list[list[str]], lowercase: bool) -> float:
    """sacrebleu on the model's translations, quotes made ASCII on both sides (``metrics/bleu.py``)."""
    return sacrebleu.corpus_bleu([normalize_quotes(h) for h in trained["hypotheses"]],
                                 [[normalize_quotes(r) for r in s] for s in streams], lowercase=lowercase).score


def streams_of(instances) -> list[list[str]]:
    return [list(s) for s in zip(*(x["references"] for x in instances))]


def cli(capsys, *args):
    code = cli_main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_training_scores_each_set_against_all_of_its_references(trained):
    result, sets = trained["result"], trained["sets"]
    assert [len(x["references"]) for x in sets["tvsub"]] == [3] * SENTENCES
    three = oracle(trained, streams_of(sets["tvsub"]), lowercase=True)
    assert result["test_tvsub_bleu"] == pytest.approx(three, abs=1e-9) and three > 20
    cased = oracle(trained, streams_of(sets["cased"]), lowercase=False)
    assert result["test_cased_bleu_cased"] == pytest.approx(cased, abs=1e-9) and cased > 20
    assert result["test_sets"]["tvsub"]["leaderboard_metric"] == "bleu"  # lower-cased references
    assert result["test_sets"]["cased"]["leaderboard_metric"] == "bleu_cased"


def test_each_scored_set_has_its_own_signature_and_the_run_its_leaderboards(trained):
    tags = trained["result"]["tracking_tags"]
    version = sacrebleu.__version__
    assert tags == {
        "sacrebleu_signature.validation": f"nrefs:1|case:lc|eff:no|tok:13a|smooth:exp|version:{version}",
        "sacrebleu_signature.tvsub": f"nrefs:3|case:lc|eff:no|tok:13a|smooth:exp|version:{version}",
        "sacrebleu_signature.cased": f"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:{version}",
        # the run's own experiment is mt/tvsub: the set of that name is its leaderboard's
        "sacrebleu_signature": f"nrefs:3|case:lc|eff:no|tok:13a|smooth:exp|version:{version}"}
    client = MlflowClient(trained["uri"])
    (run,) = [r for r in client.search_runs([client.get_experiment_by_name("mt/tvsub").experiment_id])
              if "test_set" not in r.data.tags]  # the training's run, beside its row on the set tvsub
    assert {k: v for k, v in run.data.tags.items() if k.startswith("sacrebleu_signature")} == tags
    for name, metric, nrefs in (("tvsub", "test_bleu", "nrefs:3|case:lc"), ("cased", "test_bleu_cased",
                                                                              "nrefs:1|case:mixed")):
        (row,) = client.search_runs([client.get_experiment_by_name(f"mt/{name}").experiment_id],
                                    f"tags.test_set = '{name}'")
        assert row.data.tags["leaderboard_metric"] == metric
        assert row.data.tags["sacrebleu_signature"].startswith(nrefs + "|")


def test_every_leaderboard_format_shows_the_signature_and_wmt_like_sets_rank_by_cased_bleu(trained, capsys):
    uri, result = trained["uri"], trained["result"]
    tvsub_sig = result["test_sets"]["tvsub"]["tracking_tags"]["sacrebleu_signature"]
    cased_sig = result["test_sets"]["cased"]["tracking_tags"]["sacrebleu_signature"]
    code, out, _ = cli(capsys, "leaderboard", "mt/cased", "--format", "json", "--tracking-uri", uri)
    (row,) = json.loads(out)
    assert code == 0 and row["signature"] == cased_sig and row["metric"] == "test_bleu_cased / test_bleu"
    assert row["value"] == pytest.approx(result["test_cased_bleu_cased"])
    assert row["ours"] == f"{result['test_cased_bleu_cased']:.2f} / {result['test_cased_bleu']:.2f}"
    code, md, _ = cli(capsys, "leaderboard", "mt/tvsub", "--format", "md", "--tracking-uri", uri)
    header, _, line = md.splitlines()
    assert header.endswith("| spec hash | date | signature |")
    assert line.endswith(" | " + tvsub_sig.replace("|", "\\|") + " |")  # escaped: one cell
    assert line.count(" | ") == header.count(" | ")
    code, text, _ = cli(capsys, "leaderboard", "mt/tvsub", "--format", "csv", "--tracking-uri", uri)
    (row,) = list(csv.DictReader(io.StringIO(text)))
    assert row["signature"] == tvsub_sig and row["metric"] == "test_bleu"
    assert float(row["value"]) == pytest.approx(result["test_tvsub_bleu"])
    code, table, _ = cli(capsys, "leaderboard", "mt/tvsub", "--tracking-uri", uri)
    assert code == 0 and "signature" in table and "nrefs:3|case:lc|eff:no|tok:13a" in table.replace("\n", "")


def test_a_bare_file_says_it_has_one_reference_and_test_set_uses_all_three(trained, capsys):
    run_dir, zh = trained["run"].run_dir, trained["zh"]
    code, out, err = cli(capsys, "evaluate", run_dir, zh, "--json")
    bare = json.loads(out)
    one = oracle(trained, [[normalize_quotes(x["references"][0]) for x in trained["sets"]["cased"]]],
                 lowercase=True)
    assert code == 0 and bare["evaluation"]["reference_streams"] == 1
    assert bare["metrics"]["bleu"] == pytest.approx(one, abs=1e-9)
    assert bare["evaluation"]["sacrebleu_signature"].startswith("nrefs:1|case:mixed|")
    assert f"{zh}: reference streams 1; ranked by bleu_cased; sacrebleu signature nrefs:1|case:mixed|" in err
    assert "--test-set tvsub" in err  # the file is a test set's: how to score it as the leaderboard does
    code, out, err = cli(capsys, "evaluate", run_dir, "--test-set", "tvsub", "--json")
    named = json.loads(out)
    assert code == 0 and named["test_set"] == "tvsub" and named["data"] == zh
    assert named["evaluation"]["reference_streams"] == 3 and named["instances_scored"] == SENTENCES
    assert named["metrics"]["bleu"] == pytest.approx(trained["result"]["test_tvsub_bleu"], abs=1e-9)
    assert named["metrics"]["bleu"] > bare["metrics"]["bleu"]  # three references match more than one
    assert f"{zh}: {SENTENCES} instances read with the test set 'tvsub' reader (tvsub)" in err
    before = open(zh, "rb").read()
    code, out, err = cli(capsys, "evaluate", run_dir, "--test-set", "tvsub", "--output-file", zh)
    assert code == 2 and out == "" and err.strip() == (f"error: --output-file {zh}: is the data file of test set "
                                                       f"'tvsub'; writing the output there could damage it (give "
                                                       f"another file name)")
    assert open(zh, "rb").read() == before


def test_references_adds_line_aligned_files(trained, capsys, tmp_path):
    run_dir, zh, refs = trained["run"].run_dir, trained["zh"], trained["refs"]
    code, out, err = cli(capsys, "evaluate", run_dir, zh, "--references", *refs, "--json")
    four = json.loads(out)
    streams = [[x["references"][0] for x in trained["sets"]["cased"]], *streams_of(trained["sets"]["tvsub"])]
    assert code == 0 and four["evaluation"]["reference_streams"] == 4
    assert four["metrics"]["bleu"] == pytest.approx(oracle(trained, streams, lowercase=True), abs=1e-9)
    assert four["evaluation"]["sacrebleu_signature"].startswith("nrefs:4|")
    short = write_lines(tmp_path / "short.en", open(refs[0], encoding="utf-8").read().splitlines()[:-1])
    code, out, err = cli(capsys, "evaluate", run_dir, zh, "--references", short)
    assert code == 2 and out == "" and "Traceback" not in err
    assert f"{short}: {SENTENCES - 1} reference segments, but the source {zh} has {SENTENCES} lines" in err
    code, _, err = cli(capsys, "evaluate", run_dir, zh, "--references", tmp_path / "none.en")
    assert code == 2 and "--references" in err and "none.en: no such reference file" in err
    code, _, err = cli(capsys, "evaluate", run_dir, zh, "--references", tmp_path)  # a folder is not "no such file"
    assert code == 2 and f"--references {tmp_path}: not a reference file (a folder or a device)" in err
    for args, message in ((["--test-set", "wmt99"], "has no test set 'wmt99' (it has: cased, tvsub)"),
                          ([zh, "--test-set", "tvsub"], "not both"), ([], "one of them")):
        code, out, err = cli(capsys, "evaluate", run_dir, *args)
        assert code == 2 and message in err and out == ""


def test_a_reader_whose_file_holds_its_references_takes_no_reference_files(tmp_path):
    from multigrain.platform.kinds import Reader
    from multigrain.platform.test_sets import with_references

    with pytest.raises(ConfigurationError, match="the tatoeba_cmn_eng reader takes no reference files"):
        with_references(Reader.by_name("tatoeba_cmn_eng")(), [str(tmp_path)], "cmn.txt")


def test_cut_sources_are_never_silent(trained, capsys, tmp_path, caplog):
    from multigrain.platform.ray.serve import Batcher, LoadedArchive, log_truncated

    run_dir, zh = trained["run"].run_dir, trained["zh"]
    long = [len(x["chars"]) > LIMIT for x in trained["sets"]["tvsub"]]
    cut = sum(long)
    assert cut >= 3
    out_file = tmp_path / "out.jsonl"
    code, _, err = cli(capsys, "predict", run_dir, zh, "--output-file", out_file)
    predictions = [json.loads(line) for line in out_file.read_text(encoding="utf-8").splitlines()]
    assert code == 0 and [p.get("truncated", False) for p in predictions] == long
    assert err.count("warning:") == 1
    assert f"warning: {zh}: {cut} of {SENTENCES} inputs were longer than the model takes (max_source_length {LIMIT})" \
        in err
    code, out, err = cli(capsys, "evaluate", run_dir, "--test-set", "tvsub", "--json")
    assert json.loads(out)["evaluation"]["sources_truncated"] == cut
    assert f"sources truncated {cut}; max source length {LIMIT}" in err
    # serve: the same field in the response, and a log line per request with a cut input
    texts = [x["source"] for x in trained["sets"]["tvsub"]]
    loaded = LoadedArchive(str(run_dir))
    answers = asyncio.run(Batcher(loaded, max_examples=32).predict(loaded.examples([{"text": t} for t in texts])))
    assert [a.get("truncated", False) for a in answers] == long
    with caplog.at_level(logging.WARNING, logger="ray.serve"):
        line = log_truncated(answers)
    indices = [i for i, flag in enumerate(long) if flag]
    assert line == (f"multigrain serve: {len(indices)} of {SENTENCES} inputs of a request were cut to the model's "
                    f"maximum length (instances {', '.join(map(str, indices))})") and line in caplog.text
    assert log_truncated([{"translation": "x"}]) is None


def test_the_brevity_penalty_of_mteval_is_a_spec_option(trained):
    """``model.bleu: {nist_bp: true}`` is validated and builds the metric with it (the metric's
    tests compare its scores with sacrebleu's statistics); the tokenizer is given once."""
    from multigrain.platform.archive import run_resources
    from multigrain.platform.runs import Run

    run_dir = trained["run"].run_dir
    spec = json.loads(json.dumps(trained["spec"]))
    spec["model"]["bleu"] = {"nist_bp": True}

    def model_of(spec):
        return Run(spec, run_dir).experiment.model.construct(vocab=trained["archive"].vocab,
                                                            offered={"resources": run_resources(run_dir)})

    metric = model_of(spec).metric
    assert metric.nist_bp and metric.tokenize == "13a"
    assert not trained["archive"].model.metric.nist_bp  # the default: sacrebleu's closest reference
    spec["model"].update(bleu={"tokenize": "intl"}, bleu_tokenize="zh")
    with pytest.raises(ConfigurationError, match="give the tokenizer once"):
        model_of(spec)


@pytest.mark.parametrize("value, problem", [("true", None), ("3", "model.bleu.nist_bp: expected bool")])
def test_the_mt_library_passes_bleu_options_and_validation_checks_them(tmp_path, value, problem):
    """``mt.tvsub_spec(..., bleu={nist_bp: true})`` adds ``model.bleu`` (an override cannot add a
    key); without it the spec is unchanged (``test_spec_hashes``)."""
    from multigrain.platform.errors import SpecError
    from multigrain.platform.experiment import validate_spec
    from multigrain.platform.specs import load_spec
    from tests.conftest import ROOT

    path = tmp_path / "nist.jsonnet"
    path.write_text(f"local mt = import '{ROOT / 'jsonnet_configs/lib/mt.libsonnet'}';\n"
                    f"mt.tvsub_spec('transformer', 'small', bleu={{ nist_bp: {value} }})\n", encoding="utf-8")
    spec = load_spec(path)
    assert spec["model"]["bleu"] == {"nist_bp": json.loads(value)}
    if problem is None:
        validate_spec(spec, check_data_paths=False)
    else:
        with pytest.raises(SpecError, match=problem):
            validate_spec(spec, check_data_paths=False)
