"""caching_tokens / caching_sentence (Mąka et al., 2024): the cache is each context sentence's own
encoding, the source encoding and sentences without context are sentence-level, the context
reaches the decoder, incremental decoding equals the full pass."""
import pytest
import torch

from tests.helpers import batch_of, build

ARCHS = ["caching_tokens", "caching_sentence"]


@pytest.fixture(scope="module", params=ARCHS)
def caching(request, tiny_data):
    task, model, cfg = build(tiny_data, request.param)
    task.load_dataset("train")
    model.eval()
    return request.param, task, model


def encode(model, net_input):
    return model.encoder(net_input["src_tokens"], net_input["src_lengths"],
                         context_tokens=net_input.get("context_tokens"), context_index=net_input.get("context_index"))


def alone(model, tokens, pad):
    """(L, C) final encoder states of one sentence encoded as a source on its own."""
    tokens = tokens[tokens.ne(pad)].unsqueeze(0)
    return model.encoder(tokens, torch.tensor([tokens.size(1)]))["encoder_out"][0][:, 0]


def sentence_position(model, slot):
    return model.encoder.sentence_positions.weight[slot + 1]


def without_context_entries(net_input):
    return {k: v for k, v in net_input.items() if not k.startswith("context")}


def test_source_encoding_ignores_context_and_sentences_without_context_get_sentence_level_output(caching):
    _, task, model = caching
    net_input = batch_of(task, "train", list(range(10)))["net_input"]
    has_context = net_input["context_index"].ge(0).any(dim=1)
    assert has_context.any() and not has_context.all()
    bare = without_context_entries(net_input)
    assert torch.equal(encode(model, net_input)["encoder_out"][0], encode(model, bare)["encoder_out"][0])
    with torch.no_grad():
        with_context, without = model(**net_input)[0], model(**bare)[0]
    assert torch.equal(with_context[~has_context], without[~has_context])
    assert ((with_context - without).abs().amax(dim=(1, 2))[has_context] > 1e-4).all()


def test_cache_of_each_context_slot_is_that_sentence_encoded_alone(caching):
    arch, task, model = caching
    net_input = batch_of(task, "train", list(range(10)))["net_input"]
    out = encode(model, net_input)
    cache, padding = out["context_out"][0], out["context_padding_mask"][0]
    tokens, index, pad = net_input["context_tokens"], net_input["context_index"], task.src_dict.pad()
    for row in range(index.size(0)):
        expected = []
        for slot, sentence in enumerate(index[row].tolist()):
            if sentence < 0:
                continue
            states = alone(model, tokens[sentence], pad)
            if arch == "caching_sentence":  # one vector per context sentence: the mean of its token states
                states = states.mean(dim=0, keepdim=True)
            expected.append(states + sentence_position(model, slot))
        kept = cache[~padding[row], row]
        if not expected:
            assert kept.numel() == 0
            continue
        torch.testing.assert_close(kept, torch.cat(expected), atol=1e-5, rtol=0)
    if arch == "caching_sentence":
        assert torch.equal((~padding).sum(dim=1), index.ge(0).sum(dim=1))


def test_changing_the_context_changes_only_the_sentences_that_have_it(caching):
    _, task, model = caching
    net_input = batch_of(task, "train", list(range(10)))["net_input"]
    has_context = net_input["context_index"].ge(0).any(dim=1)
    tokens = net_input["context_tokens"]
    shuffled = {**net_input, "context_tokens": tokens.roll(1, dims=0)}
    with torch.no_grad():
        reference, changed = model(**net_input)[0], model(**shuffled)[0]
    difference = (reference - changed).abs().amax(dim=(1, 2))
    assert (difference[has_context] > 1e-4).all() and (difference[~has_context] == 0).all()


def test_cache_is_detached_unless_asked(tiny_data):
    for extra, needs_grad in (((), False), (("--context-encoder-gradient",), True)):
        task, model, _ = build(tiny_data, "caching_tokens", extra)
        task.load_dataset("train")
        model.train()
        states, _ = model.encoder.sentence_states(batch_of(task, "train", [3])["net_input"]["context_tokens"])
        assert states.requires_grad is needs_grad


def test_incremental_decoding_and_reordering_match_the_full_pass(caching):
    _, task, model = caching
    sample = batch_of(task, "train", list(range(6)))
    net_input = sample["net_input"]
    prev = net_input["prev_output_tokens"]
    with torch.no_grad():
        full = model(**net_input)[0]
        encoder_out = encode(model, net_input)
        order = torch.arange(prev.size(0)).flip(0)
        encoder_out = model.encoder.reorder_encoder_out(encoder_out, order)
        state = {}
        for step in range(prev.size(1)):
            logits = model.decoder(prev[order, : step + 1], encoder_out=encoder_out, incremental_state=state)[0]
            real = prev[order, step].ne(task.tgt_dict.pad())
            torch.testing.assert_close(logits[real, -1], full[order][real, step], atol=1e-4, rtol=0)
