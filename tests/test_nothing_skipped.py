"""Every example of a split is batched — generated, scored, validated and trained on — whatever
--batch-size / --max-tokens / --required-batch-size-multiple. Stock fairseq drops the last batch
when its size is not a multiple of --required-batch-size-multiple (default 8; fairseq #5036);
the split sizes here are not multiples of 8, and each case first checks that stock fairseq
would have dropped sentences."""
import re
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest
import torch
from fairseq import options, tasks
from fairseq.data import data_utils
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from conftest import EMBEDDING_PAIRS, TINY_MODEL, USER_DIR, run_fairseq_cli
from fairseq_ctx.core.complete_batches import complete_batches

# --batch-size 128 (the size of the report), a batch size below the multiple, a token budget
BATCHINGS = [
    {"max_sentences": 128},
    {"max_sentences": 5},
    {"max_tokens": 150},
]


def setup_task(data: Path, task: str, extra: List[str]):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, input_args=[
        str(data), "--user-dir", USER_DIR, "--task", task, "--arch", "transformer", "--cpu", "--seed", "1", *extra,
    ])
    return tasks.setup_task(convert_namespace_to_omegaconf(args).task)


def stock_count(dataset, batching: Dict) -> int:
    """Sentences stock fairseq's batch_by_size keeps (the bug this module guards against)."""
    indices = dataset.ordered_indices()
    batches = data_utils.batch_by_size(indices, dataset.num_tokens, dataset.num_tokens_vec(indices),
                                       required_batch_size_multiple=8, **batching)
    return sum(len(b) for b in batches)


def epoch_ids(task, dataset, batching: Dict, shuffle: bool, num_shards: int = 1, shard_id: int = 0) -> List[int]:
    """The example ids of one epoch of the task's batch iterator, as fairseq-train / -generate get it."""
    iterator = task.get_batch_iterator(dataset, required_batch_size_multiple=8, seed=1, num_shards=num_shards,
                                       shard_id=shard_id, disable_iterator_cache=True, **batching)
    ids = []
    for batch in iterator.next_epoch_itr(shuffle=shuffle):
        if batch:
            ids.extend(batch["id"].tolist())
    return ids


def assert_every_example_once(task, split: str, batching: Dict) -> None:
    dataset = task.dataset(split)
    assert stock_count(dataset, batching) < len(dataset)
    train = split == "train"
    assert sorted(epoch_ids(task, dataset, batching, shuffle=train)) == list(range(len(dataset)))


def test_complete_batches_gives_back_the_batch_fairseq_drops():
    indices = np.random.RandomState(0).permutation(1341).astype(np.int64)
    sizes = np.full(1341, 10, dtype=np.int64)
    stock = data_utils.batch_by_size(indices, None, sizes, max_sentences=128, required_batch_size_multiple=8)
    assert sum(len(b) for b in stock) == 1336
    batches = complete_batches(indices, stock)
    assert [len(b) for b in batches] == [len(b) for b in stock] + [5]
    assert np.array_equal(np.concatenate(batches), indices)
    assert complete_batches(indices, batches) is batches  # nothing missing: unchanged


@pytest.mark.parametrize("context", [["--context-size", "2"], ["--context-size", "2", "--document-window", "0"],
                                     ["--context-size", "0"]], ids=["windows", "length-sorted", "sentence-level"])
@pytest.mark.parametrize("batching", BATCHINGS, ids=["bsz128", "bsz5", "tokens150"])
def test_context_translation_batches_every_sentence_once(tiny_data, context, batching):
    task = setup_task(tiny_data, "context_translation", context)
    for split in ("train", "valid", "test"):
        task.load_dataset(split)
        assert_every_example_once(task, split, batching)


@pytest.mark.parametrize("batching", [{"max_sentences": 5}, {"max_tokens": 100}], ids=["bsz5", "tokens100"])
def test_multimodal_translation_batches_every_sentence_once(multimodal_data, batching):
    task = setup_task(multimodal_data, "multimodal_translation",
                      ["--source-lang", "en", "--target-lang", "de", "--feature-inputs", "img",
                       "--extra-source-langs", "fr"])
    for split in ("train", "valid"):
        task.load_dataset(split)
        assert_every_example_once(task, split, batching)


@pytest.mark.parametrize("sampling", ["natural", "uniform"])
def test_multilingual_embedding_batches_every_row_of_every_pair_once(multilingual_data, sampling):
    task = setup_task(multilingual_data, "multilingual_embedding",
                      ["--lang-pairs", EMBEDDING_PAIRS, "--pair-sampling", sampling])
    for split in ("train", "valid"):
        task.load_dataset(split)
        dataset = task.dataset(split)
        batching = {"max_sentences": 6}
        ids = epoch_ids(task, dataset, batching, shuffle=split == "train")
        assert sorted(ids) == list(range(len(dataset)))
        per_pair = [dataset.index_map[:, 0] == p for p in range(len(task.pairs))]
        stock = sum(stock_count_subset(dataset, np.flatnonzero(chosen), batching) for chosen in per_pair)
        assert stock < len(dataset)


def stock_count_subset(dataset, indices: np.ndarray, batching: Dict) -> int:
    batches = data_utils.batch_by_size(indices, dataset.num_tokens, dataset.num_tokens_vec(indices),
                                       required_batch_size_multiple=8, **batching)
    return sum(len(b) for b in batches)


def test_two_training_shards_together_see_every_sentence_once(tiny_data):
    task = setup_task(tiny_data, "context_translation", [])
    task.load_dataset("train")
    dataset = task.dataset("train")
    ids = [i for shard in range(2) for i in epoch_ids(task, dataset, {"max_sentences": 16}, True, 2, shard)]
    assert sorted(ids) == list(range(len(dataset)))
