"""The papers' numbers of ``benchmarks/paper_numbers.json`` against the papers' own text
(``../shared/seeds``): each NER cell is found in the table and dataset section it names.

The BiG paper's Table IV prints its Resume and MSRA columns swapped. Three of its rows are the PLTE
paper's (BERT-Tagger, LR-CNN (BERT), Lattice-LSTM (BERT)), and their precision, recall and F1 under
'Resume' are the PLTE paper's MSRA cells, those under 'MSRA' its Resume cells; so a Table IV number is
kept under the dataset it belongs to, marked with the column it is printed under."""
from __future__ import annotations

import json
import re

import pytest

from multigrain.platform.papers import numbers_file, paper_number
from tests.conftest import DATA

SEEDS = DATA.parent / "seeds"
NUMBERS = json.loads(numbers_file().read_text(encoding="utf-8"))
pytestmark = pytest.mark.skipif(not (SEEDS / "big_transformer.txt").is_file() or not (SEEDS / "plte.txt").is_file(),
                                reason="the papers' text (../shared/seeds) is not beside this checkout")

BIG_COLUMNS = ("ontonotes", "resume", "weibo", "msra")  # as Table IV's header prints them
BIG_ROWS = {"big": "BiG-Transformer (BERT)", "bilstm_big": "BiG-Transformer (BERT)", "big_m3e": "BiG-Transformer (BERT)",
            "star": "Star-Transformer (BERT)", "transformer": "Transformer (BERT)", "bilstm_crf": "LSTM"}


def table_text(paper: str, start: str, end: str) -> str:
    """The text of ``paper`` from ``start`` to the first ``end`` after it."""
    text = (SEEDS / paper).read_text(encoding="utf-8")
    return text[text.index(start):text.index(end, text.index(start))]


def big_table_iv() -> dict[str, dict[str, tuple[str, str, str]]]:
    """Row name -> column as printed -> (P, R, F1), from the BiG paper's text."""
    rows = {}
    for line in table_text("big_transformer.txt", "\nTABLE IV\n", "\nTABLE V").splitlines():
        cells = line.split("\t")
        if len(cells) == 13 and all(re.fullmatch(r"\d+\.\d\d", c) for c in cells[1:]):
            rows[cells[0]] = {col: tuple(cells[1 + 3 * i:4 + 3 * i]) for i, col in enumerate(BIG_COLUMNS)}
    return rows


def plte_sections() -> dict[str, str]:
    """Dataset -> the text of its results table in the PLTE paper (Tab. 1: OntoNotes, Resume; Tab. 2: MSRA, Weibo)."""
    text = (SEEDS / "plte.txt").read_text(encoding="utf-8")
    start = text.index("\nResume\t")
    msra = text.index("\nMSRA\t", start)
    weibo = text.index("\nWeibo\t", msra)
    end = text.index("Table 1: Main results", weibo)
    return {"resume": text[start:msra], "msra": text[msra:weibo], "weibo": text[weibo:end]}


def test_table_iv_prints_resume_and_msra_swapped():
    big, plte = big_table_iv(), plte_sections()
    assert {"BERT-Tagger", "LR-CNN (BERT)", "BiG-Transformer (BERT)", "LSTM"} <= set(big)
    for row in ("BERT-Tagger", "LR-CNN (BERT)"):
        under_resume, under_msra = "\t".join(big[row]["resume"]), "\t".join(big[row]["msra"])
        assert under_resume in plte["msra"] and under_resume not in plte["resume"], row
        assert under_msra in plte["resume"] and under_msra not in plte["msra"], row
    # the Weibo column is where it says (that table's text lists each column's cells on one line: F1 alone)
    f1 = big["BERT-Tagger"]["weibo"][2]
    assert f1 in plte["weibo"] and f1 not in plte["resume"] + plte["msra"]


@pytest.mark.parametrize("dataset", ["resume", "msra", "weibo"])
def test_every_ner_cell_is_the_papers_number_of_its_own_dataset(dataset):
    big, plte = big_table_iv(), plte_sections()
    printed_under = {"resume": "msra", "msra": "resume", "weibo": "weibo"}[dataset]
    cells = NUMBERS["experiments"][f"ner/{dataset}"]
    assert cells, dataset
    for name, cell in cells.items():
        number = cell.split()[0]
        assert paper_number(f"ner/{dataset}", f"{dataset}_{name}") == cell
        if "BiG Tab. IV" in cell:
            assert big[BIG_ROWS[name]][printed_under][2] == number, (dataset, name)
            label = {"resume": "Resume", "msra": "MSRA", "weibo": "Weibo"}[printed_under]
            assert (f"printed under {label})" in cell) == (printed_under != dataset), (dataset, name, cell)
        else:
            assert re.search(rf"PLTE Tab\. {1 if dataset == 'resume' else 2}\b", cell), (dataset, name, cell)
            assert re.search(rf"(?<![\d.]){re.escape(number)}(?![\d])", plte[dataset]), (dataset, name, cell)
        assert ("BERT-base" in cell) == name.endswith("_m3e"), (dataset, name, cell)


def test_an_m3e_row_of_another_width_or_backbone_start_has_its_models_paper_number():
    assert paper_number("ner/resume", "resume_plte_m3e_wide") == "96.45 BERT-base (PLTE Tab. 1, PLTE[BERT])"
    assert paper_number("ner/resume", "resume_tagger_m3e_msra2") == "95.78 BERT-base (PLTE Tab. 1, BERT-Tagger)"
    assert paper_number("ner/weibo", "weibo_plte_m3e") is None  # the PLTE paper has no PLTE[BERT] row for Weibo


@pytest.mark.parametrize("experiment", ["cls/chnsenticorp", "cls/thucnews", "pair/bq"])
def test_every_sentence_cell_is_in_the_table_it_names(experiment):
    tables = {"BiG Tab. II": table_text("big_transformer.txt", "TABLE II\n", "D. Results of Machine Reading"),
              "MWA Tab. 3": table_text("mwa.txt", "Prev. SOTA", "Table 3: Evaluation results"),
              "HRMF Tab. 2": table_text("hrmf.txt", "Task SC SPM NLI MRC", "6.2 Ablation Study")}
    dataset = experiment.split("/")[1]
    column = {"chnsenticorp": 0, "thucnews": 3, "bq": 2}[dataset]  # BiG Tab. II: ChnSenti, Weibo, BQ, THUCNews
    cells = NUMBERS["experiments"][experiment]
    assert cells
    for name, cell in cells.items():
        number = cell.split()[0]
        named = [t for t in tables if t in cell]
        assert named, (experiment, name, cell)
        for table in named:
            if table == "BiG Tab. II":  # dev and test per dataset: the number is the dataset's test cell of a row
                rows = [line.split("\t") for line in tables[table].splitlines() if line.count("\t") == 8]
                assert any(row[2 + 2 * column] == number for row in rows), (experiment, name, cell)
            else:  # ChnSentiCorp is the first column of both
                assert re.search(rf"^BERT\s+{re.escape(number)}|^\+(MWA|HRMF)\s+{re.escape(number)}", tables[table],
                                 re.M), (experiment, name, cell)
        assert ("BERT-base" in cell) == name.startswith("m3e_"), (experiment, name, cell)
