"""The suite's settings (one thread per process, the precision probe's branch) and its shared
fixtures: generated corpora binarized with stock fairseq-preprocess, and models trained once per
run. The helpers the tests import are in tests/helpers.py."""
import os
from collections import Counter
from pathlib import Path
from typing import List

import pytest
import torch

from fairseq_ctx.core.mixed_precision import NATIVE_BFLOAT16_ENV
from tests.helpers import (BASELINE_ARCHS, EMBEDDING_PAIRS, CorpusSizes, make_data_bin, make_multimodal_data_bin,
                           shared_by_the_workers, train_baselines)

# The models under test are tiny: a second intra-op thread buys little, and on a shared or
# busy machine two spinning OpenMP threads per process slow everything down many times over.
# One thread here and in every tool the tests start (they inherit the environment).
os.environ["OMP_NUM_THREADS"] = "1"
# Every precision decision (recipes' --precision auto, the --amp warning, float32 recurrences) takes
# the branch of a CPU without native bfloat16 products, whatever CPU runs the suite: that branch runs
# on every CPU, and the tests of the other branch force the probe themselves. Set it to 1 before
# `make test` on a CPU with AVX512-BF16 or AMX to run the whole suite in the other branch.
os.environ.setdefault(NATIVE_BFLOAT16_ENV, "0")
os.environ["MKL_NUM_THREADS"] = "1"
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    """About 300 training sentences in 40 documents."""
    return make_data_bin(tmp_path_factory.mktemp("tiny"), CorpusSizes(train=40, valid=6, test=6))


@pytest.fixture(scope="session")
def multilingual_data(tmp_path_factory) -> Path:
    """Three generated languages (xa → pivots pa, pb; pa ↔ pb), about 400 training sentences."""
    from fairseq_ctx.embedding.data.multilingual_binarize import binarize_multilingual
    from fairseq_ctx.embedding.demo.multilingual_corpus import MultilingualSizes, write_multilingual_corpus

    root = tmp_path_factory.mktemp("multilingual")
    write_multilingual_corpus(str(root / "raw"), MultilingualSizes(100, 10, 20), seed=3)
    return binarize_multilingual(root / "raw", root / "data-bin", EMBEDDING_PAIRS.split(","), ["pa", "pb", "xa"])


@pytest.fixture(scope="session")
def trained_baselines(tiny_data, tmp_path_factory):
    """Each context baseline (and a --context-size 0 transformer) trained 30 updates with stock
    fairseq-train and decoded with stock fairseq-generate, once per run (every worker generates the
    same tiny_data); {arch: (checkpoint_dir, generate text)}."""
    archs = [*BASELINE_ARCHS, "transformer"]
    with shared_by_the_workers(tmp_path_factory, "baselines") as (work, fill):
        if fill:
            train_baselines(tiny_data, work, archs)
    return {arch: (work / arch, (work / f"gen-{arch}" / "generate-test.txt").read_text()) for arch in archs}


@pytest.fixture(scope="session")
def multimodal_data(tmp_path_factory) -> Path:
    """About 240 training sentences with (n, 3, 8) image features and a French second source."""
    return make_multimodal_data_bin(tmp_path_factory.mktemp("multimodal"))


@pytest.fixture(autouse=True)
def restore_library_log_levels():
    """A tool run in-process sets the libraries' loggers to WARNING (cli.tool_logging); a later
    test reading fairseq's INFO lines with caplog needs them as they were."""
    from devtools.in_process_tools import restored_logging

    with restored_logging():
        yield


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
    """Order the modules as ``--dist loadfile`` should hand them out (``make test`` turns xdist's own
    reordering off with ``--no-loadscope-reorder``): the modules marked ``heavy`` first, then the
    others with the most tests first (xdist's default order). A long module handed out last runs
    alone on one worker at the end while the other worker idles; started first, the short modules
    fill in around it."""
    tests_per_module = Counter(item.path for item in items)
    first_index = {}
    for index, item in enumerate(items):
        first_index.setdefault(item.path, index)

    def rank(item: pytest.Item):
        return item.get_closest_marker("heavy") is None, -tests_per_module[item.path], first_index[item.path]

    items.sort(key=rank)
