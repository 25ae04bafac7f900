"""Which components may import which: readers make instances, models compute on them; a model,
head, encoder or embedder imports no reader (what both need, such as the stable hash of a text,
lives in ``components/text.py``)."""
from tests.test_package_layout import import_graph


def test_models_heads_encoders_and_embedders_import_no_reader():
    layers = ("models", "heads", "encoders", "embedders")
    wrong = sorted(f"{a} -> {b}" for a, deps in import_graph().items()
                   if a.startswith(tuple(f"multigrain.components.{layer}" for layer in layers))
                   for b in deps if b.startswith("multigrain.components.readers"))
    assert wrong == []
