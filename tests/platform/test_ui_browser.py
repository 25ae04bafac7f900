"""``multigrain ui`` in a real browser: headless Chromium (Debian's ``chromium`` package, driven by
Playwright pointed at /usr/bin/chromium: no browser download) opens the MLflow UI over a temporary
store holding a run this test trained. The address ``ui`` prints opens on model training (no click
on the GenAI/model-training switch), where experiment ``ner/resume`` is listed; the experiment's
``leaderboard`` view (the link ``ui`` prints for it) shows the runs list with a
``leaderboard_score`` column holding the run's test F1; the run's page shows its readable name and
``test_f1`` value, and its learning-curve image (non-empty, a PNG). Screenshots are saved under
``test-artifacts/`` (``MULTIGRAIN_TEST_ARTIFACTS``). Skipped, saying why, without a browser or
Playwright (``.ci/run`` installs ``chromium`` when it is missing)."""
import base64
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

CHROMIUM = os.environ.get("MULTIGRAIN_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).is_file():
    pytest.skip(f"browser test skipped: no Chromium at {CHROMIUM} (apt-get install -y chromium)",
                allow_module_level=True)
try:
    from playwright.sync_api import sync_playwright
except ImportError:
    pytest.skip("browser test skipped: Playwright is not installed (pip install -e '.[test]')",
                allow_module_level=True)

#: the flags every browser this project starts gets (plus a new, empty --user-data-dir)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(os.environ.get("MULTIGRAIN_TEST_ARTIFACTS") or ROOT / "test-artifacts")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def ui(tmp_path):
    """A trained run in a fresh store, and ``multigrain ui`` over it (stopped, and its port checked
    closed, at the end)."""
    from tests.conftest import train_runs

    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    (result,) = train_runs(tmp_path, uri, [("resume_bilstm_crf", 7, 0.05)])
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-P", "-m", "multigrain.platform.cli", "ui", "--port", str(port),
                             "--tracking-uri", uri], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        views, line = [], proc.stdout.readline()
        while line and not line.startswith("MLflow UI of"):  # each experiment's leaderboard view, then the UI
            views.append(line)
            line = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}/#/experiments?workflowType=machine_learning " in line, line
        (view,) = views
        assert view.startswith(f"ner/resume: http://127.0.0.1:{port}/#/experiments/"), view
        yield {"url": f"http://127.0.0.1:{port}", "result": result, "uri": uri, "opens": line.split()[4],
               "view": view.split()[1]}
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0, "the UI's server still listens"


def shown(value: float) -> str:
    """A metric as the UI prints it (JavaScript's number formatting: 0.5, 0, 0.333...)."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def test_the_ui_shows_the_run_its_test_f1_and_its_learning_curves(ui):
    result = ui["result"]
    name = f"resume_bilstm_crf {result['spec_hash'][:8]} seed 7"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True, args=FLAGS,
                                                        viewport={"width": 1400, "height": 1000})
        try:
            page = browser.new_page()
            page.set_default_timeout(60_000)
            page.goto(ui["opens"])  # the address `multigrain ui` prints: model training, no switch clicked
            page.get_by_text("ner/resume", exact=True).first.wait_for()
            page.get_by_text("Model registry", exact=True).first.wait_for()
            assert "Observability" not in page.inner_text("body")  # the GenAI navigation is not shown
            page.goto(ui["view"])  # the experiment's leaderboard view: the score is a column of the runs list
            page.get_by_text("leaderboard_score", exact=True).first.wait_for()
            page.get_by_text(name, exact=True).first.wait_for()
            body = page.inner_text("body")
            assert "Sort: leaderboard_score" in body and "Observability" not in body
            columns = body[body.index("Run Name"):body.index(name)].split("\n")
            assert "leaderboard_score" in columns and "test_f1" in columns, columns
            values = body[body.index(name):].split("\n")
            assert values.count(shown(result["test"]["f1"])) == 2, values  # leaderboard_score and test_f1
            page.screenshot(path=str(ARTIFACTS / "ui_leaderboard_view.png"))
            page.get_by_text(name, exact=True).first.click()
            page.get_by_text("test_f1", exact=True).first.wait_for()
            body = page.inner_text("body")
            assert f"test_f1\n{shown(result['test']['f1'])}\n" in body
            assert name in body and "94.41 (BiG Tab. IV, LSTM, printed under MSRA)" in body  # the description
            page.get_by_role("tab", name="Artifacts").click()
            page.get_by_text("learning_curves.png", exact=True).first.click()
            image = page.locator("img[src^='blob:']").first
            image.wait_for()
            page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=image.element_handle())
            png = base64.b64decode(image.evaluate(
                """async img => { const bytes = new Uint8Array(await (await fetch(img.src)).arrayBuffer());
                                  let s = ''; for (const b of bytes) s += String.fromCharCode(b); return btoa(s); }"""))
            page.screenshot(path=str(ARTIFACTS / "ui_learning_curves.png"))
        finally:
            browser.close()
    from PIL import Image

    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
    with Image.open(io.BytesIO(png)) as decoded:
        assert decoded.format == "PNG" and decoded.size == (1100, 400)
    assert (ARTIFACTS / "ui_learning_curves.png").stat().st_size > 0
    print(f"browser part: {time.monotonic() - started:.1f} s; screenshot {ARTIFACTS / 'ui_learning_curves.png'}")
