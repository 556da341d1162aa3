"""T-MDE family and LASER: embedding invariances, the bottleneck, gradients, half precision."""
import pytest
import torch
from fairseq.data import data_utils

from tests.embedding_helpers import ARCHS, build_embedding_model, one_torch_thread, valid_batch  # noqa: F401


def _embed_one_by_one(model, tokens):
    return torch.cat([model.embed(t.unsqueeze(0), torch.LongTensor([t.numel()])) for t in tokens])


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_embedding_does_not_depend_on_padding_or_batch_composition(multilingual_data, arch):
    task, model, _ = build_embedding_model(multilingual_data, arch)
    model.eval()
    task.load_dataset("valid")
    dataset = task.datasets["valid"]
    tokens = [dataset[i]["source"] for i in range(12)]
    assert all(t[0] == task.str_tag_index for t in tokens)
    pad = task.source_dictionary.pad()
    with torch.no_grad():
        alone = _embed_one_by_one(model, tokens)
        batched = model.embed(data_utils.collate_tokens(tokens, pad, left_pad=False),
                              torch.LongTensor([t.numel() for t in tokens]))
        mixed = tokens[:4] + [dataset[i]["source"] for i in range(40, 50)]
        extra_pad = torch.nn.functional.pad(data_utils.collate_tokens(mixed, pad, left_pad=False), (0, 7), value=pad)
        in_other_batch = model.embed(extra_pad, torch.LongTensor([t.numel() for t in mixed]))[:4]
    assert alone.shape == (12, batched.shape[1])
    assert torch.allclose(alone, batched, atol=1e-5)
    assert torch.allclose(alone[:4], in_other_batch, atol=1e-5)
    assert (alone[0] - alone[1]).abs().max() > 1e-3, "different sentences must get different embeddings"


def _decoder_output_with_perturbed_positions(model, sample):
    """Decoder output and embedding when every encoder output except position 0 gets noise."""

    def perturb(_, __, output):
        output = output.clone()
        output[1:] += 10.0 * torch.randn_like(output[1:])
        return output

    handle = model.encoder.layers[-1].register_forward_hook(perturb)
    try:
        return model(**sample["net_input"])
    finally:
        handle.remove()


@pytest.mark.parametrize("arch,sees_only_embedding", [("tmde", True), ("tmde_p", True), ("tmde_f", False)])
def test_tmde_decoder_sees_only_the_embedding(multilingual_data, arch, sees_only_embedding, monkeypatch):
    task, model, _ = build_embedding_model(multilingual_data, arch)
    model.eval()
    sample = valid_batch(task)
    with torch.no_grad():
        logits, extra = model(**sample["net_input"])
        torch.manual_seed(0)
        # the full last layer (not only position 0) runs, so the hook has positions to perturb
        monkeypatch.setattr(type(model.encoder), "_pyramid_reads_last_layer", lambda self: True)
        perturbed_logits, perturbed_extra = _decoder_output_with_perturbed_positions(model, sample)
    encoder_out = model.encoder(sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"])
    if sees_only_embedding:
        assert encoder_out["encoder_out"][0].shape[0] == 1, "the decoder's memory is the embedding alone"
        if arch == "tmde":
            assert torch.allclose(logits, perturbed_logits, atol=1e-5)
            assert torch.allclose(extra["sentence_embedding"], perturbed_extra["sentence_embedding"], atol=1e-5)
    else:
        assert encoder_out["encoder_out"][0].shape[0] == sample["net_input"]["src_tokens"].shape[1]
        assert (logits - perturbed_logits).abs().max() > 1e-2, "tmde_f attends to every encoder position"


@pytest.mark.parametrize("arch", sorted(ARCHS))
@pytest.mark.parametrize("variant", ["mde", "cnv"])
def test_every_parameter_receives_a_gradient(multilingual_data, arch, variant):
    task, model, criterion = build_embedding_model(multilingual_data, arch, ["--distance-variant", variant])
    loss, sample_size, log = criterion(model, valid_batch(task))
    loss.backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None]
    assert not missing, f"parameters without gradient: {missing}"
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())
    assert float(log["d_p"]) > 0 and float(log["v_norm"]) > 0
    assert sample_size == log["ntokens"]


@pytest.mark.parametrize("arch", sorted(ARCHS))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_forward_backward_is_finite(multilingual_data, arch, dtype):
    task, model, criterion = build_embedding_model(multilingual_data, arch)
    model = model.to(dtype)
    loss, _, log = criterion(model, valid_batch(task, max_tokens=120))
    loss.backward()
    assert torch.isfinite(loss)
    assert all(torch.isfinite(p.grad.float()).all() for p in model.parameters() if p.grad is not None)
    assert model.embed(**valid_batch(task)["target_input"]).dtype == dtype


def _loss_and_grads(model, criterion, sample):
    model.zero_grad()
    torch.manual_seed(0)  # same negatives
    loss, _, log = criterion(model, sample)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("arch", ["tmde", "tmde_p", "tmde_f"])
def test_last_layer_at_position_zero_only_is_exact(multilingual_data, arch, monkeypatch):
    """The encoder computes its last layer for P = H^L[0] only where nothing else reads H^L
    (both passes of tmde/tmde_p, the target pass of tmde_f): outputs, embeddings, loss and every
    gradient equal fairseq's full encoder loop."""
    task, model, criterion = build_embedding_model(multilingual_data, arch)
    sample = valid_batch(task)
    net_input, target_input = sample["net_input"], sample["target_input"]
    logits, extra = model(**net_input)
    embedded = model.embed(**target_input)
    loss, grads = _loss_and_grads(model, criterion, sample)
    if arch == "tmde":
        full = model.encoder.forward_scriptable(target_input["src_tokens"], target_input["src_lengths"])
        assert torch.allclose(embedded, full["encoder_out"][0][0], atol=1e-5)
    monkeypatch.setattr(type(model.encoder), "_pyramid_reads_last_layer", lambda self: True)  # full last layer
    plain_logits, plain_extra = model(**net_input)
    plain_loss, plain_grads = _loss_and_grads(model, criterion, sample)
    assert torch.allclose(logits, plain_logits, atol=1e-5)
    assert torch.allclose(extra["sentence_embedding"], plain_extra["sentence_embedding"], atol=1e-5)
    assert torch.allclose(embedded, model.embed(**target_input), atol=1e-5)
    assert torch.allclose(loss, plain_loss, rtol=1e-5)
    assert all(torch.allclose(grads[n], plain_grads[n], atol=1e-5) for n in grads)


def test_ct_mde_has_the_thesis_parameter_count(tmp_path):
    """Table 4.1: T-MDE with a 50K vocabulary has 246M parameters — 6+1 layers of 1024/4096 (92.4M)
    plus three separate 50K×1024 tables (encoder input, decoder input, output), as in fairseq's
    transformer_vaswani_wmt_en_de_big. Built on the meta device: nothing is allocated."""
    (tmp_path / "dict.txt").write_text("".join(f"tok{i} 1\n" for i in range(50000 - 4)))
    with torch.device("meta"):
        _, model, _ = build_embedding_model(tmp_path, "ct_mde", size=[])
    tables = {id(t.weight) for t in (model.encoder.embed_tokens, model.decoder.embed_tokens)}
    tables.add(id(model.decoder.output_projection.weight))
    assert len(tables) == 3
    assert round(sum(p.numel() for p in model.parameters()) / 1e6, 1) == 246.0  # + tag and language symbols
