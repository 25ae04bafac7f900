"""``multigrain predict`` of a tagger writes what the ``jsonl_spans`` reader reads with its
defaults: entities as ``{"label", "start", "end", "text"}`` with ``end`` exclusive. A tiny tagger is
trained, predicts a file, and the file read back gives the same spans as the predicted tags."""
import json

from multigrain.components.readers.generic_spans import JsonlSpansReader
from multigrain.components.tag_schemes import extract_spans
from multigrain.platform.commands import main as cli_main
from multigrain.platform.runs import Run
from multigrain.testing import read_sentences
from tests.conftest import DATA, resume_tagger_spec


def test_predictions_read_back_with_jsonl_spans_defaults(tmp_path, capsys, single_thread):
    spec = resume_tagger_spec(tmp_path / "data")
    spec["trainer"]["num_epochs"] = 25  # enough for the tagger to find entities in its training sentences
    spec["trainer"]["optimizer"]["lr"] = 0.05
    Run(spec, tmp_path / "run").train()
    sentences = ["".join(line.split(" ")[0] for line in block.split("\n"))
                 for block in read_sentences(DATA / "resume_ner" / "dev.char.bmes")[:12]]
    inputs = tmp_path / "in.jsonl"
    inputs.write_text("".join(json.dumps({"text": s}, ensure_ascii=False) + "\n" for s in sentences), encoding="utf-8")
    out = tmp_path / "predicted.jsonl"
    assert cli_main(["predict", str(tmp_path / "run"), str(inputs), "--output-file", str(out)]) == 0
    capsys.readouterr()
    predictions = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    entities = [e for p in predictions for e in p["entities"]]
    assert len(predictions) == 12 and len(entities) >= 10  # a test of something: many spans
    for p in predictions:
        for e in p["entities"]:
            assert set(e) == {"label", "start", "end", "text"} and p["text"][e["start"]:e["end"]] == e["text"]
    # the BMES tags the model predicted, as spans with exclusive ends
    predicted = [sorted((label, s, e + 1) for label, s, e in extract_spans(p["tags"], "BMES")) for p in predictions]
    assert [sorted((e["label"], e["start"], e["end"]) for e in p["entities"]) for p in predictions] == predicted
    read_back = list(JsonlSpansReader().read(str(out)))  # every default: BIO, exclusive, "label"
    assert ["".join(x["chars"]) for x in read_back] == sentences
    spans = [sorted((label, s, e + 1) for label, s, e in extract_spans(x["tags"], "BIO")) for x in read_back]
    assert spans == predicted
