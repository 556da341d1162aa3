"""Issue 4: each input's cross-attention (and the hierarchical second level) with its own number
of heads (``--input-attention-heads``, ``--hierarchical-attention-heads``), as in the thesis'
implementation; bad values are errors naming the inputs before training."""
import re

import pytest
import torch

from tests.helpers import build_multimodal
from fairseq_ctx.multisource.modules.multi_input_attention import MultiInputAttention

IMG_AND_FR = ("--feature-inputs", "img", "--extra-source-langs", "fr", "--extra-source-dict", "own")


def test_each_input_has_its_own_head_count_and_incremental_decoding_equals_full_decoding(multimodal_data):
    task, model, _ = build_multimodal(multimodal_data, task_args=IMG_AND_FR, extra=[
        "--combination", "hierarchical", "--input-attention-heads", "4,2,1", "--hierarchical-attention-heads", "8"])
    for layer in model.decoder.layers:
        assert [a.num_heads for a in layer.cross_attention.attentions] == [4, 2, 1]
        assert layer.cross_attention.input_attention.num_heads == 8
    dataset = task.datasets["train"]
    net_input = dataset.collater([dataset[i] for i in range(5)])["net_input"]
    model.train()
    model(**net_input)[0].float().logsumexp(-1).mean().backward()
    assert not [n for n, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    model.eval()
    encoder_out = model.encoder(net_input["src_tokens"], net_input["src_lengths"], net_input["aux_inputs"])
    prev = net_input["prev_output_tokens"]
    full, extra = model.decoder(prev, encoder_out=encoder_out, alignment_layer=0)
    state = {}
    steps = [model.decoder(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)[0]
             for t in range(prev.size(1))]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-4)
    # attention over all inputs' states (heads averaged per input, scaled by β): one distribution per token
    attn = extra["attn"][0]
    assert attn.shape == (5, prev.size(1), sum(encoder_out["input_sizes"]))
    torch.testing.assert_close(attn.sum(-1), torch.ones(5, prev.size(1)))


def test_one_head_count_applies_to_every_input(multimodal_data):
    _, model, _ = build_multimodal(multimodal_data, task_args=IMG_AND_FR,
                                   extra=["--combination", "flat", "--input-attention-heads", "2"])
    assert [a.num_heads for a in model.decoder.layers[0].cross_attention.attentions] == [2]
    _, default, _ = build_multimodal(multimodal_data, task_args=IMG_AND_FR)
    cross = default.decoder.layers[0].cross_attention
    assert [a.num_heads for a in cross.attentions] == [4, 4, 4] and cross.input_attention.num_heads == 4


@pytest.mark.parametrize("extra, message", [
    (["--input-attention-heads", "4,2"], "gives 2 head counts but the model has 3 inputs (source, img, fr)"),
    (["--input-attention-heads", "4,x,2"], "must be comma-separated integers, one per input (source, img, fr)"),
    (["--input-attention-heads", "4,3,2"], "attention head count 3 must be positive and divide --decoder-embed-dim 32"),
    (["--hierarchical-attention-heads", "5"], "attention head count 5 must be positive and divide"),
    (["--combination", "flat", "--input-attention-heads", "4,2,2"], "flat attends all inputs with one attention"),
])
def test_bad_head_counts_are_errors_naming_the_inputs(multimodal_data, extra, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        build_multimodal(multimodal_data, task_args=IMG_AND_FR, extra=extra)


def test_head_weights_of_inputs_with_different_head_counts_are_averaged_per_input():
    torch.manual_seed(0)
    attention = MultiInputAttention(16, 4, 16, num_inputs=2, combination="parallel", dropout=0.0,
                                    attention_dropout=0.0, normalize_before=False, input_heads=[4, 2]).eval()
    query, states = torch.randn(2, 2, 16), torch.randn(8, 2, 16)
    _, weights, _ = attention(query, states, None, need_head_weights=True, input_sizes=[3, 5])
    assert weights.shape == (1, 2, 2, 8)
    image_alone = attention.attentions[1](query, states[3:], states[3:], static_kv=True, need_weights=True)[1]
    share = attention._context_shares([attention.attentions[i](query, s, s, static_kv=True)[0]
                                       for i, s in enumerate((states[:3], states[3:]))])
    torch.testing.assert_close(weights[0, ..., 3:], image_alone * share[..., 1:])
