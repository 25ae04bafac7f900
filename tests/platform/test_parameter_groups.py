"""AllenNLP-style ``parameter_groups``: per-group optimizer options matched by regex on names."""
import pytest
import torch

from multigrain.platform.optim import AdamWOptimizer, SgdOptimizer, parameter_groups


def _model():
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))


def test_first_matching_group_takes_a_parameter_and_the_rest_keep_the_defaults():
    model = _model()
    opt = AdamWOptimizer(list(model.named_parameters()), lr=1e-3,
                         parameter_groups=[[["^0\\."], {"lr": 1e-5}], [["weight"], {"weight_decay": 0.0}]])
    groups = opt.param_groups
    assert [g["lr"] for g in groups] == [1e-5, 1e-3, 1e-3]
    assert [g["weight_decay"] for g in groups] == [0.01, 0.0, 0.01]
    ids = [[id(p) for p in g["params"]] for g in groups]
    assert ids == [[id(model[0].weight), id(model[0].bias)], [id(model[1].weight)], [id(model[1].bias)]]


def test_no_groups_is_one_group_of_plain_tensors():
    model = _model()
    opt = SgdOptimizer(list(model.named_parameters()), lr=0.5)
    assert len(opt.param_groups) == 1 and opt.param_groups[0]["lr"] == 0.5
    assert "param_names" not in opt.state_dict()["param_groups"][0]


def test_a_regex_that_matches_nothing_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"parameter_groups\[0\]: the regex 'backbone' matches no parameter"):
        parameter_groups(list(_model().named_parameters()), [[["backbone"], {"lr": 1.0}]])


@pytest.mark.parametrize("bad", [[["x"], {"lr": 1}], [[[], {"lr": 1}]], [["x", {"lr": 1}]], [[["x"], 3]]])
def test_a_malformed_group_is_an_error(bad):
    with pytest.raises(ValueError, match=r"parameter_groups\[0\] must be"):
        parameter_groups(list(_model().named_parameters()), bad)


def test_a_group_that_matches_nothing_stops_the_run_before_its_directory_is_made(tmp_path):
    from multigrain.platform.errors import SpecError
    from multigrain.platform.runs import Run
    from multigrain.testing import bilstm_tagger, copy_sentences, tiny_spec
    from tests.conftest import DATA

    train = copy_sentences(DATA / "resume_ner" / "dev.char.bmes", tmp_path / "train.bmes", 8)
    spec = tiny_spec(bilstm_tagger(), {"type": "resume_ner"}, train, task="ner")
    spec["trainer"]["optimizer"]["parameter_groups"] = [[["^nomatch\\."], {"lr": 2e-5}]]
    with pytest.raises(SpecError) as caught:
        Run(spec, tmp_path / "run").train()
    assert "parameter_groups[0]: the regex '^nomatch\\\\.' matches no parameter name" in str(caught.value)
    assert not (tmp_path / "run").exists()
