"""Sentences without context (document-initial, or a sentence-level batch) go through one
mechanism (:mod:`fairseq_ctx.context.modules.empty_context`) in every context model; these
numbers were recorded before the three earlier variants were merged into it, on fixed seeds."""
from typing import List

import pytest
import torch
from fairseq.modules import MultiheadAttention

from tests.helpers import batch_of, build
from fairseq_ctx.context.modules.context_attention import ContextAttention
from fairseq_ctx.context.modules.empty_context import attendable, context_or_placeholder

# (arch, extra options, per batch: a position-weighted projection of each row's decoder features)
# batches: sentences 0-7 (mixed), sentence 0 alone (document-initial), sentences 0-3 without context
REFERENCE = [
    ('ctx_concat', [], [[84.504083, 134.477696, 79.286408, 81.772442, 102.916476, 96.369451, 115.72268, 70.27408], [84.504073], [84.504073, 92.242378, 95.716467, 98.419577]]),
    ('dat', [], [[8.580694, 112.450946, 47.18287, 57.376658, 41.330912, 113.000683, 70.363933, 54.956231], [8.580694], [8.580694, 68.785297, 41.184075, 116.045016]]),
    ('han', [], [[72.634365, 109.499918, 67.187588, 40.590332, 68.775582, 12.056673, 45.047816, 32.712201], [72.634365], [72.634365, 14.632392, 21.816908, -25.344346]]),
    ('dct', [], [[98.218024, 168.409348, 83.342489, 67.462044, 31.543625, 77.402806, 75.65372, 67.201263], [98.218024], [98.218024, 85.223964, 31.52586, 45.820442]]),
    ('hce', [], [[100.355812, 159.179503, 96.002163, 91.496499, 145.610455, 35.477566, 157.671054, 114.157814], [100.355812], [100.355812, 74.795335, 148.827865, 26.858976]]),
    ('hmce', [], [[122.942712, 136.317174, 107.951553, 85.698269, 102.195742, 99.088233, 126.584491, 48.892789], [122.942712], [122.942712, 101.233231, 111.364652, 112.161808]]),
    ('hmce', ['--document-vector'], [[-7.135773, 40.532973, -23.589897, -45.285122, 6.33427, -6.381126, -5.879454, -27.286284], [-7.135773], [-7.135773, -45.285122, 6.33427, -6.381126]]),
]


def projection(features: torch.Tensor) -> List[float]:
    x = features.double()
    weights = torch.linspace(-1, 1, x.size(-1), dtype=torch.double)
    positions = torch.arange(1, x.size(1) + 1, dtype=torch.double)
    return ((x @ weights) * positions).sum(1).tolist()


@pytest.mark.parametrize("arch,extra,expected", REFERENCE, ids=[a + "".join(e) for a, e, _ in REFERENCE])
def test_outputs_with_and_without_context_are_unchanged(tiny_data, arch, extra, expected):
    task, model, _ = build(tiny_data, arch, extra)
    task.load_dataset("train")
    model.eval()
    batches = [list(range(8)), [0], list(range(4))]
    for indices, rows in zip(batches, expected):
        net_input = dict(batch_of(task, "train", indices)["net_input"])
        if len(indices) == 4 and not extra:
            for name in ("context_tokens", "context_index", "context_source_row", "document_index"):
                net_input.pop(name, None)
        with torch.no_grad():
            features = model(**net_input, features_only=True)[0]
        torch.testing.assert_close(projection(features), rows, atol=2e-6, rtol=1e-6)


def test_a_row_without_keys_attends_its_placeholder_and_is_marked():
    padding = torch.tensor([[False, True, True], [True, True, True]])
    mask, has_context = attendable(padding)
    assert has_context.tolist() == [True, False]
    assert mask.tolist() == [[False, True, True], [False, False, False]]


def test_context_attention_is_zero_without_context_and_plain_attention_otherwise():
    torch.manual_seed(0)
    ours = ContextAttention(8, 2).eval()
    plain = MultiheadAttention(8, 2, encoder_decoder_attention=True).eval()
    plain.load_state_dict(ours.state_dict())
    query, keys = torch.randn(3, 2, 8), torch.randn(4, 2, 8)
    padding = torch.tensor([[False, False, True, True], [True, True, True, True]])
    out, _ = ours(query, keys, keys, key_padding_mask=padding)
    expected, _ = plain(query[:, :1], keys[:, :1], keys[:, :1], key_padding_mask=padding[:1])
    torch.testing.assert_close(out[:, :1], expected)
    assert torch.equal(out[:, 1], torch.zeros(3, 8))


def test_missing_context_becomes_one_placeholder_sentence_no_slot_points_to():
    src = torch.tensor([[5, 6, 2], [7, 2, 1]])
    tokens, index = context_or_placeholder(src, None, None, eos=2)
    assert tokens.tolist() == [[2]] and index.tolist() == [[-1], [-1]]
    given = torch.tensor([[4, 5, 2]])
    tokens, index = context_or_placeholder(src, given, torch.tensor([[0], [-1]]), eos=2)
    assert tokens is given and index.tolist() == [[0], [-1]]
