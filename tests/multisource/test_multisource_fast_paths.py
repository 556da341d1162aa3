"""Issue 4 (speed): the exact fast paths of the multi-source decoder equal the paths they replace —
factored attention over many regions, beamable keys/values in beam search, no mask for inputs
that are never padded."""
import pytest
import torch
from fairseq.modules import MultiheadAttention
from fairseq.sequence_generator import SequenceGenerator

from tests.helpers import build_multimodal
from fairseq_ctx.multisource.transformer_layers import MultiSourceEncoder
from fairseq_ctx.multisource.modules import multi_input_attention
from fairseq_ctx.multisource.modules.factored_attention import factored_attention, factored_attention_is_cheaper
from fairseq_ctx.multisource.modules.multi_input_attention import COMBINATIONS, MultiInputAttention


def test_factored_attention_equals_multihead_attention_with_dropout_mask_and_gradients():
    torch.manual_seed(0)
    attention = MultiheadAttention(16, 4, kdim=12, vdim=12, dropout=0.2, encoder_decoder_attention=True).double()
    query = torch.randn(3, 2, 16, dtype=torch.double, requires_grad=True)
    states = torch.randn(30, 2, 12, dtype=torch.double, requires_grad=True)
    mask = torch.zeros(2, 30, dtype=torch.bool)
    mask[1, 25:] = True
    results = []
    for path in ("fairseq", "factored"):
        torch.manual_seed(1)
        if path == "fairseq":
            out, weights = attention(query, states, states, key_padding_mask=mask, static_kv=True,
                                     need_weights=True, need_head_weights=True)
        else:
            out, weights = factored_attention(attention, query, states, mask, need_head_weights=True)
        grads = torch.autograd.grad(out.square().sum(), [query, states, *attention.parameters()])
        results.append((out, weights, grads))
    (out, weights, grads), (f_out, f_weights, f_grads) = results
    with torch.no_grad():
        assert not torch.allclose(attention.eval()(query, states, states, mask, static_kv=True)[0], out)  # dropout on
    torch.testing.assert_close(f_out, out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(f_weights, weights, atol=1e-5, rtol=1e-5)
    for got, expected in zip(f_grads, grads):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert f_weights[:, 1, :, 25:].abs().max() == 0


def test_factored_attention_is_chosen_for_image_regions_not_for_a_sentence():
    thesis = MultiheadAttention(512, 16, encoder_decoder_attention=True)
    small = MultiheadAttention(256, 4, encoder_decoder_attention=True)
    assert factored_attention_is_cheaper(20, 196, small) and factored_attention_is_cheaper(20, 196, thesis)
    assert not factored_attention_is_cheaper(20, 20, small) and not factored_attention_is_cheaper(20, 20, thesis)
    assert factored_attention_is_cheaper(1, 2, small)  # hierarchical attention over 2 context vectors


@pytest.mark.parametrize("combination", COMBINATIONS)
def test_multi_input_attention_fast_paths_equal_plain_fairseq_attention(monkeypatch, combination):
    torch.manual_seed(0)
    attention = MultiInputAttention(16, 2, 16, num_inputs=2, combination=combination, dropout=0.1,
                                    attention_dropout=0.1, normalize_before=False).double().train()
    query = torch.randn(3, 2, 16, dtype=torch.double)
    states = torch.randn(44, 2, 16, dtype=torch.double)
    mask = torch.zeros(2, 44, dtype=torch.bool)
    mask[1, 3] = True

    sizes = [4, 40]  # a 4-token sentence (padded in row 1) and 40 regions

    def run(padded_inputs):
        attention.zero_grad()
        torch.manual_seed(1)
        out = attention(query, states, mask, need_head_weights=True, input_sizes=sizes, padded_inputs=padded_inputs)[0]
        out.square().sum().backward()
        with torch.no_grad():  # weights without dropout (torch's own attention returns β after dropout)
            weights = attention.eval()(query, states, mask, need_head_weights=True, input_sizes=sizes,
                                       padded_inputs=padded_inputs)[1]
        attention.train()
        return out, weights, {n: p.grad.clone() for n, p in attention.named_parameters()}

    fast = run([True, False])
    monkeypatch.setattr(multi_input_attention, "factored_attention_is_cheaper", lambda *args: False)
    plain = run([])
    torch.testing.assert_close(fast[0], plain[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast[1], plain[1], atol=1e-5, rtol=1e-5)
    assert fast[2].keys() == plain[2].keys() == dict(attention.named_parameters()).keys()
    for name in plain[2]:
        torch.testing.assert_close(fast[2][name], plain[2][name], atol=1e-5, rtol=1e-5)


def test_beam_copies_share_keys_values_and_beam_search_is_unchanged(multimodal_data, monkeypatch):
    task, model, _ = build_multimodal(multimodal_data, extra=["--combination", "hierarchical"])
    model.eval()
    dataset = task.datasets["train"]
    batch = dataset.collater([dataset[i] for i in range(6)])
    net_input = {k: v for k, v in batch["net_input"].items() if k != "prev_output_tokens"}
    with torch.no_grad():
        encoder_out = model.encoder(**net_input)
        assert encoder_out["padded_inputs"] == [True, False]
        expanded = model.encoder.reorder_encoder_out(encoder_out, torch.arange(6).repeat_interleave(3))
        assert expanded["beam_size"] == [3]
        within_sentences = torch.arange(18).flip(0).view(6, 3).flip(0).flatten()
        kept = model.encoder.reorder_encoder_out(expanded, within_sentences)
        assert kept["beam_size"] == [3]
        for key in ("encoder_out", "encoder_padding_mask"):
            assert torch.equal(kept[key][0], expanded[key][0].index_select(0 if "mask" in key else 1, within_sentences))
        assert model.encoder.reorder_encoder_out(encoder_out, torch.arange(6).flip(0))["beam_size"] == [1]
        state = {}
        model.decoder(torch.full((18, 1), task.target_dictionary.eos()), encoder_out=expanded, incremental_state=state)
        image_attention = model.decoder.layers[0].cross_attention.attentions[1]
        assert image_attention._get_input_buffer(state)["prev_key"].size(0) == 6  # once per sentence

        generator = SequenceGenerator([model], task.target_dictionary, beam_size=3, max_len_b=8)
        fast = generator.generate([model], {"net_input": net_input})
        reorder = MultiSourceEncoder.reorder_encoder_out

        def without_beam(self, encoder_out, new_order):
            return dict(reorder(self, encoder_out, new_order), beam_size=[1])

        monkeypatch.setattr(MultiSourceEncoder, "reorder_encoder_out", without_beam)
        plain = generator.generate([model], {"net_input": net_input})
    for fast_hypos, plain_hypos in zip(fast, plain):
        for got, expected in zip(fast_hypos, plain_hypos):
            assert torch.equal(got["tokens"], expected["tokens"])
            torch.testing.assert_close(got["positional_scores"], expected["positional_scores"], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_factored_attention_in_half_precision_is_finite_and_close(dtype):
    torch.manual_seed(0)
    attention = MultiheadAttention(16, 4, encoder_decoder_attention=True).eval()
    query, states = torch.randn(3, 2, 16), torch.randn(30, 2, 16)
    mask = torch.zeros(2, 30, dtype=torch.bool)
    mask[0, 20:] = True
    expected = factored_attention(attention, query, states, mask)[0]
    half = attention.to(dtype)
    got = factored_attention(half, query.to(dtype), states.to(dtype).requires_grad_(), mask)[0]
    assert got.dtype == dtype
    torch.testing.assert_close(got.float(), expected, atol=0.05, rtol=0.05)
    got.float().square().sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in half.parameters())
