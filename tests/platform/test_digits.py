"""Numbers read from text are ASCII digits of bounded length: '²' (``isdigit()`` but not ``int()``),
'١' (``int()`` reads it as 1) and 5,000 digits (``int()`` refuses them) are never a traceback."""
from __future__ import annotations

import argparse

import pytest

from multigrain.components.lattice.lexicon import read_word_list
from multigrain.components.readers.corpus import _natural
from multigrain.platform.commands.checks import device
from multigrain.platform.digits import whole_number
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.ray.cluster import check_reachable
from multigrain.platform.ray.serve_batching import batch_examples
from multigrain.platform.vec import is_vec_header

NOT_NUMBERS = ["²", "١", "1_0", " 1", "+1", "-1", "", "9" * 5000, "1.0"]


@pytest.mark.parametrize("text", NOT_NUMBERS)
def test_only_ascii_digits_are_a_whole_number(text):
    assert whole_number(text) is None


def test_a_whole_number_and_its_digit_bound():
    assert whole_number("007") == 7
    assert whole_number("9" * 18) == 10 ** 18 - 1
    assert whole_number("9" * 19) is None and whole_number("12345", max_digits=4) is None


def test_a_word_lists_frequency_that_is_no_number_counts_one(tmp_path):
    words = tmp_path / "dict.txt"
    words.write_text(f"中国 ²\n北京 {'9' * 5000}\n上海 12 ns\n天津\n", encoding="utf-8")
    assert read_word_list(str(words)) == (["中国", "北京", "上海", "天津"], [1, 1, 12, 1])


def test_natural_order_of_paths_with_digits_of_every_kind():
    paths = ["ep10.txt", "²", "ep9.txt", "a", "ep١.txt"]
    assert sorted(paths, key=_natural) == ["a", "ep9.txt", "ep10.txt", "ep١.txt", "²"]


def test_a_vec_header_is_two_ascii_numbers():
    assert is_vec_header(["3", "50"])
    assert not is_vec_header(["3", "²"]) and not is_vec_header(["١", "50"])


@pytest.mark.parametrize("text", ["cuda:١", "cuda:²", "cuda:" + "1" * 5000])
def test_a_device_index_is_ascii_digits(text):
    with pytest.raises(argparse.ArgumentTypeError, match="is not a device"):
        device(text)


@pytest.mark.parametrize("value", ["²", "١٦", "0", "9" * 5000])
def test_serves_batch_size_from_the_environment(value):
    with pytest.raises(ConfigurationError, match="expected a whole number of texts, at least 1"):
        batch_examples({"MULTIGRAIN_SERVE_MAX_BATCH": value})
    assert batch_examples({"MULTIGRAIN_SERVE_MAX_BATCH": "16"}) == 16


@pytest.mark.parametrize("address", ["127.0.0.1:٦٣٧٩", "127.0.0.1:²", "127.0.0.1:" + "6" * 5000])
def test_a_cluster_port_is_ascii_digits(address):
    with pytest.raises(ConfigurationError, match="expected HOST:PORT"):
        check_reachable(address)
