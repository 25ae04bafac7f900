"""Construction from specs: arguments the code passes never silently replace or drop a spec
value, ``vocab`` reaches every level (``Lazy`` ones too), problems are structured."""
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
