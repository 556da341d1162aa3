"""Target-side context in the models (--target-context-size M > 0): ctx_concat's loss-free decoder
prefix, hce/hmce's target slots, the refusal of the other archs, and M = 0 unchanged."""
from typing import Dict, List, Sequence

import pytest
import torch
from fairseq.data import data_utils
from fairseq.models.transformer import TransformerDecoderBase, TransformerModel
from omegaconf import open_dict

from tests.helpers import batch_of, build
from fairseq_ctx.context.models.concat import ConcatContextTransformer

NO_DROPOUT = ["--dropout", "0", "--decoder-layers", "2"]
READERS = ["ctx_concat", "hce", "hmce"]


def build_with_target_context(tiny_data, arch: str, size: int, extra: Sequence[str] = NO_DROPOUT):
    """Task and model with --target-context-size ``size`` (set on the task's config)."""
    task, _, cfg = build(tiny_data, arch, extra)
    with open_dict(task.cfg):
        task.cfg.target_context_size = size
    torch.manual_seed(1)
    model = task.build_model(cfg.model)
    task.load_dataset("train")
    return task, model, cfg


def target_context(task, slots: List[List[int]]) -> Dict[str, torch.Tensor]:
    """The batch keys for example b reading the targets of the training sentences ``slots[b]``
    (nearest first; -1 = empty slot), each once, as ``[<boc>] + target``."""
    dataset, dictionary = task.datasets["train"], task.target_dictionary
    boc = dictionary.index(task.cfg.context_begin_symbol)
    distinct = sorted({s for row in slots for s in row if s >= 0})
    rows = [torch.cat([torch.tensor([boc]), dataset[s]["target"]]) for s in distinct]
    tokens = data_utils.collate_tokens(rows, dictionary.pad()) if rows else torch.full((0, 1), dictionary.pad())
    width = max(len(row) for row in slots)
    index = [[distinct.index(s) if s >= 0 else -1 for s in row] + [-1] * (width - len(row)) for row in slots]
    return {"target_context_tokens": tokens, "target_context_index": torch.tensor(index)}


def sample_with(task, indices: List[int], slots: List[List[int]]):
    """The training sentences ``indices``, sentence ``indices[i]`` reading the targets ``slots[i]``
    (the collater sorts the rows by length: see :func:`row`)."""
    sample = batch_of(task, "train", indices)
    slots_of = dict(zip(indices, slots))
    sample["net_input"].update(target_context(task, [slots_of[i] for i in sample["id"].tolist()]))
    return sample


def row(sample, example_id: int) -> int:
    return sample["id"].tolist().index(example_id)


# Sentences 2, 1, 0, 9 read two previous targets, one, none (document start), two of another length.
INDICES = [2, 1, 0, 9]
SLOTS = [[1, 0], [0, -1], [-1, -1], [8, 7]]
START = 0  # the sentence without any context


@pytest.fixture(scope="module")
def concat(tiny_data):
    task, model, cfg = build_with_target_context(tiny_data, "ctx_concat", 2)
    return task, model.eval(), cfg


def test_incremental_decoding_with_beam_reordering_equals_the_full_forward(concat):
    task, model, _ = concat
    net_input = sample_with(task, INDICES, SLOTS)["net_input"]
    with torch.no_grad():
        full = model(**net_input)[0]
        beams = torch.arange(len(INDICES)).repeat_interleave(2)
        encoder_out = model.encoder.reorder_encoder_out(model.encoder.forward_torchscript(net_input), beams)
        assert encoder_out["target_prefix"][0].eq(model.decoder.padding_idx).any()
        prev = net_input["prev_output_tokens"][beams]
        expected, rows = full[beams], torch.arange(beams.numel())
        state: Dict = {}
        for step in range(prev.size(1)):
            if step == 2:  # beam search reorders hypotheses between steps
                order = torch.tensor([1, 0, 2, 3, 5, 4, 7, 6])
                model.decoder.reorder_incremental_state_scripting(state, order)
                encoder_out = model.encoder.reorder_encoder_out(encoder_out, order)
                prev, expected, rows = prev[order], expected[order], rows[order]
            logits = model.decoder(prev[:, : step + 1], encoder_out=encoder_out, incremental_state=state)[0][:, -1]
            real = prev[:, step].ne(model.decoder.padding_idx)
            torch.testing.assert_close(logits[real], expected[real, step], atol=1e-5, rtol=0)


def test_the_prefix_carries_no_loss_and_changes_only_rows_with_target_context(concat):
    task, model, cfg = concat
    sample = sample_with(task, INDICES, SLOTS)
    with torch.no_grad():
        logits, extra = model(**sample["net_input"])
    assert logits.shape[:2] == sample["target"].shape
    assert extra["attn"][0].shape[1] == sample["target"].size(1)
    assert all(state.size(0) == sample["target"].size(1) for state in extra["inner_states"])
    changed = sample_with(task, INDICES, [[3, 4], [5, -1], [-1, -1], [6, 5]])
    with torch.no_grad():
        other = model(**changed["net_input"])[0]
    difference = (other - logits).abs().amax(dim=(1, 2))
    start = row(sample, START)
    assert difference[start] == 0
    assert (difference[torch.arange(len(INDICES)) != start] > 1e-4).all()
    loss, sample_size, _ = task.build_criterion(cfg.criterion)(model, sample)
    assert torch.isfinite(loss) and sample_size == sample["ntokens"]


def test_a_row_without_target_context_decodes_as_without_any_prefix(concat):
    task, model, _ = concat
    sample = sample_with(task, [START, 5], [[-1, -1], [4, 3]])
    alone = sample_with(task, [START], [[-1, -1]])
    with torch.no_grad():
        together = model(**sample["net_input"])[0][row(sample, START)]
        single = model(**alone["net_input"])[0][0]
        stock = TransformerDecoderBase.extract_features_scriptable(
            model.decoder, alone["net_input"]["prev_output_tokens"], model.encoder.forward_torchscript(alone["net_input"])
        )[0]
    length = alone["target"].size(1)
    torch.testing.assert_close(together[:length], single, atol=1e-5, rtol=0)
    torch.testing.assert_close(single, model.decoder.output_layer(stock)[0], atol=1e-5, rtol=0)


def test_without_target_context_ctx_concat_is_the_stock_model(tiny_data, monkeypatch):
    task, model, cfg = build(tiny_data, "ctx_concat", NO_DROPOUT)
    monkeypatch.setattr(ConcatContextTransformer, "build_decoder", classmethod(TransformerModel.build_decoder.__func__))
    torch.manual_seed(1)
    stock = task.build_model(cfg.model)
    assert type(stock.decoder).__name__ == "TransformerDecoderBase"
    assert list(model.state_dict()) == list(stock.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), stock.state_dict().values()))
    task.load_dataset("train")
    net_input = batch_of(task, "train", list(range(8)))["net_input"]
    model.eval(), stock.eval()
    with torch.no_grad():
        assert torch.equal(model(**net_input)[0], stock(**net_input)[0])
        encoder_out = model.encoder.forward_torchscript(net_input)
        state, stock_state = {}, {}
        for step in range(3):
            prev = net_input["prev_output_tokens"][:, : step + 1]
            assert torch.equal(model.decoder(prev, encoder_out, incremental_state=state)[0],
                               stock.decoder(prev, encoder_out, incremental_state=stock_state)[0])


@pytest.mark.parametrize("arch", READERS)
def test_new_parameters_only_with_target_context_and_no_second_copy_of_the_embeddings(tiny_data, arch):
    _, plain, _ = build(tiny_data, arch, NO_DROPOUT)
    _, model, _ = build_with_target_context(tiny_data, arch, 2)
    added = sorted(set(model.state_dict()) - set(plain.state_dict()))
    assert set(plain.state_dict()) <= set(model.state_dict())
    assert added == (["decoder.target_context_segment"] if arch == "ctx_concat" else ["encoder.target_context.target_side"])
    assert not any("target" in name for name in plain.state_dict())
    fresh = build_with_target_context(tiny_data, arch, 2)[1]
    fresh.load_state_dict(model.state_dict(), strict=True)
    if arch != "ctx_concat":
        assert model.encoder.target_context.embed_tokens is model.decoder.embed_tokens is model.encoder.embed_tokens


@pytest.fixture(scope="module", params=["hce", "hmce"])
def hierarchical(request, tiny_data):
    task, model, cfg = build_with_target_context(tiny_data, request.param, 2)
    return task, model.eval(), cfg


def encoder_states(model, net_input):
    return model.encoder.forward_torchscript(net_input)["encoder_out"][0]


def test_hierarchical_target_slots_change_only_rows_that_have_them(hierarchical):
    task, model, _ = hierarchical
    sample = sample_with(task, INDICES, SLOTS)
    net_input = sample["net_input"]
    with torch.no_grad():
        with_target = encoder_states(model, net_input)
        empty = dict(net_input, **target_context(task, [[-1, -1]] * len(INDICES)))
        without = encoder_states(model, empty)
        sentence_level = model.encoder.forward_scriptable(net_input["src_tokens"], net_input["src_lengths"], False, None)
    difference = (with_target - without).abs().amax(dim=(0, 2))
    start = row(sample, START)
    assert difference[start] == 0
    assert (difference[torch.arange(len(INDICES)) != start] > 1e-4).all()
    assert torch.equal(with_target[:, start], sentence_level["encoder_out"][0][:, start]), "document start must give h_src"


def test_hierarchical_with_empty_target_slots_equals_the_source_only_model(tiny_data, hierarchical):
    task, model, cfg = hierarchical
    _, plain, _ = build(tiny_data, "hmce" if model.encoder.memory_attention else "hce", NO_DROPOUT)
    plain.load_state_dict({k: v for k, v in model.state_dict().items() if "target" not in k})
    plain.eval()
    net_input = sample_with(task, INDICES, [[-1, -1]] * len(INDICES))["net_input"]
    source_only = {k: v for k, v in net_input.items() if not k.startswith("target_")}
    with torch.no_grad():
        torch.testing.assert_close(encoder_states(model, net_input), encoder_states(plain, source_only), atol=1e-6, rtol=0)


def test_hierarchical_target_sentences_are_cached_apart_from_source_sentences(hierarchical):
    task, model, _ = hierarchical
    net_input = sample_with(task, INDICES, SLOTS)["net_input"]
    cache = model.encoder.target_context.cache
    assert cache is not None and cache is not model.encoder.context_cache
    model.encoder.clear_context_caches()
    with torch.no_grad():
        first = encoder_states(model, net_input)
        assert len(cache) == net_input["target_context_tokens"].size(0)
        second = encoder_states(model, net_input)
        model.encoder.set_context_cache(False)
        reference = encoder_states(model, net_input)
        model.encoder.set_context_cache(True)
    assert torch.equal(first, second)
    torch.testing.assert_close(first, reference, atol=1e-5, rtol=0)


def test_hierarchical_length_chunks_pass_the_target_context(tiny_data):
    task, model, _ = build_with_target_context(tiny_data, "hmce", 2, [*NO_DROPOUT, "--train-length-chunks", "3"])
    net_input = sample_with(task, list(range(12)), [[i - 1, i - 2] for i in range(12)])["net_input"]
    model.train()
    chunked = model(**net_input)[0]
    model.use_single_pass()
    single = model(**net_input)[0]
    real = net_input["prev_output_tokens"].ne(model.decoder.padding_idx)
    torch.testing.assert_close(chunked[real], single[real], atol=1e-5, rtol=0)
    without = dict(net_input, **target_context(task, [[-1, -1]] * 12))
    assert not torch.allclose(model(**without)[0][real], single[real], atol=1e-4)


@pytest.mark.parametrize("arch,extra", [
    *[(arch, []) for arch in READERS],
    ("hmce", ["--separate-context-encoder", "--context-encoder-layers", "1"]),
    ("hce", ["--document-vector", "--context-encoder-layers", "1"]),
])
def test_every_parameter_gets_a_finite_gradient(tiny_data, arch, extra):
    task, model, cfg = build_with_target_context(tiny_data, arch, 2, ["--decoder-layers", "2", *extra])
    criterion = task.build_criterion(cfg.criterion)
    model.train()
    batches = [
        (INDICES, SLOTS),
        (INDICES, [[-1, -1]] * len(INDICES)),  # every target slot empty (no target sentence at all)
        ([0], [[-1, -1]]),  # one document-initial sentence
        ([5], [[4, 3]]),  # one sentence with target context
    ]
    for indices, slots in batches:
        model.zero_grad()
        loss, _, _ = criterion(model, sample_with(task, indices, slots))
        assert torch.isfinite(loss)
        loss.backward()
        missing = [name for name, p in model.named_parameters() if p.grad is None]
        assert missing == [], f"{arch}: no gradient for {missing} on batch {slots}"
        assert all(torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("arch", READERS)
def test_half_precision_forward_backward_is_finite_and_close(tiny_data, arch, dtype):
    task, model, _ = build_with_target_context(tiny_data, arch, 2)
    model.eval()
    net_input = sample_with(task, INDICES, SLOTS)["net_input"]
    with torch.no_grad():
        reference = model(**net_input)[0].float()
    model.to(dtype)
    with torch.no_grad():
        out = model(**net_input)[0]
    assert out.dtype == dtype and torch.isfinite(out).all()
    torch.testing.assert_close(out.float(), reference, atol=0.15, rtol=0.05)
    model.train()
    model(**net_input)[0].float().logsumexp(-1).mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize("arch", ["dat", "han", "dct"])
def test_other_archs_refuse_target_context(tiny_data, arch):
    with pytest.raises(ValueError, match=rf"--arch {arch} cannot read target-side context.*--target-context-size 2.*"
                                         r"use hce, hmce or ctx_concat, or --target-context-size 0"):
        build_with_target_context(tiny_data, arch, 2)


@pytest.mark.parametrize("arch", READERS)
def test_a_batch_without_target_context_keys_is_refused_not_run_as_document_initial(tiny_data, arch):
    task, model, _ = build_with_target_context(tiny_data, arch, 2)
    net_input = sample_with(task, INDICES, SLOTS)["net_input"]
    source_only = {k: v for k, v in net_input.items() if not k.startswith("target_")}
    with pytest.raises(ValueError, match=r"reads --target-context-size 2 .* batch has no target_context_index.*"
                                         r"context_translation task.*filled with -1"):
        model(**source_only)


@pytest.mark.parametrize("arch", READERS)
def test_beam_search_over_a_batch_equals_one_sentence_at_a_time(tiny_data, arch):
    from argparse import Namespace

    task, model, _ = build_with_target_context(tiny_data, arch, 2)
    model.eval()
    generator = task.build_generator([model], Namespace(beam=3, max_len_b=12, nbest=1))
    slots = [[i - 1, i - 2] for i in range(8)]
    sample = sample_with(task, list(range(8)), slots)
    batched = generator.generate([model], sample)
    for position, example_id in enumerate(sample["id"].tolist()):
        single = generator.generate([model], sample_with(task, [example_id], [slots[example_id]]))
        assert single[0][0]["tokens"].tolist() == batched[position][0]["tokens"].tolist()
        torch.testing.assert_close(single[0][0]["score"], batched[position][0]["score"], atol=1e-4, rtol=0)


@pytest.mark.parametrize("option", [["--checkpoint-activations"], ["--decoder-layerdrop", "0.1"]])
def test_ctx_concat_with_target_context_refuses_options_that_break_the_prefix_cache(tiny_data, option):
    with pytest.raises(ValueError, match="ctx_concat with --target-context-size > 0 cannot use"):
        build_with_target_context(tiny_data, "ctx_concat", 2, option)


def test_hierarchical_target_context_needs_decoder_embeddings_of_the_encoder_size(tiny_data):
    task, _, cfg = build(tiny_data, "hmce")
    with open_dict(task.cfg):
        task.cfg.target_context_size = 2
    with open_dict(cfg.model):
        cfg.model.share_all_embeddings = False
        cfg.model.decoder_embed_dim = cfg.model.decoder_input_dim = cfg.model.decoder_output_dim = 16
    with pytest.raises(ValueError, match=r"decoder's embeddings \(16\) to have the encoder's size \(32\): "
                                         r"set --decoder-embed-dim 32"):
        task.build_model(cfg.model)


def test_a_prefix_longer_than_the_target_positions_is_a_clear_error(concat):
    task, model, _ = concat
    net_input = sample_with(task, INDICES, SLOTS)["net_input"]
    limit = model.decoder.max_target_positions
    model.decoder.max_target_positions = 4
    try:
        with pytest.raises(ValueError, match=r"target-context prefix has \d+ tokens, more than --max-target-positions 4"):
            model(**net_input)
    finally:
        model.decoder.max_target_positions = limit


@pytest.mark.parametrize("arch", READERS)
def test_a_batch_with_more_target_slots_than_the_model_reads_is_a_clear_error(tiny_data, arch):
    task, model, _ = build_with_target_context(tiny_data, arch, 1)
    net_input = sample_with(task, INDICES, SLOTS)["net_input"]
    with pytest.raises(ValueError, match=r"gives 2 previous target sentences per example but the model was built "
                                         r"with --target-context-size 1"):
        model(**net_input)


def test_hierarchical_target_context_reads_the_decoder_embeddings_when_they_are_not_shared(tiny_data):
    task, _, cfg = build(tiny_data, "hmce", NO_DROPOUT)
    with open_dict(task.cfg):
        task.cfg.target_context_size = 2
    with open_dict(cfg.model):
        cfg.model.share_all_embeddings = False
    model = task.build_model(cfg.model).eval()
    task.load_dataset("train")
    encoder = model.encoder
    assert encoder.target_context.embed_tokens is model.decoder.embed_tokens
    assert encoder.embed_tokens is not model.decoder.embed_tokens
    assert [name for name in model.state_dict() if "embed_tokens" in name] == [
        "encoder.embed_tokens.weight", "decoder.embed_tokens.weight"]
    net_input = sample_with(task, INDICES, SLOTS)["net_input"]
    encoder.clear_context_caches()
    with torch.no_grad():
        encoder_states(model, net_input)
        key, target_vector = next(iter(encoder.target_context.cache.vectors.items()))
        source_vector = encoder.encode_context_sentences(torch.tensor([key]))[0]
        reread = encoder.encode_context_sentences(torch.tensor([key]), model.decoder.embed_tokens)[0]
    assert not torch.allclose(target_vector, source_vector, atol=1e-3)
    torch.testing.assert_close(target_vector, reread, atol=1e-5, rtol=0)


@pytest.mark.parametrize("arch", ["hmce", "ctx_concat"])
def test_checkpoint_and_task_disagreeing_on_target_context_is_a_clear_error(tiny_data, arch):
    _, with_target, _ = build_with_target_context(tiny_data, arch, 1)
    _, without, _ = build_with_target_context(tiny_data, arch, 0)
    with pytest.raises(ValueError, match=r"trained with target-side context .* task has --target-context-size 0"):
        without.load_state_dict(with_target.state_dict())
    with pytest.raises(ValueError, match=r"trained without target-side context .* use --target-context-size 0"):
        with_target.load_state_dict(without.state_dict())
    with_target.load_state_dict(with_target.state_dict())

