"""The context dataset: document boundaries, <boc>, slot order, deduplication, token budgets."""
import numpy as np
import pytest
import torch

from tests.helpers import batch_of, build

from fairseq_ctx.context.data.docids import read_docids


def test_context_comes_only_from_earlier_sentences_of_the_same_document(tiny_data):
    task, _, _ = build(tiny_data, "hmce")
    task.load_dataset("train")
    dataset = task.datasets["train"]
    codes = read_docids(str(tiny_data / "train.docids"), "train", len(dataset))
    first_of_doc = np.flatnonzero(np.concatenate([[True], codes[1:] != codes[:-1]]))
    assert len(first_of_doc) == 40
    for index in range(len(dataset)):
        ids = dataset[index]["context_ids"]
        assert all(codes[j] == codes[index] for j in ids), f"context of {index} crosses a document"
        assert ids == [index - k for k in range(1, len(ids) + 1)], "c_0 must be the nearest sentence"
        expected = min(2, index - first_of_doc[first_of_doc <= index].max())
        assert len(ids) == expected
    for index in first_of_doc:
        assert dataset[index]["context_ids"] == []


def test_batch_layout_boc_slots_and_deduplication(tiny_data):
    task, _, _ = build(tiny_data, "hmce")
    task.load_dataset("train")
    dataset = task.datasets["train"]
    batch = batch_of(task, "train", list(range(6)))
    tokens, index = batch["net_input"]["context_tokens"], batch["net_input"]["context_index"]
    assert index.shape == (6, 2)
    assert (tokens[:, 0] == task.boc_index).all()
    # sentences 0..5 of document 0: their contexts are sentences 0..4, each stored once
    assert tokens.size(0) == 5
    for row, example_id in enumerate(batch["id"].tolist()):
        for slot, context_id in enumerate(dataset[example_id]["context_ids"]):
            stored = tokens[index[row, slot]]
            stored = stored[stored.ne(task.src_dict.pad())]
            expected = torch.cat([torch.tensor([task.boc_index]), dataset.pair.src[context_id]])
            assert torch.equal(stored, expected)
        assert (index[row, len(dataset[example_id]["context_ids"]):] == -1).all()


@pytest.mark.parametrize("extra", [["--document-window", "0"], ["--no-context-cache"]])
def test_token_budget_counts_context_tokens_when_they_are_encoded_separately(tiny_data, extra):
    task, _, _ = build(tiny_data, "hmce", extra)
    task.load_dataset("train")
    dataset = task.datasets["train"]
    index = 2  # third sentence of the first document: two context sentences
    context = sum(int(dataset.pair.src_sizes[j]) + 1 for j in (0, 1))
    assert dataset.num_tokens(index) == max(int(dataset.pair.src_sizes[index]) + context, int(dataset.pair.tgt_sizes[index]))
    np.testing.assert_array_equal(
        dataset.num_tokens_vec(np.arange(len(dataset))), [dataset.num_tokens(i) for i in range(len(dataset))]
    )


def test_token_budget_of_reused_contexts_is_the_sentence_itself(tiny_data):
    task, _, _ = build(tiny_data, "hmce")  # document windows + reuse (the defaults)
    task.load_dataset("train")
    dataset = task.datasets["train"]
    sizes = np.maximum(dataset.pair.src_sizes, dataset.pair.tgt_sizes)
    np.testing.assert_array_equal(dataset.num_tokens_vec(np.arange(len(dataset))), sizes)


@pytest.mark.parametrize("window", [1, 4, 16])
def test_document_windows_are_runs_of_consecutive_sentences_sorted_by_length(tiny_data, window):
    task, _, _ = build(tiny_data, "hmce", ["--document-window", str(window)])
    task.load_dataset("train")
    dataset = task.datasets["train"]
    np.random.seed(3)
    order = dataset.ordered_indices()
    assert sorted(order.tolist()) == list(range(len(dataset)))
    starts = np.flatnonzero(dataset.positions % window == 0)
    assert order[0] in starts
    windows = np.split(order, np.flatnonzero(np.isin(order, starts))[1:])
    assert len(windows) == len(starts)
    for run in windows:
        assert len(run) <= window and np.array_equal(run, np.arange(run[0], run[0] + len(run)))
    longest = np.maximum(dataset.pair.src_sizes, dataset.pair.tgt_sizes)
    window_max = [longest[run].max() for run in windows]
    assert window_max == sorted(window_max)


def test_context_source_row_points_at_the_same_sentence_in_the_batch(tiny_data):
    task, _, _ = build(tiny_data, "hmce")
    task.load_dataset("train")
    batch = batch_of(task, "train", list(range(8)))
    net_input = batch["net_input"]
    pad = task.src_dict.pad()
    rows = net_input["context_source_row"]
    assert rows.shape == (net_input["context_tokens"].size(0),)
    contexts = {j for i in range(8) for j in task.datasets["train"][i]["context_ids"]}
    assert len(contexts) == rows.numel() and rows.ge(0).all()  # every context is a source of this batch
    for u, r in enumerate(rows.tolist()):
        context = net_input["context_tokens"][u, 1:]
        assert torch.equal(context[context.ne(pad)], net_input["src_tokens"][r][net_input["src_tokens"][r].ne(pad)])
    alone = batch_of(task, "train", [3])["net_input"]["context_source_row"]
    assert alone.tolist() == [-1, -1]


def test_context_size_zero_gives_plain_sentence_batches(tiny_data):
    task, _, _ = build(tiny_data, "transformer", ["--context-size", "0"])
    task.load_dataset("train")
    batch = batch_of(task, "train", [0, 1, 2])
    assert set(batch["net_input"]) == {"src_tokens", "src_lengths", "prev_output_tokens"}


def test_a_context_size_beyond_the_longest_document_is_bounded_by_it(tiny_data, caplog):
    """--context-size 1,000,000 on documents of a few sentences: the batches and the model's output
    are those of the longest document's length minus one, built at once (not a million slots)."""
    import logging
    import time

    task, model, _ = build(tiny_data, "hmce", ["--context-size", "1000000"])
    start = time.perf_counter()
    with caplog.at_level(logging.INFO, logger="fairseq_ctx.context.data.context_dataset"):
        task.load_dataset("train")
    assert time.perf_counter() - start < 10
    dataset = task.datasets["train"]
    longest = int(dataset.positions.max()) + 1
    assert dataset.context_size == longest - 1
    assert (f"--context-size 1000000, but its longest document has {longest} sentence(s): each sentence reads at "
            f"most {longest - 1} previous ones") in caplog.text
    bounded, _, _ = build(tiny_data, "hmce", ["--context-size", str(longest - 1)])
    bounded.load_dataset("train")
    ids = list(range(12))
    huge, exact = batch_of(task, "train", ids), batch_of(bounded, "train", ids)
    assert torch.equal(huge["net_input"]["context_index"], exact["net_input"]["context_index"])
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(model(**huge["net_input"])[0], model(**exact["net_input"])[0])
