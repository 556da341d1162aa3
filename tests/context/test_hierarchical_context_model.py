"""HCE/HMCE behaviour: padding invariance, context use, gradients, half precision, beam search."""
import pytest
import torch

from tests.helpers import batch_of, build
from fairseq_ctx.analysis.model_hooks import ModelHooks
from fairseq_ctx.context.data.context_batch import ContextInputs
from fairseq_ctx.context.modules.hierarchical_context_encoder import read_rows
from fairseq_ctx.core.length_chunks import length_chunks

ARCH_VARIANTS = [
    ("hce", []),
    ("hmce", []),
    ("hmce", ["--separate-context-encoder", "--context-encoder-layers", "1"]),
    ("hmce", ["--context-encoder-layers", "1"]),
]


def encoder_out(model, net_input):
    return model.encoder(
        net_input["src_tokens"], net_input["src_lengths"],
        context_tokens=net_input.get("context_tokens"), context_index=net_input.get("context_index"),
    )["encoder_out"][0]


@pytest.fixture(scope="module")
def hmce(tiny_data):
    task, model, cfg = build(tiny_data, "hmce")
    task.load_dataset("train")
    task.load_dataset("test")
    model.eval()
    return task, model


@pytest.mark.parametrize("arch,extra", ARCH_VARIANTS)
def test_padding_the_context_does_not_change_encoder_output(tiny_data, arch, extra):
    task, model, _ = build(tiny_data, arch, extra)
    task.load_dataset("train")
    model.eval()
    net_input = batch_of(task, "train", list(range(10)))["net_input"]
    reference = encoder_out(model, net_input)
    padded = dict(net_input)
    pad = task.src_dict.pad()
    padded["context_tokens"] = torch.cat(
        [net_input["context_tokens"], net_input["context_tokens"].new_full((net_input["context_tokens"].size(0), 5), pad)], dim=1
    )
    padded["context_index"] = torch.cat(
        [net_input["context_index"], net_input["context_index"].new_full((10, 3), -1)], dim=1
    )
    torch.testing.assert_close(encoder_out(model, padded), reference, atol=1e-5, rtol=0)


def test_context_changes_output_only_for_sentences_that_have_context(hmce):
    task, model = hmce
    net_input = batch_of(task, "train", list(range(10)))["net_input"]
    with_context = encoder_out(model, net_input)
    without = encoder_out(model, {k: v for k, v in net_input.items() if not k.startswith("context")})
    has_context = net_input["context_index"].ge(0).any(dim=1)
    assert not has_context.all() and has_context.any()
    difference = (with_context - without).abs().amax(dim=(0, 2))
    assert (difference[~has_context] == 0).all(), "document-initial sentences must equal sentence-level encoding"
    assert (difference[has_context] > 1e-4).all()


@pytest.mark.parametrize("arch,extra", ARCH_VARIANTS)
def test_every_parameter_gets_a_gradient(tiny_data, arch, extra):
    task, model, cfg = build(tiny_data, arch, extra)
    task.load_dataset("train")
    criterion = task.build_criterion(cfg.criterion)
    model.train()
    for indices in (list(range(12)), [0]):  # mixed batch; a batch of one document-initial sentence
        model.zero_grad()
        sample = batch_of(task, "train", indices)
        loss, _, _ = criterion(model, sample)
        loss.backward()
        missing = [name for name, p in model.named_parameters() if p.grad is None]
        assert missing == [], f"{arch} {extra}: no gradient for {missing} on batch {indices}"
        assert all(torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("arch", ["hce", "hmce"])
def test_half_precision_forward_backward_is_finite_and_close(tiny_data, arch, dtype):
    task, model, cfg = build(tiny_data, arch)
    task.load_dataset("train")
    model.eval()
    net_input = batch_of(task, "train", list(range(12)))["net_input"]
    reference = encoder_out(model, net_input).float()
    model.to(dtype)
    out = encoder_out(model, net_input)
    assert out.dtype == dtype and torch.isfinite(out).all()
    torch.testing.assert_close(out.float(), reference, atol=0.1, rtol=0.05)
    model.train()
    logits = model(**net_input)[0]
    logits.float().logsumexp(-1).mean().backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


def test_beam_search_batch_equals_one_sentence_at_a_time(hmce):
    task, model = hmce
    from argparse import Namespace

    generator = task.build_generator([model], Namespace(beam=4, max_len_b=20, nbest=1))
    indices = list(range(len(task.datasets["test"])))[:16]
    batched = task.inference_step(generator, [model], batch_of(task, "test", indices))
    by_id = {}
    sample = batch_of(task, "test", indices)
    for row, example_id in enumerate(sample["id"].tolist()):
        by_id[example_id] = batched[row][0]["tokens"].tolist()
    for example_id in indices:
        single = task.inference_step(generator, [model], batch_of(task, "test", [example_id]))
        assert single[0][0]["tokens"].tolist() == by_id[example_id]


def test_sentence_level_arch_with_context_is_a_clear_error(tiny_data):
    with pytest.raises(ValueError, match="--context-size 0"):
        build(tiny_data, "transformer")


@pytest.mark.parametrize("arch,extra", ARCH_VARIANTS)
def test_context_cache_and_reuse_give_the_separately_encoded_result(tiny_data, arch, extra):
    task, model, _ = build(tiny_data, arch, extra)
    task.load_dataset("train")
    model.eval()
    batches = [batch_of(task, "train", list(range(start, start + 9)))["net_input"] for start in (0, 7)]
    with torch.no_grad():
        model.encoder.set_context_cache(False)
        reference = [encoder_out(model, b) for b in batches]
        model.encoder.set_context_cache(True)
        cached = [encoder_out(model, b) for b in batches]  # the second batch reads sentences 5, 6 from the cache
        assert len(model.encoder.context_cache) > 0
    for got, expected in zip(cached, reference):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_reuse_gives_the_separately_encoded_loss_and_gradients(tiny_data):
    # in training, context sentences that are sources of the batch are pooled from the source pass,
    # and the others are encoded in that pass as more rows; --no-context-cache encodes every slot apart
    task, model, cfg = build(tiny_data, "hmce", ["--dropout", "0", "--attention-dropout", "0"])
    task.load_dataset("train")
    criterion = task.build_criterion(cfg.criterion)
    sample = batch_of(task, "train", list(range(5, 17)))
    net_input = sample["net_input"]
    assert net_input["context_source_row"].ge(0).any()
    model.train()
    rows, counts = model.encoder.plan_context_rows(net_input["src_tokens"], ContextInputs.of(net_input))
    read = read_rows(net_input["context_tokens"], net_input["context_index"])
    new = read & net_input["context_source_row"].lt(0)
    fits = net_input["context_tokens"][:, 1:].ne(task.src_dict.pad()).sum(1).le(net_input["src_tokens"].size(1))
    assert rows.numel() and torch.equal(rows, (new & fits).nonzero().squeeze(1))
    assert counts.read == int(read.sum())
    assert torch.equal(counts.apart_rows, (new & ~fits).nonzero().squeeze(1))
    losses, grads = [], []
    for enabled in (False, True):
        model.encoder.set_context_cache(enabled)
        model.zero_grad()
        loss = criterion(model, sample)[0]
        loss.backward()
        losses.append(loss.detach())
        grads.append({name: p.grad.clone() for name, p in model.named_parameters()})
    torch.testing.assert_close(losses[1], losses[0], atol=1e-4, rtol=1e-5)
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], atol=1e-4, rtol=1e-4, msg=name)


def test_context_rows_longer_than_every_source_are_encoded_apart_with_the_reference_gradients(tiny_data):
    # a batch of the shortest sources reads context sentences longer than all of them: those rows are
    # encoded on their own (plan_context_rows counts them on the host), the others with the sources
    task, model, cfg = build(tiny_data, "hmce", ["--dropout", "0", "--attention-dropout", "0"])
    task.load_dataset("train")
    criterion = task.build_criterion(cfg.criterion)
    dataset = task.datasets["train"]
    shortest = sorted(range(len(dataset)), key=lambda i: (dataset.src_sizes[i], i))[:8]
    sample = batch_of(task, "train", shortest)
    net_input = sample["net_input"]
    model.train()
    rows, counts = model.encoder.plan_context_rows(net_input["src_tokens"], ContextInputs.of(net_input))
    assert counts.apart_rows.numel() > 0
    lengths = net_input["context_tokens"][counts.apart_rows, 1:].ne(task.src_dict.pad()).sum(1)
    assert lengths.gt(net_input["src_tokens"].size(1)).all() and counts.apart_width == int(lengths.max())
    losses, grads = [], []
    for enabled in (False, True):
        model.encoder.set_context_cache(enabled)
        model.zero_grad()
        loss = criterion(model, sample)[0]
        loss.backward()
        losses.append(loss.detach())
        grads.append({name: p.grad.clone() for name, p in model.named_parameters()})
    torch.testing.assert_close(losses[1], losses[0], atol=1e-4, rtol=1e-5)
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], atol=1e-4, rtol=1e-4, msg=name)


def test_cache_is_emptied_when_training_resumes(hmce):
    task, model = hmce
    net_input = batch_of(task, "train", [3, 4])["net_input"]
    with torch.no_grad():
        encoder_out(model, net_input)
    assert len(model.encoder.context_cache) > 0
    model.train()
    assert len(model.encoder.context_cache) == 0
    model.eval()


def test_document_vector_summarises_previous_sentences_of_the_document(tiny_data):
    task, model, cfg = build(tiny_data, "hmce", ["--document-vector", "--document-vector-span", "3"])
    task.load_dataset("train")
    dataset = task.datasets["train"]
    assert dataset.document_span == 3
    sample = batch_of(task, "train", list(range(8)))
    document_index = sample["net_input"]["document_index"]
    tokens, pad = sample["net_input"]["context_tokens"], task.src_dict.pad()
    for row, example_id in enumerate(sample["id"].tolist()):
        expected = [example_id - k for k in range(1, min(int(dataset.positions[example_id]), 3) + 1)]
        got = [tokens[u, 1:][tokens[u, 1:].ne(pad)] for u in document_index[row] if u >= 0]
        assert len(got) == len(expected)
        for sentence, context_id in zip(got, expected):
            assert torch.equal(sentence, dataset.pair.src[context_id])
    model.eval()
    slots, empty = model.encoder.context_slots(sample["net_input"]["src_tokens"], ContextInputs.of(sample["net_input"]), None)
    assert slots.size(0) == 3 and torch.equal(empty[:, 2], document_index.lt(0).all(dim=1))
    criterion = task.build_criterion(cfg.criterion)
    model.train()
    for indices in (list(range(12)), [0]):
        model.zero_grad()
        criterion(model, batch_of(task, "train", indices))[0].backward()
        assert [n for n, p in model.named_parameters() if p.grad is None] == []


@pytest.mark.parametrize("arch,extra", [("hmce", []), ("hce", ["--context-encoder-layers", "1"])])
def test_length_chunks_give_the_single_pass_logits_and_gradients(tiny_data, arch, extra):
    task, model, cfg = build(tiny_data, arch, ["--dropout", "0", "--attention-dropout", "0", *extra])
    task.load_dataset("train")
    criterion = task.build_criterion(cfg.criterion)
    sample = batch_of(task, "train", list(range(100)))
    net_input = sample["net_input"]
    pad = task.tgt_dict.pad()
    lengths = torch.maximum(net_input["src_tokens"].ne(pad).sum(1), net_input["prev_output_tokens"].ne(pad).sum(1))
    assert length_chunks(lengths, 3) is not None and net_input["context_source_row"].ge(0).any()
    model.train()
    results = []
    extras = []
    for chunks in (1, 3):
        model.train_length_chunks = chunks
        model.zero_grad()
        logits, extra = model(**net_input)
        extras.append(extra)
        loss = criterion(model, sample)[0]
        loss.backward()
        results.append((logits.detach(), loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (single, single_loss, single_grads), (chunked, chunked_loss, chunked_grads) = results
    real = sample["target"].ne(pad)
    torch.testing.assert_close(chunked[real], single[real], atol=1e-5, rtol=1e-5)
    # the decoder's extra outputs keep their shapes and, at real positions, their numbers
    single_extra, chunked_extra = extras
    real_source = net_input["src_tokens"].ne(pad)
    attn_real = real.unsqueeze(2) & real_source.unsqueeze(1)
    assert chunked_extra["attn"][0].shape == single_extra["attn"][0].shape
    torch.testing.assert_close(chunked_extra["attn"][0][attn_real], single_extra["attn"][0][attn_real],
                               atol=1e-5, rtol=1e-4)
    assert len(chunked_extra["inner_states"]) == len(single_extra["inner_states"])
    for chunked_state, single_state in zip(chunked_extra["inner_states"], single_extra["inner_states"]):
        assert chunked_state.shape == single_state.shape
        torch.testing.assert_close(chunked_state.transpose(0, 1)[real], single_state.transpose(0, 1)[real],
                                   atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(chunked_loss, single_loss, atol=1e-4, rtol=1e-5)
    for name, grad in single_grads.items():
        torch.testing.assert_close(chunked_grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)


def test_criterion_hooks_switch_length_chunks_off(tiny_data):
    task, model, _ = build(tiny_data, "hmce", ["--criterion", "cka_alignment"])
    assert model.train_length_chunks == 3
    ModelHooks(lambda m: object()).for_model(model)
    assert model.train_length_chunks == 1


def test_length_chunks_run_on_the_cpu_only(tiny_data):
    # on a GPU every chunk is another round of kernel launches (benchmarks/context_op_count.py)
    task, model, _ = build(tiny_data, "hmce")
    task.load_dataset("train")
    net_input = batch_of(task, "train", list(range(100)))["net_input"]
    src_tokens, prev_output_tokens = net_input["src_tokens"], net_input["prev_output_tokens"]
    model.train()
    chunks = model.training_chunks(src_tokens, prev_output_tokens)
    assert chunks is not None and len(chunks) == 3
    assert sorted(torch.cat(chunks).tolist()) == list(range(src_tokens.size(0)))
    # the same batch on another device (the meta device holds shapes only: no value is read)
    assert model.training_chunks(src_tokens.to("meta"), prev_output_tokens.to("meta")) is None
    model.eval()
    assert model.training_chunks(src_tokens, prev_output_tokens) is None
