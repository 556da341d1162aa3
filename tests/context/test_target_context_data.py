"""Target-side context (--target-context-size M): the option, the <boc> of the target dictionary,
the batch entries built from the reference translations, token budgets, truncation, the
decoding order and the raw-text collater."""
import logging

import numpy as np
import pytest
import torch
from fairseq import tasks
from fairseq.data import Dictionary

from tests.helpers import build, parse_cfg
from fairseq_ctx.context.context_translation_task import ContextTranslationConfig, ContextTranslationTask
from fairseq_ctx.context.data.context_examples import Example
from fairseq_ctx.context.data.docids import DocumentIdError, read_docids
from fairseq_ctx.context.interactive import InteractiveDocuments


def setup(data, extra=()):
    task = tasks.setup_task(parse_cfg(data, "hmce", list(extra)).task)
    task.load_dataset("train")
    return task, task.datasets["train"]


def unpadded(tokens: torch.Tensor, pad: int) -> torch.Tensor:
    return tokens[tokens.ne(pad)]


@pytest.mark.parametrize("source_context", ["2", "0"])
def test_target_context_is_the_previous_references_of_the_same_document(tiny_data, source_context):
    task, dataset = setup(tiny_data, ["--target-context-size", "2", "--context-size", source_context])
    codes = read_docids(str(tiny_data / "train.docids"), "train", len(dataset))
    indices = list(range(12))
    batch = dataset.collater([dataset[i] for i in indices])
    tokens = batch["net_input"]["target_context_tokens"]
    index = batch["net_input"]["target_context_index"]
    pad, boc = task.tgt_dict.pad(), task.target_boc_index
    assert index.shape == (12, 2)
    assert boc == task.tgt_dict.index("<boc>") and (tokens[:, 0] == boc).all()
    expected_rows = set()
    for row, example_id in enumerate(batch["id"].tolist()):
        previous = [j for j in (example_id - 1, example_id - 2) if j >= 0 and codes[j] == codes[example_id]]
        assert batch["target_context_ids"][row].tolist() == previous + [-1] * (2 - len(previous))
        for slot, j in enumerate(previous):
            stored = unpadded(tokens[index[row, slot]], pad)
            assert torch.equal(stored, torch.cat([torch.tensor([boc]), dataset.pair.tgt[j]]))
            expected_rows.add(j)
        assert (index[row, len(previous):] == -1).all()
        later = int(np.sum(codes[example_id + 1: example_id + 3] == codes[example_id]))
        assert batch["target_context_users"][row] == later
    assert tokens.size(0) == len(expected_rows)  # every previous sentence stored once
    assert torch.equal(batch["target_context_key"], batch["id"])


def test_size_zero_adds_nothing(tiny_data):
    _, with_target = setup(tiny_data, ["--target-context-size", "2"])
    task, dataset = setup(tiny_data)
    batch = dataset.collater([dataset[i] for i in range(6)])
    reference = with_target.collater([with_target[i] for i in range(6)])
    assert sorted(batch["net_input"]) == ["context_index", "context_source_row", "context_tokens",
                                          "prev_output_tokens", "src_lengths", "src_tokens"]
    assert not any(name.startswith("target_context") for name in batch)
    for name in batch["net_input"]:
        assert torch.equal(batch["net_input"][name], reference["net_input"][name])
    assert len(task.tgt_dict) == len(with_target.pair.tgt_dict)  # joined dictionaries: <boc> was there


def test_target_dictionary_gets_boc_only_with_target_context():
    def dictionaries():
        src, tgt = Dictionary(), Dictionary()
        src.add_symbol("a")
        tgt.add_symbol("b")
        return src, tgt

    for size, grows in [(0, 0), (3, 1)]:
        src, tgt = dictionaries()
        before = len(tgt)
        task = ContextTranslationTask(ContextTranslationConfig(target_context_size=size), src, tgt)
        assert len(tgt) == before + grows
        assert (task.target_boc_index == tgt.index("<boc>")) == bool(grows)


def test_negative_size_and_a_model_that_cannot_read_it_are_refused(tiny_data):
    with pytest.raises(ValueError, match="--target-context-size must be >= 0"):
        tasks.setup_task(parse_cfg(tiny_data, "hmce", ["--target-context-size", "-1"]).task)
    with pytest.raises(ValueError, match=r"--arch dat cannot read target-side context.*--target-context-size 0"):
        build(tiny_data, "dat", ["--target-context-size", "1"])


def test_context_size_zero_still_needs_docids(tiny_data, tmp_path):
    for name in tiny_data.iterdir():
        if not name.name.startswith("train.docids"):
            (tmp_path / name.name).symlink_to(name)
    task = tasks.setup_task(parse_cfg(tmp_path, "hmce", ["--context-size", "0", "--target-context-size", "1"]).task)
    with pytest.raises(DocumentIdError, match="missing document-id file"):
        task.load_dataset("train")


def test_token_budget_counts_target_context(tiny_data):
    _, dataset = setup(tiny_data, ["--target-context-size", "2", "--context-size", "0"])
    index = 2  # third sentence of the first document
    tgt = dataset.pair.tgt_sizes
    expected = int(dataset.pair.src_sizes[index]) + int(tgt[0] + 1 + tgt[1] + 1)
    assert dataset.num_tokens(index) == max(expected, int(tgt[index]))
    assert dataset.num_tokens(0) == max(int(dataset.pair.src_sizes[0]), int(tgt[0]))


def test_long_target_context_is_truncated_keeping_eos_and_counted(tiny_data, caplog):
    with caplog.at_level(logging.WARNING):
        task, dataset = setup(tiny_data, ["--target-context-size", "1", "--max-context-tokens", "4"])
    tgt = dataset.pair.tgt_sizes
    used = dataset.later_in_document > 0
    assert dataset.truncated_target_contexts == int(((tgt + 1 > 4) & used).sum()) > 0
    assert f"{dataset.truncated_target_contexts} target context sentences" in caplog.text
    batch = dataset.collater([dataset[i] for i in range(1, 8)])
    tokens = batch["net_input"]["target_context_tokens"]
    for row in tokens:
        kept = unpadded(row, task.tgt_dict.pad())
        assert kept.numel() <= 4 and kept[-1] == task.tgt_dict.eos()


def test_splits_other_than_train_are_in_document_order(tiny_data):
    task = tasks.setup_task(parse_cfg(tiny_data, "hmce", ["--target-context-size", "1"]).task)
    task.load_dataset("valid")
    dataset = task.datasets["valid"]
    order = dataset.ordered_indices()
    assert sorted(order.tolist()) == list(range(len(dataset)))
    positions = dataset.positions[order]
    assert (np.diff(positions) >= 0).all()
    for position in np.unique(positions):
        sizes = dataset._lengths()[order[positions == position]]
        assert (np.diff(sizes) >= 0).all()


def test_collater_takes_the_first_m_given_target_sentences_nearest_first(tiny_data):
    task, _ = setup(tiny_data, ["--target-context-size", "2"])
    collate = task.example_collater()
    d = task.tgt_dict
    sentence = [d.encode_line(s, add_if_not_exist=False).long() for s in ("er ist da .", "sie ist da .", "es ist da .")]
    source = task.src_dict.encode_line("it is there .", add_if_not_exist=False).long()
    examples = [Example(source, [], sentence[0], target_context=sentence), Example(source, [], sentence[0])]
    batch = collate(examples)
    index, tokens = batch["net_input"]["target_context_index"], batch["net_input"]["target_context_tokens"]
    row = batch["id"].tolist().index(0)
    boc = torch.tensor([task.target_boc_index])
    assert [torch.equal(unpadded(tokens[u], d.pad()), torch.cat([boc, sentence[slot]]))
            for slot, u in enumerate(index[row].tolist())] == [True, True]
    assert index[1 - row].tolist() == [-1, -1] and tokens.size(0) == 2
    assert "target_context_key" not in batch  # given target context is kept at inference



def test_interactive_token_budget_counts_the_previous_lines_as_target_context(tiny_data):
    task, _ = setup(tiny_data, ["--target-context-size", "2", "--context-size", "0"])
    documents = InteractiveDocuments(task.example_collater())
    lines = ["a b .", "c d e f .", "g .", "", "h i ."]
    tokens = [task.src_dict.encode_line(line, add_if_not_exist=False).long() for line in lines]
    documents.read_buffer(lines, tokens)
    dataset = documents.build_dataset(tokens, [len(t) for t in tokens], None, task)
    length = [len(t) for t in tokens]
    # each previous line of the document counts as long as its source, plus <boc>; a blank line ends the document
    expected = [length[0], length[1] + length[0] + 1, length[2] + length[1] + 1 + length[0] + 1, length[4]]
    assert [dataset.num_tokens(i) for i in range(len(dataset))] == expected
    assert dataset.line_numbers == [0, 1, 2, 4]


def test_document_order_counts_source_context_as_there_are_no_windows(tiny_data):
    task, _, _ = build(tiny_data, "hmce", ["--context-size", "1"])  # windows + reuse: not counted
    task.load_dataset("valid")
    plain = task.datasets["valid"]
    assert plain.num_tokens(1) == max(int(plain.pair.src_sizes[1]), int(plain.pair.tgt_sizes[1]))
    task = tasks.setup_task(parse_cfg(tiny_data, "hmce", ["--context-size", "1", "--target-context-size", "1"]).task)
    task.load_dataset("valid")
    dataset = task.datasets["valid"]
    dataset.count_context_tokens = False  # what hmce asks for under document windows
    src, tgt = dataset.pair.src_sizes, dataset.pair.tgt_sizes
    assert dataset.num_tokens(1) == max(int(src[1]) + int(src[0] + 1) + int(tgt[0] + 1), int(tgt[1]))
