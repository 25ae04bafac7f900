"""The README's "Bring your own data" section works as written: its files (specs, the reader
plugin) are written where it says, data files where it tells the user to put them, and its
commands run, in order, in a fresh directory that has the repository's spec library."""
from __future__ import annotations

import json
import re
import shlex
from concurrent.futures import ThreadPoolExecutor

from tests.components.readers.generic_data import ner_records, pair_rows, write_ner, write_pairs
from tests.conftest import ROOT, run_cli

SECTION = "## Bring your own data"
MARKED_BLOCK = re.compile(r"<!-- byod: (?P<kind>file|sample|run) ?(?P<path>\S*) -->\n```[a-z]*\n(?P<body>.*?)```", re.S)


def readme_steps() -> list[tuple[str, str, str]]:
    """``(kind, path, text)`` of the section's marked blocks, in order: ``file`` (written as is),
    ``sample`` (the first lines of a data file the user writes), ``run`` (commands)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start:end if end >= 0 else len(text)]
    return [(m.group("kind"), m.group("path"), m.group("body")) for m in MARKED_BLOCK.finditer(section)]


def include_package_after_the_command() -> bool:
    """Whether this CLI takes ``--include-package`` after the command (the README's form)."""
    from multigrain.platform.commands import build_parser

    args, extra = build_parser().parse_known_args(["train", "spec.jsonnet", "--include-package", "m"])
    return not extra and args.include_package == ["m"]


def as_cli_args(command: str, flag_after_command: bool) -> list[str]:
    words = shlex.split(command)
    assert words[0] == "multigrain", command
    words = words[1:]
    if not flag_after_command and "--include-package" in words:  # an older CLI: the flag goes first
        at = words.index("--include-package")
        words = words[at:at + 2] + words[:at] + words[at + 2:]
    return words


def slash_line(record: dict) -> str:
    text, chunks, at = record["text"], [], 0
    for span in record["spans"]:
        if span["start"] > at:
            chunks.append(f"{text[at:span['start']]}/O")
        chunks.append(f"{span['text']}/{span['label']}")
        at = span["end"]
    return " ".join(chunks + ([f"{text[at:]}/O"] if at < len(text) else []))


def write_user_data(root) -> dict[str, int]:
    """The data files the README tells the user to put in ``my_data/``; their example counts."""
    people, pairs = ner_records(24), pair_rows()
    counts = {}
    for split, records in (("train", people), ("dev", people[:8]), ("test", people[8:20])):
        write_ner(root / "my_data" / "people" / f"{split}.jsonl", records)
        counts[f"my_data/people/{split}.jsonl"] = len(records)
    for split, rows in (("train", pairs), ("dev", pairs[:6]), ("test", pairs[4:14])):
        write_pairs(root / "my_data" / "questions" / f"{split}.tsv", rows)
        counts[f"my_data/questions/{split}.tsv"] = len(rows)
    for split, records in (("train", people), ("dev", people[:8])):
        path = root / "my_data" / "slash" / f"{split}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_text("".join(slash_line(r) + "\n" for r in records), encoding="utf-8")
    return counts


def test_the_readme_section_runs_as_written(tmp_path):
    steps = readme_steps()
    kinds = [kind for kind, _, _ in steps]
    assert (kinds.count("file"), kinds.count("sample"), kinds.count("run")) == (4, 2, 3), kinds
    (tmp_path / "jsonnet_configs").symlink_to(ROOT / "jsonnet_configs")  # as in a clone of the repository
    counts = write_user_data(tmp_path)
    flag_after_command = include_package_after_the_command()
    blocks = []
    for kind, path, body in steps:
        if kind == "sample":  # the README's lines open the file the test wrote (whose header they hold)
            target = tmp_path / path
            ours = target.read_text(encoding="utf-8")
            target.write_text(body + (ours.split("\n", 1)[1] if path.endswith(".tsv") else ours), encoding="utf-8")
            counts[path] += body.count("\n") - path.endswith(".tsv")
        elif kind == "file":
            target = tmp_path / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body, encoding="utf-8")
        else:
            blocks.append([line for line in body.splitlines() if line.strip() and not line.startswith("#")])

    def run_block(commands: list[str]) -> list:
        """A block's commands in order; the blocks are independent (own specs and run
        directories, one MLflow store) and run side by side, as users may."""
        done = []
        for command in commands:
            result = run_cli(*as_cli_args(command, flag_after_command), cwd=tmp_path, env={"OMP_NUM_THREADS": "1"})
            assert result.returncode == 0, f"{command}\n{result.stderr[-3000:]}"
            done.append((shlex.split(command), result))
        return done

    with ThreadPoolExecutor(len(blocks)) as pool:
        ran = [step for block in pool.map(run_block, blocks) for step in block]
    assert [words[1] for words, _ in ran] == ["train", "evaluate", "train", "evaluate", "train"]

    for words, result in ran:
        if words[1] == "evaluate":  # every example of the file is scored, with the task's metrics
            data = words[3]
            assert f"{data}: {counts[data]} instances read with the test reader" in result.stderr
            assert f", {counts[data]} scored" in result.stderr
            metrics = json.loads(result.stdout)
            assert ("f1" if "people" in data else "accuracy") in metrics
        else:
            run_dir = tmp_path / words[words.index("-s") + 1]
            assert json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))["finished"]
    config = json.loads((tmp_path / "runs" / "people_slash" / "config.json").read_text(encoding="utf-8"))
    assert config["dataset_reader"] == {"type": "slash_chunks"} and config["dataset"] == "people_slash"
    assert (tmp_path / "mlruns.db").is_file()  # the runs were tracked


def test_slash_lines_round_trip_the_records():
    record = ner_records(1)[0]
    assert slash_line(record) == "张伟/PER 在/O 北京/LOC 工作/O"
