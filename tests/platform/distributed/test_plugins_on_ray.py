"""The plugins the user included reach every process the platform starts on Ray (sweep trials,
evaluate-all actors, Serve replicas, Ray Train workers): the driver's ``plugins.INCLUDED``, each
module imported from the folder the user's flag found it in - here a folder that is neither the
working directory nor on ``sys.path``, so a worker that did not get the list could not import it.
A run directory's own ``plugins.json`` never imports anything (``tests/platform/test_hostile_run_dirs.py``).
One local Ray for the module; every training is a 1-epoch BiLSTM-CRF on 10 sentences.
"""
import json
import urllib.request

import pytest

from multigrain.platform import plugins
from multigrain.testing import bilstm_tagger, tiny_spec
from tests.platform.distributed.ray_head import free_port
from tests.platform.test_plugins_travel import tab_reader_plugin, ten_tab_sentences

PLUGIN = "mg_tabplug_ray"
READER = "char_tab_bmes_ray"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """The plugin in its own folder, included as ``--include-package`` would (from that folder);
    the working directory is another folder; one local Ray."""
    import os

    import ray

    from multigrain.platform.ray.cluster import patient_serve_defaults

    folder, work = tmp_path_factory.mktemp("plugin_home"), tmp_path_factory.mktemp("plugin_work")
    tab_reader_plugin(folder, PLUGIN, READER)
    data = ten_tab_sentences(work / "ten.tsv")
    old = os.getcwd()
    os.chdir(work)
    plugins.include(PLUGIN, str(folder))
    assert plugins.INCLUDED[PLUGIN] == str(folder.resolve())
    patient_serve_defaults()
    ray.init(address="local", num_cpus=4, include_dashboard=False, object_store_memory=80 * 1024 * 1024,
             log_to_driver=False)
    spec = tiny_spec(bilstm_tagger(hidden=8, dim=8), {"type": READER}, data, data, data, task="ner")
    yield {"folder": folder, "work": work, "data": str(data), "spec": spec}
    try:
        from ray import serve

        serve.shutdown()
    finally:
        ray.shutdown()
        plugins.INCLUDED.pop(PLUGIN, None)
        os.chdir(old)


@pytest.fixture(scope="module")
def swept(setup):
    from multigrain.platform.ray.sweep import expand_sweep, run_sweep

    trials = expand_sweep(setup["spec"], [], 1, "tiny", setup["work"] / "runs")
    run_sweep(trials, {"num_cpus": 1, "num_gpus": 0}, uri=f"sqlite:///{setup['work'] / 'mlruns.db'}", poll=0.1)
    return trials


def test_a_sweep_trial_trains_with_the_users_plugin(setup, swept):
    (trial,) = swept
    assert (trial.state, trial.error) == ("FINISHED", None)
    saved = json.loads((setup["work"] / trial.run_dir / "plugins.json").read_text(encoding="utf-8"))
    assert [(m["module"], m["search_dir"]) for m in saved["modules"]] == [(PLUGIN, str(setup["folder"].resolve()))]
    assert trial.result["placement"]["pid"] != __import__("os").getpid()


def test_evaluator_actors_open_the_run_with_the_users_plugin(setup, swept):
    from multigrain.platform.ray.evaluate import evaluate_all

    run_dir = str(setup["work"] / swept[0].run_dir)
    (row,) = evaluate_all([run_dir], [setup["data"]], num_cpus=0.5, num_gpus=0)
    assert "error" not in row, row.get("error")
    assert row["examples"] == 10 and 0.0 <= row["metrics"]["f1"] <= 1.0


def test_serve_replicas_open_the_run_with_the_users_plugin(setup, swept):
    from ray import serve

    from multigrain.platform.ray.archives import check_archives
    from multigrain.platform.ray.serve import Limits, start_service

    named = check_archives([str(setup["work"] / swept[0].run_dir)])
    try:
        # the ingress replica and the long-input replica (Serve waits until both have loaded the run)
        (url,) = start_service(named, port=free_port(), num_cpus=0.5, limits=Limits(long_input_chars=8)).values()
        req = urllib.request.Request(url, data=json.dumps({"instances": [{"text": "我在北京工作"}]}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            assert r.status == 200
            (prediction,) = json.loads(r.read())["predictions"]
        assert len(prediction["tags"]) == len("我在北京工作")
        long_text = "我在北京工作。" * 3  # over 8 characters: the long-input replica predicts it
        req = urllib.request.Request(url, data=json.dumps({"instances": [{"text": long_text}]}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            assert r.status == 200
            (prediction,) = json.loads(r.read())["predictions"]
        assert prediction["text"] == long_text and len(prediction["tags"]) == len(long_text)
    finally:
        serve.shutdown()


def test_ray_train_workers_import_the_users_plugin(setup):
    from multigrain.platform.ray.train import RayTrainCluster
    from multigrain.platform.runs import Run

    spec = {**setup["spec"], "trainer": {**setup["spec"]["trainer"], "workers": 2}}
    result = Run(spec, setup["work"] / "two").train(data_parallel=RayTrainCluster().launcher)
    assert result["finished"] is True and result["device"].startswith("Ray Train: 2 workers (gloo")
