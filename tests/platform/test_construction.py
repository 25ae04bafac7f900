"""Construction from specs: arguments the code passes never silently replace or drop a spec
value, ``vocab`` reaches every level (``Lazy`` ones too), problems are structured; a class's
``weight_sources`` must exist in a new spec and are left out, at every level, when a checkpoint
follows."""
from typing import Optional

import pytest

from multigrain.platform.config import Lazy, build, validate
from multigrain.platform.errors import Problem, SpecError
from multigrain.platform.registry import Registrable


class Part(Registrable, kind="test_part"):
    pass


@Part.register("leaf")
class Leaf(Part):
    def __init__(self, vocab, size: int = 2):
        self.vocab, self.size = vocab, size


@Part.register("plain")
class Plain(Part):
    def __init__(self, size: int = 2):
        self.size = size


@Part.register("sized")
class Sized(Part):
    def __init__(self, input_dim: int, extra: Optional[int] = None):
        self.input_dim, self.extra = input_dim, extra


@Part.register("holder")
class Holder(Part):
    """Builds its child later, passing what it knows then."""

    def __init__(self, vocab, child: Lazy[Part], nested: Optional[Lazy[Part]] = None, offer: bool = False):
        self.vocab = vocab
        kwargs = {"offered": {"extra": 7}} if offer else {}
        self.child = child.construct(input_dim=5, **kwargs) if child.type_name == "sized" else child.construct()
        self.nested = nested.construct() if nested is not None else None


@Part.register("from_file")
class FromFile(Part):
    weight_sources = ("weights_file",)

    def __init__(self, size: int = 2, weights_file: Optional[str] = None):
        self.weights = open(weights_file, encoding="utf-8").read() if weights_file else None


class Top:
    def __init__(self, part: Lazy[Part]):
        self.part = part


VOCAB = object()


def make(spec):
    return build(Top, {"part": spec}).part.construct(vocab=VOCAB)


def test_vocab_reaches_every_level_lazy_ones_included():
    holder = make({"type": "holder", "child": {"type": "leaf"}, "nested": {"type": "holder", "child": {"type": "leaf"}}})
    assert holder.vocab is VOCAB and holder.child.vocab is VOCAB
    assert holder.nested.vocab is VOCAB and holder.nested.child.vocab is VOCAB


def test_a_spec_value_the_code_replaces_is_an_error_naming_both():
    with pytest.raises(SpecError) as e:
        make({"type": "holder", "child": {"type": "sized", "input_dim": 9}})
    (problem,) = e.value.problems
    assert problem.kind == "injected" and problem.path == "part.child.input_dim"
    assert "the spec sets 9, but Holder.__init__ passes input_dim=5 to Sized" in str(e.value)


def test_a_spec_value_equal_to_what_the_code_passes_is_accepted():
    assert make({"type": "holder", "child": {"type": "sized", "input_dim": 5}}).child.input_dim == 5


def test_an_argument_the_component_does_not_take_is_an_error():
    with pytest.raises(SpecError) as e:
        build(Top, {"part": {"type": "plain"}}).part.construct(size_hint=3)
    (problem,) = e.value.problems
    assert problem.kind == "argument" and "Plain takes no argument 'size_hint'" in problem.message


def test_offered_arguments_go_only_where_they_are_taken():
    assert make({"type": "holder", "child": {"type": "sized"}, "offer": True}).child.extra == 7
    assert make({"type": "holder", "child": {"type": "sized"}}).child.extra is None
    assert make({"type": "holder", "child": {"type": "leaf"}, "offer": True}).child.size == 2


def test_problems_are_structured():
    problems = validate({"part": {"type": "holder", "child": {"type": "lef"}, "offer": "yes", "colour": 1}}, Top)
    by_path = {p.path: p for p in problems}
    assert by_path["part.child.type"].kind == "type" and "did you mean 'leaf'" in by_path["part.child.type"].message
    assert by_path["part.offer"] == Problem("part.offer", 'expected bool, got "yes"', "type")
    assert by_path["part.colour"].kind == "unknown_key"
    assert validate({}, Top) == [Problem("part", "missing required argument", "missing")]
    # a Lazy's own arguments may still come from the code at construct() time: not missing yet
    assert validate({"part": {"type": "holder"}}, Top) == []


def test_weight_sources_must_exist_and_are_left_out_at_every_level_when_a_checkpoint_follows(tmp_path):
    (tmp_path / "w.txt").write_text("first weights", encoding="utf-8")
    child = {"type": "from_file", "weights_file": str(tmp_path / "w.txt")}
    spec = {"part": {"type": "holder", "child": child, "nested": {"type": "holder", "child": child}}}
    assert validate(spec, Top, check_files=True) == []
    read = build(Top, spec).part.construct(vocab=VOCAB)
    assert read.child.weights == read.nested.child.weights == "first weights"
    (tmp_path / "w.txt").unlink()
    loaded = build(Top, spec).part.construct(vocab=VOCAB, checkpoint_follows=True)
    assert loaded.child.weights is None and loaded.nested.child.weights is None
    missing = f"file not found: {tmp_path / 'w.txt'} (paths are relative to "
    assert [(p.path, p.message.startswith(missing)) for p in validate(spec, Top, check_files=True)] == [
        ("part.child.weights_file", True), ("part.nested.child.weights_file", True)]
    assert validate(spec, Top) == []  # a run directory's spec: its files may be gone
    with pytest.raises(SpecError) as e:  # a file error of a component is one problem at its path, not a traceback
        build(Top, spec).part.construct(vocab=VOCAB)
    assert e.value.problems[0].path == "part.child" and "FromFile: [Errno 2] No such file" in str(e.value)


@pytest.mark.parametrize("given, says", [
    ("", "an empty path (name a file, or a run directory)"),  # an unset shell variable: not "no weights"
    ("folder", "{tmp}/folder is a folder with no best.pt (give a weights file, or a run directory that has finished"),
])
def test_a_weight_source_must_give_a_file(given, says, tmp_path):
    (tmp_path / "folder").mkdir()
    path = str(tmp_path / given) if given else ""
    spec = {"part": {"type": "holder", "child": {"type": "from_file", "weights_file": path}}}
    [problem] = validate(spec, Top, check_files=True)
    assert problem.path == "part.child.weights_file" and problem.message.startswith(says.format(tmp=tmp_path))
    (tmp_path / "folder" / "best.pt").write_bytes(b"")  # a run directory's weights: there
    assert validate(spec, Top, check_files=True) == ([problem] if not given else [])
