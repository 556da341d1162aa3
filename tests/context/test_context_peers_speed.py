"""benchmarks/context_peers_speed.py: the activation memory it reports counts what a training
forward keeps for backward (parameters excluded), and shows the property the caching models
were made for: concatenation's memory grows with the context far faster than a cached sentence's."""
import pytest
from fairseq import tasks

from benchmarks.context_peers_speed import activation_bytes
from benchmarks.context_speed import Setting, build_data, fairseq_cfg, fixed_batches, parse_cli


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("peers")
    build_data(root, seed=1, train_sentences=200, test_sentences=16, per_line=2)
    return root / "data-bin"


@pytest.fixture(scope="module")
def args():
    return parse_cli(["--size", "medium", "--batch-size", "8"])


def test_activation_memory_excludes_parameters_and_grows_with_the_context(data, args):
    memory = {(arch, n): activation_bytes(data, Setting(arch, n), args)
              for arch, n in [("transformer", 0), ("ctx_concat", 2), ("ctx_concat", 8), ("caching_sentence", 2),
                              ("caching_sentence", 8)]}
    assert 0 < memory[("transformer", 0)] < memory[("ctx_concat", 2)] < memory[("ctx_concat", 8)]
    per_token = [activation_bytes(data, Setting("transformer", 0), batch) / padded_tokens(data, batch)
                 for batch in (parse_cli(["--size", "medium", "--batch-size", b]) for b in ("8", "32"))]
    assert per_token[1] == pytest.approx(per_token[0], rel=0.05), "activations scale with the batch, weights would not"


def padded_tokens(data, args) -> int:
    """Padded source positions of the first training batch (as many as the target's in this corpus)."""
    cfg = fairseq_cfg(data, Setting("transformer", 0), args)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    sample = fixed_batches(task, task.build_model(cfg.model), cfg, "train", 1, shuffle=True)[0]
    return sample["net_input"]["src_tokens"].numel()
    concat_growth = memory[("ctx_concat", 8)] / memory[("ctx_concat", 2)]
    cached_growth = memory[("caching_sentence", 8)] / memory[("caching_sentence", 2)]
    assert concat_growth > 1.5 and cached_growth < 1.2, (concat_growth, cached_growth)
