"""cka_alignment and head_diversity criterions on hce/hmce and fairseq's stock transformer."""
import logging

import pytest
import torch
from fairseq import tasks

from tests.helpers import batch_of, build_multimodal, parse_cfg
from fairseq_ctx.analysis.attention_heads import DropHead, attention_modules
from fairseq_ctx.analysis.cka import _warned


def setup(data, arch, extra):
    cfg = parse_cfg(data, arch, extra)
    torch.manual_seed(1)
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    task.load_dataset("train")
    return task, model, criterion


def assert_every_parameter_has_a_gradient(model):
    missing = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert not missing, missing


def assert_loss_is_ce_minus_lambda_cka(model, criterion, sample, cka_lambda: float = 0.5):
    """The criterion's loss is CE − λ·CKA with 0 < CKA < 1, and every parameter gets a gradient."""
    model.train()
    loss, sample_size, log = criterion(model, sample)
    value = log["cka"] / sample_size
    assert 0.0 < value < 1.0
    assert torch.allclose(loss, log["ce_loss"] - cka_lambda * value * sample_size, rtol=1e-5)
    loss.backward()
    assert_every_parameter_has_a_gradient(model)


CKA_ARGS = ["--criterion", "cka_alignment", "--label-smoothing", "0.1", "--cka-lambda", "0.5", "--cka-samples", "64"]


@pytest.mark.parametrize("arch", ["hce", "hmce"])
def test_cka_alignment_loss_is_ce_minus_lambda_cka(tiny_data, arch):
    task, model, criterion = setup(tiny_data, arch, CKA_ARGS)
    assert_loss_is_ce_minus_lambda_cka(model, criterion, batch_of(task, "train", list(range(12))))


def test_cka_warmup_optimises_cka_only(tiny_data):
    task, model, criterion = setup(tiny_data, "hce", CKA_ARGS + ["--cka-warmup-updates", "1"])
    sample = batch_of(task, "train", list(range(12)))
    model.train()
    first, ss, log = criterion(model, sample)
    assert torch.allclose(first, torch.tensor(-0.5 * log["cka"], dtype=first.dtype), rtol=1e-5)
    first.backward()
    assert_every_parameter_has_a_gradient(model)  # the CE path gets zero gradients, not none (DDP)
    second, _, log2 = criterion(model, sample)
    assert second.item() > 0 and abs(second.item() - (log2["ce_loss"] - 0.5 * log2["cka"]).item()) < 1e-3


def test_unknown_representation_name_lists_available_names(tiny_data):
    task, model, criterion = setup(tiny_data, "hce", CKA_ARGS + ["--cka-representations", "source,image"])
    with pytest.raises(ValueError, match=r"'image'.*available: \['context', 'decoder_out', 'encoder_embedding', "
                                         r"'encoder_out', 'source'\]"):
        criterion(model, batch_of(task, "train", list(range(4))))


def test_too_few_vectors_uses_all_with_one_warning(tiny_data, caplog):
    task, model, criterion = setup(tiny_data, "transformer", ["--context-size", "0", "--criterion", "cka_alignment",
                                   "--cka-representations", "encoder_embedding,encoder_out", "--cka-samples", "100000"])
    sample = batch_of(task, "train", list(range(4)))
    _warned.clear()
    with caplog.at_level(logging.WARNING):
        criterion(model, sample)
        _, ss, log = criterion(model, sample)
    warnings = [r.message for r in caplog.records if "asked for 100000" in r.message]
    tokens = int(sample["net_input"]["src_tokens"].ne(task.source_dictionary.pad()).sum())
    assert len(warnings) == 1 and f"only {tokens} non-padding" in warnings[0]


def test_head_diversity_terms_on_stock_transformer(tiny_data):
    args = ["--context-size", "0", "--criterion", "head_diversity", "--hsic-lambda", "0.01", "--ortho-lambda", "0.5",
            "--diversity-samples", "64"]
    task, model, criterion = setup(tiny_data, "transformer", args)
    sample = batch_of(task, "train", list(range(12)))
    model.train()
    loss, ss, log = criterion(model, sample)
    hsic, ortho = log["hsic"] / ss, log["ortho"] / ss
    assert hsic > 0 and ortho > 0
    assert torch.allclose(loss, log["ce_loss"] + (0.01 * hsic + 0.5 * ortho) * ss, rtol=1e-5)
    # all 2 encoder self-attn + 1 decoder self-attn + 1 encoder-decoder attention were tapped
    assert len(criterion.hooks.hooks.tap.records) == 4
    loss.backward()
    assert_every_parameter_has_a_gradient(model)


def test_drophead_zeroes_whole_heads_at_rate_and_rescales(tiny_data):
    task, model, _ = setup(tiny_data, "hmce", [])
    sample = batch_of(task, "train", list(range(12)))
    model.eval()
    with torch.no_grad():
        before = model(**sample["net_input"])[0]
    drop = DropHead(model, 0.5)
    with torch.no_grad():
        assert torch.allclose(model(**sample["net_input"])[0], before, atol=1e-5)  # eval: identity
    name, module = next(iter(attention_modules(model, ["encoder.layers.0.self_attn"]).items()))
    seen = []
    probe = module.out_proj.register_forward_pre_hook(lambda m, inp: seen.append(inp[0].detach()))
    model.train()
    torch.manual_seed(0)
    model(**sample["net_input"])
    probe.remove()
    drop.remove()
    heads = seen[0].view(seen[0].size(0), seen[0].size(1), module.num_heads, -1)
    zero = heads.abs().sum(dim=(0, 3)).eq(0)
    assert 0.3 < zero.float().mean().item() < 0.7  # per (example, head), rate ≈ 0.5
    assert not module.skip_embed_dim_check  # removal restores fairseq's fast path


def test_cka_alignment_between_text_states_and_projected_image_features(multimodal_data):
    task, model, cfg = build_multimodal(multimodal_data, extra=CKA_ARGS + ["--cka-representations", "source,img"])
    sample = task.dataset("train").collater([task.dataset("train")[i] for i in range(12)])
    assert_loss_is_ce_minus_lambda_cka(model, task.build_criterion(cfg.criterion), sample)


def test_head_diversity_and_drophead_reach_tmde_last_layer(multilingual_data):
    """T-MDE computes its last encoder layer at position 0 only; the criterion's hooks switch that
    off, so the last layer's self-attention is tapped over every position and drophead acts on it,
    while the sentence embedding P is unchanged."""
    from tests.embedding_helpers import build_embedding_model, valid_batch

    task, model, _ = build_embedding_model(multilingual_data, "tmde")
    cfg_args = ["--criterion", "head_diversity", "--hsic-lambda", "0.01", "--ortho-lambda", "0.5",
                "--diversity-samples", "16", "--drophead", "0.5"]
    _, _, criterion = build_embedding_model(multilingual_data, "tmde", cfg_args)
    sample = valid_batch(task)
    net_input = sample["net_input"]
    model.eval()
    with torch.no_grad():
        fast = model.encoder(net_input["src_tokens"], net_input["src_lengths"])["sentence_embedding"][0]
    model.train()
    torch.manual_seed(0)
    loss, ss, log = criterion(model, sample)
    assert not model.encoder.position_zero_last_layer
    records = criterion.hooks.hooks.tap.records
    last = "encoder.layers.2.self_attn"
    assert len(records) == 5 and last in records  # 3 encoder self + decoder self + encoder-decoder
    assert records[last].heads.shape[0] == net_input["src_tokens"].size(1)
    assert log["hsic"] > 0 and log["ortho"] > 0
    loss.backward()
    assert_every_parameter_has_a_gradient(model)
    seen = []
    module = model.encoder.layers[2].self_attn
    probe = module.out_proj.register_forward_pre_hook(lambda m, inp: seen.append(inp[0].detach()))
    model(**net_input)
    probe.remove()
    heads = seen[0].view(seen[0].size(0), seen[0].size(1), module.num_heads, -1)
    assert 0.2 < heads.abs().sum(dim=(0, 3)).eq(0).float().mean().item() < 0.8  # drophead on the last layer
    model.eval()
    with torch.no_grad():
        full = model.encoder(net_input["src_tokens"], net_input["src_lengths"])["sentence_embedding"][0]
    torch.testing.assert_close(full, fast, atol=1e-5, rtol=1e-5)
