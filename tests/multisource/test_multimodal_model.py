"""The multi-input decoder strategies against the plain Transformer,
incremental decoding, gradients, half precision."""
import pytest
import torch
from fairseq.models.transformer import TransformerConfig
from fairseq.modules import LayerNorm, MultiheadAttention
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase
from omegaconf import OmegaConf

from tests.helpers import build_multimodal
from fairseq_ctx.multisource.transformer import transformer_state_to_multisource
from fairseq_ctx.multisource.transformer_layers import MultiSourceDecoderLayer
from fairseq_ctx.multisource.modules.multi_input_attention import COMBINATIONS, MultiInputAttention

IMG_AND_FR = ("--feature-inputs", "img", "--extra-source-langs", "fr", "--extra-source-dict", "own")


def layer_cfg(normalize_before: bool = False):
    cfg = OmegaConf.structured(TransformerConfig)
    cfg.encoder.embed_dim = cfg.decoder.embed_dim = 16
    cfg.decoder.ffn_embed_dim = 32
    cfg.decoder.attention_heads = 4
    cfg.decoder.normalize_before = normalize_before
    return cfg


@pytest.mark.parametrize("normalize_before", [False, True])
@pytest.mark.parametrize("combination", COMBINATIONS)
def test_single_input_layer_equals_plain_transformer_layer(combination, normalize_before):
    torch.manual_seed(0)
    cfg = layer_cfg(normalize_before)
    plain = TransformerDecoderLayerBase(cfg).eval()
    ours = MultiSourceDecoderLayer(cfg, num_inputs=1, combination=combination).eval()
    renamed = transformer_state_to_multisource({f"layer.{k}": v for k, v in plain.state_dict().items()})
    missing = ours.load_state_dict({k[len("layer."):]: v for k, v in renamed.items()})
    assert not missing.missing_keys and not missing.unexpected_keys
    x, enc = torch.randn(5, 2, 16), torch.randn(7, 2, 16)
    mask = torch.zeros(2, 7, dtype=torch.bool)
    mask[1, 5:] = True
    expected, expected_attn, _ = plain(x, enc, mask, need_attn=True, need_head_weights=True)
    got, got_attn, _ = ours(x, enc, mask, need_attn=True, need_head_weights=True)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(got_attn, expected_attn)


def test_flat_over_one_input_equals_single_attention_and_over_two_equals_joint_softmax():
    torch.manual_seed(0)
    flat = MultiInputAttention(16, 4, 16, num_inputs=2, combination="flat", dropout=0.0, attention_dropout=0.0,
                               normalize_before=False).eval()
    single = MultiheadAttention(16, 4, kdim=16, vdim=16, encoder_decoder_attention=True).eval()
    norm = LayerNorm(16).eval()
    single.load_state_dict(flat.attentions[0].state_dict())
    norm.load_state_dict(flat.layer_norms[0].state_dict())
    q, a, b = torch.randn(3, 2, 16), torch.randn(4, 2, 16), torch.randn(6, 2, 16)
    got, _, _ = flat(q, a, None, input_sizes=[4])
    torch.testing.assert_close(got, norm(q + single(q, a, a, static_kv=True)[0]))
    both = torch.cat([a, b])
    got, _, _ = flat(q, both, torch.zeros(2, 10, dtype=torch.bool), input_sizes=[4, 6])
    torch.testing.assert_close(got, norm(q + single(q, both, both, static_kv=True)[0]))


@pytest.mark.parametrize("combination", ["serial", "parallel", "hierarchical"])
def test_input_weights_are_distributions_and_hierarchical_uses_beta(combination):
    torch.manual_seed(0)
    attention = MultiInputAttention(16, 4, 16, num_inputs=3, combination=combination, dropout=0.0,
                                    attention_dropout=0.0, normalize_before=False).eval()
    mask = torch.zeros(2, 11, dtype=torch.bool)
    mask[0, 9:] = True
    _, weights, beta = attention(torch.randn(3, 2, 16), torch.randn(11, 2, 16), mask, need_head_weights=True,
                                 input_sizes=[4, 2, 5], need_input_weights=True)
    assert beta.shape == (2, 3, 3)
    torch.testing.assert_close(beta.sum(-1), torch.ones(2, 3))
    assert (beta > 0).all()
    # concatenated per-input head weights scaled by the input weights: one distribution per query
    torch.testing.assert_close(weights.sum(-1), torch.ones(4, 2, 3))
    assert weights[:, 0, :, 9:].abs().max() == 0


def test_text_only_model_equals_plain_transformer(multimodal_data):
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from tests.helpers import TINY_MODEL, USER_DIR

    task, ours, _ = build_multimodal(multimodal_data, task_args=())
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, input_args=[
        str(multimodal_data), "--user-dir", USER_DIR, "--task", "translation", "--arch", "transformer",
        "-s", "en", "-t", "de", "--cpu", *TINY_MODEL])
    cfg = convert_namespace_to_omegaconf(args)
    plain = tasks.setup_task(cfg.task).build_model(cfg.model)
    result = ours.load_state_dict(transformer_state_to_multisource(plain.state_dict()))
    assert not result.missing_keys and not result.unexpected_keys
    ours.eval(), plain.eval()
    dataset = task.datasets["train"]
    batch = dataset.collater([dataset[i] for i in range(6)])
    expected = plain(batch["net_input"]["src_tokens"], batch["net_input"]["src_lengths"],
                     batch["net_input"]["prev_output_tokens"])[0]
    torch.testing.assert_close(ours(**batch["net_input"])[0], expected)


@pytest.mark.parametrize("combination", COMBINATIONS)
def test_incremental_decoding_equals_full_decoding_and_all_parameters_get_gradients(multimodal_data, combination):
    task, model, _ = build_multimodal(multimodal_data, extra=["--combination", combination], task_args=IMG_AND_FR)
    dataset = task.datasets["train"]
    batch = dataset.collater([dataset[i] for i in range(5)])
    net_input = batch["net_input"]
    model.train()
    logits = model(**net_input)[0]
    logits.float().logsumexp(-1).mean().backward()
    no_grad = [n for n, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert not no_grad
    model.eval()
    encoder_out = model.encoder(net_input["src_tokens"], net_input["src_lengths"], net_input["aux_inputs"])
    assert encoder_out["input_sizes"][1] == 3
    prev = net_input["prev_output_tokens"]
    full = model.decoder(prev, encoder_out=encoder_out)[0]
    state = {}
    order = torch.tensor([4, 3, 2, 1, 0])
    encoder_out = model.encoder.reorder_encoder_out(encoder_out, order)
    steps = [model.decoder(prev[order, : t + 1], encoder_out=encoder_out, incremental_state=state)[0]
             for t in range(prev.size(1))]
    torch.testing.assert_close(torch.cat(steps, 1), full[order], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_forward_backward_is_finite(multimodal_data, dtype):
    task, model, _ = build_multimodal(multimodal_data, task_args=IMG_AND_FR)
    dataset = task.datasets["train"]
    batch = dataset.collater([dataset[i] for i in range(4)])
    model = model.to(dtype)
    aux = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in batch["net_input"]["aux_inputs"].items()}
    logits = model(batch["net_input"]["src_tokens"], batch["net_input"]["src_lengths"],
                   batch["net_input"]["prev_output_tokens"], aux_inputs=aux)[0]
    assert logits.dtype == dtype and torch.isfinite(logits).all()
    logits.float().logsumexp(-1).mean().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize("combination", COMBINATIONS)
def test_input_layout_travels_in_the_call_and_input_weights_come_back_in_extra(multimodal_data, combination):
    from fairseq_ctx.multisource.attention_plot import input_attention

    task, model, _ = build_multimodal(multimodal_data, extra=["--combination", combination, "--decoder-layers", "2"],
                                      task_args=IMG_AND_FR)
    model.eval()
    dataset = task.datasets["train"]
    batch = dataset.collater([dataset[i] for i in range(4)])
    with torch.no_grad():
        _, last = model(**batch["net_input"])
        _, first = model(**batch["net_input"], alignment_layer=0)
    weights = last["input_weights"][0]
    assert weights.shape == (4, batch["net_input"]["prev_output_tokens"].size(1), 3)
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:2]))
    assert not torch.equal(first["input_weights"][0], weights)
    torch.testing.assert_close(input_attention(model, batch, -1), weights)
    for layer in model.decoder.layers:  # nothing about the batch is left on the modules
        assert not {"input_sizes", "padded_inputs", "beam_size"} & set(vars(layer.cross_attention))
