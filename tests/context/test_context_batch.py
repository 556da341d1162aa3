"""The context of a batch as one type (ContextInputs, TargetContextKeys): what the dataset
collates is exactly the type's entries, a sub-batch of rows keeps each row's context, masking
empties every slot, and a context encoder refuses an entry it does not know."""
import pytest
import torch

from tests.helpers import build
from fairseq_ctx.context.data.context_batch import NET_INPUT_NAMES, ContextInputs, TargetContextKey, TargetContextKeys
from fairseq_ctx.context.data.own_translations import select_rows


@pytest.fixture(scope="module")
def batch(tiny_data):
    """A training batch of hmce with a document vector and target context: every entry present."""
    task, model, _ = build(tiny_data, "hmce", ["--document-vector", "--document-vector-span", "3",
                                               "--target-context-size", "2", "--context-size", "2"])
    task.load_dataset("train")
    dataset = task.datasets["train"]
    return task, model, dataset.collater([dataset[i] for i in range(3, 15)])


def slot_sentences(tokens: torch.Tensor, index: torch.Tensor, pad: int):
    """Per row, the sentences its slots point at (token lists), None for an empty slot."""
    return [[tokens[u][tokens[u].ne(pad)].tolist() if u >= 0 else None for u in row] for row in index.tolist()]


def test_the_batch_carries_exactly_the_entries_of_its_context_inputs(batch):
    _, _, sample = batch
    net_input = sample["net_input"]
    context = ContextInputs.of(net_input)
    assert sorted(context.net_input()) == sorted(NET_INPUT_NAMES)
    assert sorted(net_input) == sorted([*NET_INPUT_NAMES, "src_tokens", "src_lengths", "prev_output_tokens"])
    assert all(context.net_input()[name] is net_input[name] for name in NET_INPUT_NAMES)
    keys = TargetContextKeys.of(sample)
    assert [row.key for row in keys.rows()] == sample["id"].tolist()
    assert TargetContextKeys.of_rows(keys.rows(), 2).entries().keys() == keys.entries().keys()
    assert all(torch.equal(a, b) for a, b in zip(TargetContextKeys.of_rows(keys.rows(), 2).entries().values(),
                                                 keys.entries().values()))


def test_rows_of_a_batch_keep_their_context_sentences_and_source_rows(batch):
    task, _, sample = batch
    pad = task.src_dict.pad()
    rows = [7, 2, 5]
    part = select_rows(sample, rows, task.cfg.left_pad_source)
    whole, selected = ContextInputs.of(sample["net_input"]), ContextInputs.of(part["net_input"])
    for name in ("context", "document", "target_context"):
        tokens = getattr(whole, "target_context_tokens" if name == "target_context" else "context_tokens")
        part_tokens = getattr(selected, "target_context_tokens" if name == "target_context" else "context_tokens")
        expected = slot_sentences(tokens, getattr(whole, f"{name}_index")[rows], pad)
        assert slot_sentences(part_tokens, getattr(selected, f"{name}_index"), pad) == expected
    for u, row in enumerate(selected.context_source_row.tolist()):
        was = whole.context_source_row[u].item()
        assert row == (rows.index(was) if was in rows else -1)
    assert part["target_context_key"].tolist() == [sample["target_context_key"][r].item() for r in rows]


def test_masked_context_has_only_empty_slots_and_no_sentences(batch):
    _, _, sample = batch
    masked = ContextInputs.of(sample["net_input"]).masked()
    assert masked.context_index.lt(0).all() and masked.target_context_index.lt(0).all()
    assert masked.context_tokens.size(0) == 0 and masked.target_context_tokens.size(0) == 0
    assert masked.context_index.shape == sample["net_input"]["context_index"].shape


@pytest.mark.parametrize("arch", ["hmce", "ctx_concat", "dat", "han", "dct"])
def test_every_context_encoder_refuses_an_unknown_context_entry(tiny_data, arch):
    task, model, _ = build(tiny_data, arch)
    task.load_dataset("train")
    dataset = task.datasets["train"]
    net_input = dataset.collater([dataset[i] for i in range(4)])["net_input"]
    encoder_input = {name: value for name, value in net_input.items() if name != "prev_output_tokens"}
    model.eval()
    reference = model.encoder(**encoder_input)["encoder_out"][0]
    given = model.encoder.forward_with_context(net_input["src_tokens"], net_input["src_lengths"],
                                               ContextInputs.of(net_input))["encoder_out"][0]
    assert torch.equal(reference, given)
    with pytest.raises(TypeError, match="context_indices"):
        model.encoder(**encoder_input, context_indices=net_input["context_index"])


def test_target_context_keys_of_rows_pad_the_previous_keys():
    keys = TargetContextKeys.of_rows([TargetContextKey(4, [3, 2], 1), TargetContextKey(9, [], 0)], 2)
    assert keys.target_context_ids.tolist() == [[3, 2], [-1, -1]]
    assert keys.rows() == [TargetContextKey(4, [3, 2], 1), TargetContextKey(9, [], 0)]
