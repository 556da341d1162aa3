"""Every example of a split is batched — generated, scored, validated and trained on — whatever
--batch-size / --max-tokens / --required-batch-size-multiple. Stock fairseq drops the last batch
when its size is not a multiple of --required-batch-size-multiple (default 8; fairseq #5036);
the splits here end in such batches, and each case first checks that stock fairseq would have
dropped sentences."""
import re
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import pytest
from fairseq import options, tasks
from fairseq.data import data_utils
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from devtools.in_process_tools import call_tool
from tests.helpers import EMBEDDING_PAIRS, TINY_MODEL, USER_DIR
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


def stock_count(dataset, batching: Dict, indices: Optional[np.ndarray] = None) -> int:
    """Examples stock fairseq's batch_by_size keeps (the bug this module guards against)."""
    indices = dataset.ordered_indices() if indices is None else indices
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
        assert sum(stock_count(dataset, batching, np.flatnonzero(chosen)) for chosen in per_pair) < len(dataset)


def test_two_training_shards_together_see_every_sentence_once(tiny_data):
    task = setup_task(tiny_data, "context_translation", [])
    task.load_dataset("train")
    dataset = task.dataset("train")
    ids = [i for shard in range(2) for i in epoch_ids(task, dataset, {"max_sentences": 16}, True, 2, shard)]
    assert sorted(ids) == list(range(len(dataset)))


def train_one_update(data: Path, save_dir: Path, task_args: List[str], model_args: List[str]) -> Path:
    call_tool("fairseq-train", [
        str(data), "--user-dir", USER_DIR, *task_args, *model_args, "--cpu", "--optimizer", "adam", "--lr", "1e-3",
        "--max-tokens", "500", "--max-update", "1", "--seed", "1", "--save-dir", str(save_dir),
        "--no-epoch-checkpoints", "--disable-validation", "--log-format", "none",
    ])
    return save_dir / "checkpoint_last.pt"


MODELS = {
    "hmce": (["--task", "context_translation"], ["--arch", "hmce", *TINY_MODEL]),
    "sentence-level": (["--task", "context_translation", "--context-size", "0"],
                       ["--arch", "transformer", *TINY_MODEL]),
    "multimodal": (["--task", "multimodal_translation", "--source-lang", "en", "--target-lang", "de",
                    "--feature-inputs", "img"], ["--arch", "hierarchical_attention_decoder", *TINY_MODEL]),
}


@pytest.fixture(scope="module")
def checkpoints(tiny_data, multimodal_data, tmp_path_factory) -> Dict[str, tuple]:
    work = tmp_path_factory.mktemp("nothing-skipped")
    runs = {}
    for name, (task_args, model_args) in MODELS.items():
        data = multimodal_data if name == "multimodal" else tiny_data
        runs[name] = (data, task_args, train_one_update(data, work / name, task_args, model_args))
    return runs


GENERATE_BATCHINGS = {"default": [], "bsz128": ["--batch-size", "128"], "bsz5": ["--batch-size", "5"],
                      "tokens150": ["--max-tokens", "150"]}
GENERATE_CASES = [("hmce", name) for name in GENERATE_BATCHINGS] + [
    ("sentence-level", "default"), ("sentence-level", "bsz5"), ("multimodal", "bsz5"), ("multimodal", "tokens150")]


@pytest.mark.parametrize("model,batching", GENERATE_CASES, ids=[f"{m}-{b}" for m, b in GENERATE_CASES])
def test_fairseq_generate_translates_every_sentence_of_the_split(checkpoints, model, batching, tmp_path):
    data, task_args, checkpoint = checkpoints[model]
    split = "test"  # 45 sentences (tiny_data), 16 (multimodal_data)
    count = len((data / f"{split}.{'key' if model == 'multimodal' else 'docids'}").read_text().splitlines())
    call_tool("fairseq-generate", [
        str(data), "--user-dir", USER_DIR, *task_args, "--cpu", "--path", str(checkpoint), "--gen-subset", split,
        "--beam", "1", "--max-len-b", "5", "--results-path", str(tmp_path), *GENERATE_BATCHINGS[batching],
    ])
    hypotheses = re.findall(r"^H-(\d+)\t", (tmp_path / f"generate-{split}.txt").read_text(), flags=re.M)
    assert sorted(int(i) for i in hypotheses) == list(range(count))


def test_tools_score_and_translate_every_sentence(checkpoints, tmp_path):
    """fairseq-ctx-cxmi scores every sentence of the split; the hub translates every line."""
    from fairseq_ctx.context.cxmi import cxmi
    from fairseq_ctx.context import hub

    data, _, checkpoint = checkpoints["hmce"]
    translator = hub.load(str(checkpoint), data=str(data), cpu=True, beam=1, max_len_b=5)
    count = len((data / "test.docids").read_text().splitlines())
    result = cxmi(translator, "test", batch_size=5)
    assert result["sentences"] == count and [row[0] for row in result["per_sentence"]] == list(range(count))
    lines = ["the cat sleeps .", "it is quiet .", "", "the old dog runs .", "it is fast ."] * 3
    assert len(list(translator.translate_stream(lines, batch_size=4))) == len(lines)


def test_fairseq_train_epoch_trains_on_every_sentence(tiny_data, tmp_path, caplog):
    """331 training sentences, --batch-size 128: stock fairseq makes batches of 128, 128, 72 and
    drops the last 3 sentences; here the epoch has 4 updates over all 331."""
    with caplog.at_level("INFO"):
        call_tool("fairseq-train", [
            str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation", "--arch", "hmce", *TINY_MODEL,
            "--cpu", "--optimizer", "adam", "--lr", "1e-3", "--batch-size", "128", "--max-epoch", "1", "--seed", "1",
            "--save-dir", str(tmp_path), "--no-save", "--disable-validation", "--log-format", "json",
        ])
    summary = next(r.getMessage() for r in caplog.records if '"train_num_updates"' in r.getMessage())
    updates = int(re.search(r'"train_num_updates": "(\d+)"', summary).group(1))
    sentences_per_update = float(re.search(r'"train_bsz": "([\d.]+)"', summary).group(1))
    assert updates == 4 and sentences_per_update * updates == pytest.approx(331, abs=0.2)
