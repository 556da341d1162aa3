"""Every architecture fairseq_ctx registers, the task it belongs to, and tiny model sizes and task
options to train each for a few updates with stock fairseq-train on the generated corpora (the
test suite's production-training matrix and ``benchmarks/gpu_fp16_check.py``); and the reader of
fairseq-train's per-update JSON log. New archs are picked up from fairseq's
``ARCH_MODEL_REGISTRY`` with the task their model class declares (``task_name``); an arch whose task
has no entry in ``TASK_FIXTURES`` is reported."""
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import fairseq_ctx

USER_DIR = os.path.dirname(os.path.abspath(fairseq_ctx.__file__))
EMBEDDING_PAIRS = "xa-pa,xa-pb,pa-pb,pb-pa"
TINY_MODEL = [
    "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
    "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
    "--encoder-layers", "2", "--decoder-layers", "1",
    "--encoder-attention-heads", "4", "--decoder-attention-heads", "4",
    "--share-all-embeddings",
]
TINY_TRANSFORMER = [
    "--encoder-embed-dim", "32", "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
    "--decoder-ffn-embed-dim", "64", "--encoder-attention-heads", "4", "--decoder-attention-heads", "4",
    "--encoder-layers", "3", "--dropout", "0.0",
]
TINY_LASER = ["--encoder-embed-dim", "32", "--encoder-hidden-size", "16", "--decoder-embed-dim", "32",
              "--decoder-hidden-size", "32", "--decoder-lang-embed-dim", "8", "--dropout", "0.0"]
EMBEDDING_SIZES = {
    "tmde": TINY_TRANSFORMER,
    "tmde_f": TINY_TRANSFORMER,
    "tmde_p": TINY_TRANSFORMER + ["--pyramid-queries", "8,4,2"],
    "laser_bilstm": TINY_LASER,
}
TINY_RNN = ["--encoder-embed-dim", "16", "--encoder-hidden-size", "16", "--decoder-embed-dim", "16",
            "--decoder-hidden-size", "24", "--attention-dim", "20"]


@dataclass
class TaskFixture:
    """How to train a task on tiny data: the name of its generated data-bin (the pytest fixture
    of the test suite) and the options."""
    data_fixture: str
    task_args: List[str]
    sizes: Dict[str, List[str]]
    default_size: List[str]

    def model_args(self, arch: str) -> List[str]:
        return list(self.sizes.get(arch, self.default_size))


TASK_FIXTURES = {
    "context_translation": TaskFixture(
        "tiny_data",
        ["--task", "context_translation", "--context-size", "2", "--criterion", "label_smoothed_cross_entropy",
         "--label-smoothing", "0.1"],
        {}, TINY_MODEL,
    ),
    "multilingual_embedding": TaskFixture(
        "multilingual_data",
        ["--task", "multilingual_embedding", "--lang-pairs", EMBEDDING_PAIRS, "--criterion", "distance_constraint",
         "--label-smoothing", "0.1"],
        EMBEDDING_SIZES, TINY_TRANSFORMER,
    ),
    "multimodal_translation": TaskFixture(
        "multimodal_data",
        ["--task", "multimodal_translation", "--feature-inputs", "img", "--source-lang", "en", "--target-lang", "de",
         "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1"],
        {"multisource_rnn": TINY_RNN}, TINY_MODEL,
    ),
}


def task_of(arch: str) -> Optional[str]:
    """The task the model class of ``arch`` declares (``task_name``), None when it declares none."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    return getattr(ARCH_MODEL_REGISTRY[arch], "task_name", None)


def plugin_archs() -> List[str]:
    """Every arch registered by fairseq_ctx (its model class lives in the package)."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    fairseq_ctx.register()
    return sorted(arch for arch, cls in ARCH_MODEL_REGISTRY.items() if cls.__module__.startswith("fairseq_ctx."))


def train_args(data: Path, task: str, arch: str, save_dir: Path, max_update: int, extra: Sequence[str] = ()) -> List[str]:
    """fairseq-train arguments for ``arch`` at its tiny size, logging every update as JSON."""
    fixture = TASK_FIXTURES[task]
    return [
        str(data), "--user-dir", USER_DIR, *fixture.task_args, "--arch", arch, *fixture.model_args(arch),
        "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "300", "--max-update", str(max_update),
        "--seed", "1", "--cpu", "--num-workers", "0", "--disable-validation", "--no-epoch-checkpoints",
        "--save-dir", str(save_dir), "--log-format", "json", "--log-interval", "1", *extra,
    ]


def per_update(log: str, key: str = "loss") -> Dict[int, float]:
    """{num_updates: value} from the train_inner lines of a ``--log-format json --log-interval 1`` log."""
    values = {}
    for line in log.splitlines():
        start_index = line.find('{"epoch"')
        if start_index < 0:
            continue
        record = json.loads(line[start_index:])
        if "train_num_updates" in record or key not in record or "num_updates" not in record:
            continue
        values[int(record["num_updates"])] = float(record[key])
    return values


def context_arch_options(arch: str, size: int) -> Tuple[List[str], List[str]]:
    """(options of both tools, options of fairseq-train) of ``arch`` at context size ``size``:
    focused concatenation reads as many previous target sentences as source ones (Lupo et al.,
    2022, sK-to-K) and trains with the discounted context loss."""
    if arch == "focused_concat":
        return ["--target-context-size", str(size)], ["--criterion", "context_discounted_cross_entropy"]
    return [], []
