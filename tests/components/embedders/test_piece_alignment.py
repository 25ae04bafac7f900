"""Characters <-> word pieces (``embedders/piece_alignment.py``): every character gets exactly one
backbone position, on hand-made merged, split, dropped and unknown cases and on m3e-small's own
WordPiece tokenizer, and the backbone's character states are its piece states (plus the place vector)."""
import pytest
import torch

from multigrain.components.embedders.piece_alignment import FIRST, INSIDE, LAST, SINGLE, align, char_spans, piece_place


def test_one_piece_per_character_is_the_identity():
    assert align(3, [(0, 1), (1, 2), (2, 3)]) == ([0, 1, 2], [0, 1, 2])
    assert piece_place([0, 1, 2]) == [SINGLE] * 3


def test_merged_characters_share_their_piece_and_know_their_place():
    # 我 在 2 0 1 7 年 -> 我 | 在 | 2017 | 年
    sequence, where = align(7, [(0, 1), (1, 2), (2, 6), (6, 7)])
    assert sequence == [0, 1, 2, 3]
    assert where == [0, 1, 2, 2, 2, 2, 3]
    assert piece_place(where) == [SINGLE, SINGLE, FIRST, INSIDE, INSIDE, LAST, SINGLE]
    assert piece_place([0, 0]) == [FIRST, LAST]


def test_dropped_characters_get_a_placeholder_where_they_stand():
    # x ␠ ␠ y: the tokenizer keeps x (0) and y (3) only
    sequence, where = align(4, [(0, 1), (3, 4)])
    assert sequence == [0, -2, -3, 1]  # -1 - i marks the placeholder of character i
    assert where == [0, 1, 2, 3]
    # a dropped first and last character
    assert align(3, [(1, 2)]) == ([-1, 0, -3], [0, 1, 2])
    # nothing kept at all
    assert align(2, []) == ([-1, -2], [0, 1])


def test_a_split_character_takes_its_first_piece():
    # one character read as two pieces (byte-level tokenizers), then a normal one
    sequence, where = align(2, [(0, 1), (0, 1), (1, 2)])
    assert sequence == [0, 1, 2] and where == [0, 2]


def test_an_unknown_word_is_one_piece_over_its_characters():
    # 读 M B A ， -> 读 | [UNK] (MBA) | ，
    sequence, where = align(5, [(0, 1), (1, 4), (4, 5)])
    assert sequence == [0, 1, 2] and where == [0, 1, 1, 1, 2]


def test_a_piece_outside_the_text_is_an_error():
    with pytest.raises(ValueError, match=r"piece 1 spans \[2, 4\), outside the text's 3 characters"):
        align(3, [(0, 2), (2, 4)])


def test_string_offsets_map_to_multi_code_point_characters():
    chars = ["a", "e\u0301", "b"]  # the middle "character" is two code points
    assert char_spans(chars, [(0, 1), (1, 3), (3, 4)]) == [(0, 1), (1, 2), (2, 3)]
    assert char_spans(chars, [(1, 2), (2, 3)]) == [(1, 2), (1, 2)]  # a split character
    assert char_spans(chars, [(2, 2)]) == [(-1, -1)]


@pytest.fixture(scope="module")
def m3e_wordpiece():
    pytest.importorskip("transformers")
    from multigrain.components.embedders.hf_transformer import HfTransformer
    from multigrain.platform.errors import ConfigurationError

    torch.manual_seed(0)
    try:
        model = HfTransformer("package:embedding/m3e-small", special_tokens=True, pieces="wordpiece")
    except ConfigurationError as e:
        pytest.skip(str(e))
    with torch.no_grad():
        model.place.weight.normal_()  # a trained place table, so that the places show
    return model.eval()


def test_m3e_wordpiece_gives_every_character_its_piece_state(m3e_wordpiece):
    model = m3e_wordpiece
    chars = list("我在2017年读MBA， ok\u200b好")
    batch = model.piece_batch([chars])
    vocab = model.token_ids
    expected = ["我", "在", "2017", "年", "读", "[UNK]", "，", "[UNK]", "ok", "[UNK]", "好"]
    assert batch["piece_ids"][0].tolist() == [vocab[t] for t in expected]
    #             我 在 2  0  1  7  年 读 M  B  A  ， ␠ o  k  zw 好
    assert batch["piece_index"][0].tolist() == [0, 1, 2, 2, 2, 2, 3, 4, 5, 5, 5, 6, 7, 8, 8, 9, 10]
    mask = torch.ones(1, len(chars), dtype=torch.bool)
    with torch.no_grad():
        states = model(chars=torch.tensor([model.index(chars)]), mask=mask, **batch)[0]
        ids = torch.tensor([[vocab["[CLS]"]] + batch["piece_ids"][0].tolist() + [vocab["[SEP]"]]])
        pieces = model.model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state[0, 1:-1]
    assert states.shape == (len(chars), model.get_output_dim())
    place = model.place.weight[batch["piece_place"][0]]
    torch.testing.assert_close(states, pieces[batch["piece_index"][0]] + place)
    # the four characters of 2017 share the piece, told apart by their place only
    assert (states[2] - states[3]).abs().max() > 0.1
    torch.testing.assert_close(states[2] - place[2], states[3] - place[3], atol=1e-5, rtol=1e-5)


def test_m3e_special_tokens_wrap_every_row_of_a_padded_batch(m3e_wordpiece):
    model = m3e_wordpiece
    rows = [list("今天天气很好"), list("北京")]
    ids = torch.tensor([model.index(rows[0]), model.index(rows[1]) + [0] * 4])
    mask = torch.tensor([[True] * 6, [True] * 2 + [False] * 4])
    with torch.no_grad():
        states = model.encode(ids, mask)
        for r, chars in enumerate(rows):
            alone = torch.tensor([model.index(["[CLS]"] + chars + ["[SEP]"])])
            ref = model.model(input_ids=alone, attention_mask=torch.ones_like(alone)).last_hidden_state[0, 1:-1]
            torch.testing.assert_close(states[r, : len(chars)], ref, atol=1e-5, rtol=1e-4)
