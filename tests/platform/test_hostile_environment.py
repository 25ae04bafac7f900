"""Hostile input, round five: the process's own surroundings (``platform/startup.py``).

Found by a probe: ``>&-`` gave AttributeError tracebacks (exit 1); with ``2>&-`` a summary line meant
for stderr went into ``predict``'s JSON-lines output; ``PYTHONIOENCODING=ascii`` crashed every
command printing Chinese (``train`` after its run had finished); a deleted working directory was a
traceback or torch's "oneMKL FATAL ERROR"; ``ulimit -n 8`` failed at the end of training with the
MLflow run left RUNNING; ``| true`` ended Rich's tables with exit 1 and no message; ``COLUMNS=0`` on
a terminal printed nothing; a run directory path with a byte that is no UTF-8 trained and then
crashed writing ``metrics.json``; ``MULTIGRAIN_PROGRESS_INTERVAL=abc`` was silently the default.
"""
import json
import os
import subprocess
import sys

from tests.conftest import ROOT, resume_tagger_spec

CLI = f"{sys.executable} -P -m multigrain.platform.cli"


def shell(command: str, cwd, **env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def bad_spec(tmp_path):
    spec = resume_tagger_spec(tmp_path / "data")
    spec["model"]["encoder"]["type"] = "双向长短期记忆"
    (tmp_path / "spec.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    return tmp_path / "spec.json"


def test_closed_standard_streams(tmp_path):
    out = shell(f"{CLI} components >&-", tmp_path)
    assert (out.returncode, out.stderr) == (2, "error: standard output is closed (>&-): send it to a file, or to "
                                               "/dev/null\n")
    spec = bad_spec(tmp_path)
    out = shell(f"{CLI} validate {spec} 2>&-", tmp_path)  # the error goes nowhere, not into stdout
    assert (out.returncode, out.stdout) == (2, "")
    out = shell(f"{CLI} components 2>&-", tmp_path)
    assert out.returncode == 0 and out.stdout.count("\n") > 20 and "error" not in out.stdout


def test_an_output_encoding_without_chinese_gets_escapes(tmp_path):
    spec = bad_spec(tmp_path)
    for env in ({"PYTHONIOENCODING": "ascii"}, {"PYTHONIOENCODING": "latin-1"}, {"LC_ALL": "C", "PYTHONUTF8": "0"}):
        out = shell(f"{CLI} validate {spec}", tmp_path, **env)
        assert out.returncode == 2 and "Traceback" not in out.stderr, (env, out.stderr)
        assert "model.encoder.type: unknown encoder type '\\u53cc\\u5411" in out.stderr, (env, out.stderr)


def test_a_deleted_working_directory_is_one_line(tmp_path):
    out = shell(f"mkdir gone && cd gone && rmdir ../gone && exec {CLI} validate {bad_spec(tmp_path)}", tmp_path)
    assert (out.returncode, out.stderr) == (2, "error: the working directory no longer exists: run the command from "
                                               "a folder that does\n")


def test_too_few_open_files_is_one_line_or_raised_when_it_can_be(tmp_path):
    out = shell(f"ulimit -n 8; exec {CLI} components", tmp_path)
    assert (out.returncode, out.stderr) == (2, "error: the limit of open files is 8 (ulimit -n); a command needs at "
                                               "least 64: raise it with ulimit -n 1024\n")
    out = shell(f"ulimit -S -n 12; exec {CLI} components", tmp_path)  # the hard limit allows more: raised
    assert out.returncode == 0 and "registered components" in out.stdout, out.stderr


def test_a_bad_progress_interval_is_refused(tmp_path):
    out = shell(f"{CLI} components", tmp_path, MULTIGRAIN_PROGRESS_INTERVAL="abc")
    assert (out.returncode, out.stderr) == (2, "error: MULTIGRAIN_PROGRESS_INTERVAL='abc': expected a number of "
                                               "seconds >= 0 (at most 30 are used) or 'off'\n")


def test_a_table_into_a_closed_pipe_is_the_broken_pipe_line(tmp_path):
    out = shell(f"{CLI} components | true; exit ${{PIPESTATUS[0]}}", tmp_path)
    assert (out.returncode, out.stderr) == (2, "error: cannot write the output: Broken pipe\n")


def test_a_terminal_of_no_width_gets_a_readable_table(tmp_path):
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-P", "-m", "multigrain.platform.cli", "components"], cwd=tmp_path,
                            stdout=follower, stderr=subprocess.PIPE, env={**os.environ, "COLUMNS": "0"})
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal's other end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert proc.wait(timeout=60) == 0
    text = b"".join(chunks).decode("utf-8", "replace")
    assert "bilstm" in text and "crf" in text


def test_a_run_directory_path_that_is_no_utf8_is_refused_before_training(tmp_path):
    spec = resume_tagger_spec(tmp_path / "data")
    (tmp_path / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    run_dir = os.fsencode(tmp_path) + b"/bad\xffdir/run"
    out = subprocess.run([sys.executable, "-P", "-m", "multigrain.platform.cli", "train", "spec.json", "-s", run_dir,
                          "--no-tracking"], cwd=tmp_path, capture_output=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert out.stderr.decode().endswith("bad\\udcffdir/run: is no UTF-8 path (it holds a byte that is no UTF-8); "
                                        "rename it\n"), out.stderr
    assert sorted(os.listdir(tmp_path)) == ["data", "spec.json"]


def test_a_spec_in_a_folder_whose_name_is_no_utf8_is_one_line(tmp_path):
    folder = os.fsencode(tmp_path) + b"/specs\xff"
    os.mkdir(folder)
    with open(folder + b"/spec.json", "w", encoding="utf-8") as f:
        json.dump(resume_tagger_spec(tmp_path / "data"), f)
    out = subprocess.run([sys.executable, "-P", "-m", "multigrain.platform.cli", "validate", folder + b"/spec.json"],
                         cwd=tmp_path, capture_output=True, timeout=120)
    assert out.returncode == 2 and out.stderr.decode().endswith(
        "specs\\udcff/spec.json: its path holds a byte that is no UTF-8, which Jsonnet cannot take; rename the "
        "folder\n"), out.stderr
