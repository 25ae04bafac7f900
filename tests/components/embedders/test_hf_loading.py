"""``hf_transformer`` loads its backbone without the weight-loading bar of ``transformers`` under
``CI=true`` (the platform's own bars are off there too), and leaves that library's setting as it was."""
from transformers.utils import logging as hf_logging

from multigrain.components.embedders.hf_transformer import HfTransformer
from tests.conftest import tiny_bert


def test_under_ci_the_backbone_loads_without_a_progress_bar(tmp_path, capfd, monkeypatch):
    path = tiny_bert(tmp_path / "bert", "好书")
    monkeypatch.delenv("MULTIGRAIN_QUIET", raising=False)
    monkeypatch.setenv("CI", "false")
    HfTransformer(path)
    shown = capfd.readouterr().err
    monkeypatch.setenv("CI", "true")
    HfTransformer(path)
    hidden = capfd.readouterr().err
    assert "Loading weights" in shown and "Loading weights" not in hidden
    assert hf_logging.is_progress_bar_enabled()  # as it was, for the rest of the process
