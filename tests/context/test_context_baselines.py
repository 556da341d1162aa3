"""The context baselines ctx_concat (TwC), dat, han, dct, caching_tokens, caching_sentence: gradients,
half precision, context padding invariance, document-initial sentences, and stock
fairseq-train/-generate."""
import pytest
import torch

from tests.helpers import BASELINE_ARCHS, batch_of, build


# Archs whose encoder output is the sentence-level one and whose decoder attends the context
# (encoder_out["context_out"]): the context tests compare their model outputs.
DECODER_SIDE_ARCHS = tuple(arch for arch in BASELINE_ARCHS if arch.startswith(("caching_", "shortening_")))


def encoder_out(model, net_input):
    out = model.encoder(net_input["src_tokens"], net_input["src_lengths"],
                        context_tokens=net_input.get("context_tokens"), context_index=net_input.get("context_index"))
    return out["encoder_out"][0], out["encoder_padding_mask"][0]


@pytest.fixture(scope="module", params=BASELINE_ARCHS)
def arch_model(request, tiny_data):
    task, model, cfg = build(tiny_data, request.param)
    task.load_dataset("train")
    return request.param, task, model, cfg


def test_every_parameter_gets_a_finite_gradient(arch_model):
    arch, task, model, cfg = arch_model
    criterion = task.build_criterion(cfg.criterion)
    model.train()
    for indices in (list(range(12)), [0]):  # mixed batch; a batch of one document-initial sentence
        model.zero_grad()
        sample = batch_of(task, "train", indices)
        if indices == [0]:
            assert sample["net_input"]["context_index"].lt(0).all()
        loss, _, _ = criterion(model, sample)
        loss.backward()
        missing = [name for name, p in model.named_parameters() if p.grad is None]
        assert missing == [], f"{arch}: no gradient for {missing} on batch {indices}"
        assert all(torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_forward_backward_is_finite(tiny_data, arch_model, dtype):
    arch, _, _, _ = arch_model
    task, model, _ = build(tiny_data, arch)
    task.load_dataset("train")
    net_input = batch_of(task, "train", list(range(12)))["net_input"]
    model.eval()
    reference = encoder_out(model, net_input)[0]
    model.to(dtype).train()
    out = encoder_out(model, net_input)[0]
    assert out.dtype == dtype and torch.isfinite(out).all()
    logits = model(**net_input)[0]
    logits.float().logsumexp(-1).mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    model.eval()
    torch.testing.assert_close(encoder_out(model, net_input)[0].float(), reference, atol=0.1, rtol=0.05)


def test_padding_the_context_does_not_change_encoder_output(arch_model):
    arch, task, model, _ = arch_model
    model.eval()
    net_input = batch_of(task, "train", list(range(10)))["net_input"]
    reference, reference_padding = encoder_out(model, net_input)
    tokens, index = net_input["context_tokens"], net_input["context_index"]
    padded = {**net_input,
              "context_tokens": torch.cat([tokens, tokens.new_full((tokens.size(0), 5), task.src_dict.pad())], dim=1),
              "context_index": torch.cat([index, index.new_full((10, 3), -1)], dim=1)}
    out, padding = encoder_out(model, padded)
    assert torch.equal(padding, reference_padding)
    torch.testing.assert_close(out, reference, atol=1e-5, rtol=0)
    if arch in DECODER_SIDE_ARCHS:
        with torch.no_grad():
            torch.testing.assert_close(model(**padded)[0], model(**net_input)[0], atol=1e-5, rtol=0)


def test_context_changes_the_encoding_of_sentences_that_have_context(arch_model):
    arch, task, model, _ = arch_model
    model.eval()
    net_input = batch_of(task, "train", list(range(10)))["net_input"]
    bare_input = {k: v for k, v in net_input.items() if not k.startswith("context")}
    has_context = net_input["context_index"].ge(0).any(dim=1)
    assert has_context.any() and not has_context.all()
    if arch in DECODER_SIDE_ARCHS:  # the encoder hands the context to the decoder: compare the outputs
        with torch.no_grad():
            difference = (model(**net_input)[0] - model(**bare_input)[0]).abs().amax(dim=(1, 2))
        assert (difference[has_context] > 1e-4).all() and (difference[~has_context] == 0).all()
        return
    with_context = encoder_out(model, net_input)[0]
    without = encoder_out(model, bare_input)[0]
    source_length = net_input["src_tokens"].size(1)
    if arch == "ctx_concat":  # the source comes first in the concatenation
        source_positions = net_input["src_tokens"].ne(task.src_dict.pad()).sum(1)
        for row in range(10):
            n = int(source_positions[row])
            diff = (with_context[:n, row] - without[:n, row]).abs().max()
            assert (diff > 1e-4) if has_context[row] else (diff < 1e-5), (row, diff)
        return
    difference = (with_context[:source_length] - without).abs().amax(dim=(0, 2))
    assert (difference[has_context] > 1e-4).all()
    if arch in ("dat", "han"):  # gated fusion is skipped for document-initial sentences
        assert (difference[~has_context] == 0).all()


def test_document_initial_sentences_equal_sentence_level_encoding_in_ctx_concat(tiny_data):
    task, model, _ = build(tiny_data, "ctx_concat")
    task.load_dataset("train")
    model.eval()
    net_input = batch_of(task, "train", [0])["net_input"]
    out, padding = encoder_out(model, net_input)
    bare, bare_padding = encoder_out(model, {k: v for k, v in net_input.items() if not k.startswith("context")})
    assert torch.equal(out, bare) and out.size(0) == net_input["src_tokens"].size(1)


@pytest.mark.parametrize("arch", BASELINE_ARCHS)
def test_stock_fairseq_train_and_generate(trained_baselines, arch):
    _, generated = trained_baselines[arch]
    hypotheses = [line for line in generated.splitlines() if line.startswith("H-")]
    assert len(hypotheses) == len({line.split("\t")[0] for line in generated.splitlines() if line.startswith("S-")}) > 30
    assert "BLEU4" in generated.splitlines()[-1]
