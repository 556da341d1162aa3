"""Cost of crash-safe checkpoint writes (``fairseq_ctx/core/fixes/atomic_checkpoint_writes.py``) against
fairseq's plain ones, for a checkpoint of the ``ct_mde`` thesis size (246M parameters).

Each variant does what fairseq's ``save_checkpoint`` does at a save: ``torch_persistent_save``
of the state to ``checkpoint_1_1000.pt``, then ``PathManager.copy`` to ``checkpoint_last.pt``;
"plain" with fairseq's own ``PathManager`` (rename without fsync, ``shutil.copyfile``), "atomic"
with the plugin's (fsync before the rename, copy through a fsynced temporary file and
``os.replace``). The state is synthetic float32 tensors of the given size (``--optimizer-state``
adds Adam's two moments, as in ``checkpoint_last.pt`` of a training run). Also timed: the
readability check (CRC of every archive entry) that a resume runs on ``checkpoint_last.pt``.
Training steps are not touched by either variant; this is the cost per save.

    python -m benchmarks.checkpoint_save [--parameters 246000000] [--repeats 3] [--optimizer-state] [--dir DIR]
"""
import argparse
import os
import shutil
import tempfile
import time
from typing import Dict, List


def synthetic_state(parameters: int, optimizer_state: bool) -> Dict:
    """A fairseq-like checkpoint: 'model' as 1M-parameter tensors, optionally Adam moments."""
    import torch

    chunk = 1_000_000
    sizes = [chunk] * (parameters // chunk) + ([parameters % chunk] if parameters % chunk else [])
    model = {f"layer{i}.weight": torch.randn(size) for i, size in enumerate(sizes)}
    state = {"model": model, "cfg": None, "optimizer_history": [{"num_updates": 1000}], "extra_state": {}}
    if optimizer_state:
        state["last_optimizer_state"] = {"state": {i: {"exp_avg": torch.zeros(s), "exp_avg_sq": torch.zeros(s)}
                                                   for i, s in enumerate(sizes)}}
    return state


def timed_save(state: Dict, directory: str, path_manager) -> float:
    from fairseq import checkpoint_utils

    checkpoint_utils.PathManager = path_manager
    first, last = os.path.join(directory, "checkpoint_1_1000.pt"), os.path.join(directory, "checkpoint_last.pt")
    os.sync()
    start = time.perf_counter()
    checkpoint_utils.torch_persistent_save(state, first)
    assert checkpoint_utils.PathManager.copy(first, last, overwrite=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parameters", type=int, default=246_000_000, help="ct_mde at thesis sizes: 246M")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--optimizer-state", action="store_true", help="also save Adam's two moments (3x the bytes)")
    parser.add_argument("--dir", help="directory to write in (default: a temporary one; use the disk you train on)")
    args = parser.parse_args()

    from fairseq import checkpoint_utils
    from fairseq.file_io import PathManager

    from fairseq_ctx.core.fixes.atomic_checkpoint_writes import AtomicCheckpointPathManager
    from fairseq_ctx.core.checkpoint_loading import damage

    installed = checkpoint_utils.PathManager
    state = synthetic_state(args.parameters, args.optimizer_state)
    variants = {"plain": PathManager, "atomic": AtomicCheckpointPathManager}
    times: Dict[str, List[float]] = {name: [] for name in variants}
    directory = tempfile.mkdtemp(prefix="checkpoint_save_", dir=args.dir)
    try:
        for repeat in range(args.repeats):
            order = list(variants) if repeat % 2 == 0 else list(reversed(variants))
            for name in order:
                times[name].append(timed_save(state, directory, variants[name]))
        last = os.path.join(directory, "checkpoint_last.pt")
        size = os.path.getsize(last)
        start = time.perf_counter()
        assert damage(last) is None
        check = time.perf_counter() - start
    finally:
        checkpoint_utils.PathManager = installed
        shutil.rmtree(directory)
    plain, atomic = min(times["plain"]), min(times["atomic"])
    print(f"checkpoint: {args.parameters / 1e6:.0f}M parameters, {size / 1e9:.2f} GB; save + copy to checkpoint_last.pt")
    for name in variants:
        print(f"{name:>7}: " + ", ".join(f"{t:.2f}" for t in times[name]) + f" s (best {min(times[name]):.2f} s)")
    print(f"atomic / plain = {atomic / plain:.2f} (best of {args.repeats})")
    print(f"resume check of checkpoint_last.pt (CRC of every entry): {check:.2f} s")


if __name__ == "__main__":
    main()
