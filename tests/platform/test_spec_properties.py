"""Property-based: whatever bytes a spec file holds, whatever JSON a spec is, whatever an
override says, the spec loader raises only our errors (never another exception).
``MULTIGRAIN_HYPOTHESIS_EXAMPLES`` sets the examples per property (benchmarks run more)."""
import json
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from multigrain.platform.config import validate
from multigrain.platform.errors import MultigrainError
from multigrain.platform.experiment import Experiment, validate_spec
from multigrain.platform.specs import apply_overrides, load_spec
from tests.conftest import ROOT

EXAMPLES = int(os.environ.get("MULTIGRAIN_HYPOTHESIS_EXAMPLES", "40"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                    derandomize=True)
QUICKSTART = (ROOT / "jsonnet_configs" / "ner" / "resume_quickstart.jsonnet").read_bytes()
QUICKSTART_SPEC = json.loads(json.dumps(load_spec(ROOT / "jsonnet_configs" / "ner" / "resume_quickstart.jsonnet")))

json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                         max_size=4),
                           max_leaves=20)


def load_bytes(content: bytes, suffix: str):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"spec{suffix}"
        path.write_bytes(content)
        try:
            spec = load_spec(path)
            validate_spec(spec, str(path))
        except MultigrainError:
            pass


@PROPERTY
@given(st.binary(max_size=300), st.sampled_from([".jsonnet", ".json"]))
def test_random_bytes(content, suffix):
    load_bytes(content, suffix)


@PROPERTY
@given(st.integers(min_value=0, max_value=len(QUICKSTART)))
def test_truncated_spec(cut):
    load_bytes(QUICKSTART[:cut], ".jsonnet")


@PROPERTY
@given(st.sampled_from(["utf-16", "utf-32", "gbk", "big5", "latin-1"]))
def test_wrong_encodings(encoding):
    text = QUICKSTART.decode("utf-8") + "\n// 中文注释 ümlaut\n"
    load_bytes(text.encode(encoding, errors="replace"), ".jsonnet")


@PROPERTY
@given(json_values)
def test_any_json_spec_validates_to_problems(value):
    problems = validate(value, Experiment)
    assert all(p.path is not None and p.message for p in problems)


@PROPERTY
@given(st.sampled_from(sorted(QUICKSTART_SPEC)), json_values)
def test_any_value_at_a_top_level_key(key, value):
    spec = dict(QUICKSTART_SPEC, **{key: value})
    validate(spec, Experiment)


@PROPERTY
@given(st.lists(st.text(max_size=30), max_size=3))
def test_any_override(texts):
    try:
        apply_overrides(QUICKSTART_SPEC, texts)
    except MultigrainError:
        pass
