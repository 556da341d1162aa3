"""Collation time of multimodal batches against text-only ones (issue: image features at the
model's speed).

A batch of the ``multimodal_translation`` task is what a fairseq loader builds: ``dataset[i]`` for
each sentence, then the dataset's ``collater``. Timed here for the same batches three ways: the
text pair alone (what ``--task translation`` collates), and with the image features of every
sentence stored as float16 and as float32 (``{split}.img.npy``, memory-mapped). The features have
the shape of ResNet-50 res4f grids (196 regions × 2048 dims, Libovický (2019), ch. 5) unless
``--regions``/``--dim`` say otherwise.

Batches take turns (text, float16, float32 on every batch, after one untimed pass that brings the
files into the page cache, as in every epoch after the first), and each time is this process's CPU
time (``--clock cpu``, robust on a shared machine) or wall time. Printed: the median milliseconds
per batch of each, the ratio of each multimodal collation to the text-only one (target: <= 2) and
the bytes a batch's features take; for reference, the former collation (each sentence's row
converted to float32 on its own, the rows then stacked) on the float16 file.

Usage: python -m benchmarks.multimodal_collation [--sentences 48] [--batches 10] [--regions 196]
[--dim 2048] [--passes 3] [--clock cpu] [--json DIR/multimodal_collation.json]
"""
import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import torch

from benchmarks.quiet import quiet_libraries
from devtools.machine_facts import this_machine, utc_now
from devtools.results_file import results_page, script_command, write_results

STORAGES = ("float16", "float32")


def parse_cli(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=48, help="sentences per batch")
    parser.add_argument("--batches", type=int, default=10, help="distinct batches per pass")
    parser.add_argument("--passes", type=int, default=3, help="timed passes over the batches")
    parser.add_argument("--regions", type=int, default=196, help="feature regions per image")
    parser.add_argument("--dim", type=int, default=2048, help="feature dimension")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", metavar="PATH", help="also write DIR/multimodal_collation.{md,json}")
    args = parser.parse_args(argv)
    if min(args.sentences, args.batches, args.passes, args.regions, args.dim) < 1:
        parser.error("--sentences, --batches, --passes, --regions and --dim must be at least 1")
    return args


def build_data(root: Path, args: argparse.Namespace) -> Dict[str, Path]:
    """The generated multimodal corpus binarised once, with its training features as float16 (the
    generator's) and, in a second directory, the same values as float32."""
    from fairseq_ctx.multisource.demo.multimodal_binarize import binarize_multimodal_corpus
    from fairseq_ctx.multisource.demo.multimodal_corpus import MultimodalCorpusSizes

    sizes = MultimodalCorpusSizes(train=args.sentences * args.batches, valid=8, test=8, regions=args.regions,
                                  feature_dim=args.dim)
    half = binarize_multimodal_corpus(root / "float16", sizes, seed=args.seed)
    single = root / "float32" / "data-bin"
    shutil.copytree(half, single)
    features = np.load(half / "train.img.npy", mmap_mode="r")
    np.save(single / "train.img.npy", np.asarray(features, dtype=np.float32))
    return {"float16": half, "float32": single}


def training_dataset(data_bin: Path):
    """The ``multimodal_translation`` training split with the image input, as fairseq-train loads it."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    import fairseq_ctx
    fairseq_ctx.register()
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, input_args=[
        str(data_bin), "--user-dir", os.path.dirname(fairseq_ctx.__file__), "--task", "multimodal_translation",
        "--arch", "hierarchical_attention_decoder", "--source-lang", "en", "--target-lang", "de",
        "--feature-inputs", "img", "--cpu"])
    task = tasks.setup_task(convert_namespace_to_omegaconf(args).task)
    task.load_dataset("train")
    return task.datasets["train"]


def collate(dataset, indices: List[int]) -> dict:
    return dataset.collater([dataset[i] for i in indices])


def collate_row_by_row(dataset, indices: List[int]) -> dict:
    """The former collation, for reference: each sentence's row converted to float32 on its own,
    then the rows stacked."""
    batch = dataset.pair.collater([dataset.pair[i] for i in indices])
    features = dataset.features["img"]
    batch["net_input"]["aux_inputs"] = {"img": torch.stack([
        torch.from_numpy(np.asarray(features.array[features.row_of[i]], dtype=np.float32)).view(
            features.regions, features.dim) for i in batch["id"].tolist()])}
    return batch


def median_ms(times: List[float]) -> float:
    return 1000 * statistics.median(times)


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_cli(argv)
    quiet_libraries()
    clock: Callable[[], float] = time.process_time if args.clock == "cpu" else time.perf_counter
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="multimodal_collation_") as root:
        data = build_data(Path(root), args)
        datasets = {storage: training_dataset(data[storage]) for storage in STORAGES}
        datasets = {"text": datasets["float16"].pair, **datasets}
        collaters = {name: collate for name in datasets}
        datasets["float16, row by row"], collaters["float16, row by row"] = datasets["float16"], collate_row_by_row
        order = np.random.default_rng(args.seed).permutation(args.sentences * args.batches).tolist()
        batches = [order[b * args.sentences:(b + 1) * args.sentences] for b in range(args.batches)]
        times: Dict[str, List[float]] = {name: [] for name in datasets}
        feature_bytes = {storage: collate(datasets[storage], batches[0])["net_input"]["aux_inputs"]["img"].nbytes
                         for storage in STORAGES}
        for indices in batches:  # untimed: the page cache, as after the first epoch
            for name, dataset in datasets.items():
                collaters[name](dataset, indices)
        for _ in range(args.passes):
            for indices in batches:
                for name, dataset in datasets.items():
                    begin = clock()
                    collaters[name](dataset, indices)
                    times[name].append(clock() - begin)
    seconds = time.perf_counter() - started
    medians = {name: median_ms(values) for name, values in times.items()}
    ratios = {storage: medians[storage] / medians["text"] for storage in STORAGES}
    lines = [
        f"{args.batches} batches of {args.sentences} sentences, {args.passes} timed passes; image features "
        f"{args.regions} x {args.dim} per sentence; {args.clock} clock",
        "",
        f"{'collation':<22}{'ms / batch':>12}{'/ text-only':>13}{'feature MB':>12}",
        f"{'text only':<22}{medians['text']:>12.2f}{1.0:>13.2f}{0.0:>12.1f}",
        *(f"{'+ features ' + storage:<22}{medians[storage]:>12.2f}{ratios[storage]:>13.2f}"
          f"{feature_bytes[storage] / 2**20:>12.1f}" for storage in STORAGES),
        f"{'+ float16 row by row':<22}{medians['float16, row by row']:>12.2f}"
        f"{medians['float16, row by row'] / medians['text']:>13.2f}{feature_bytes['float32'] / 2**20:>12.1f}"
        f"   (the former collation: each row converted to float32, then stacked)",
        f"one gather of float16 rows / the former collation: {medians['float16'] / medians['float16, row by row']:.3f}",
        "",
        "target: collation with features <= 2x text-only: "
        + ", ".join(f"{storage} {'met' if ratios[storage] <= 2 else 'not met'}" for storage in STORAGES),
        f"total time: {seconds:.0f} s",
    ]
    print("\n".join(lines))
    if args.json:
        facts = {"date": utc_now(), "machine": this_machine(1).describe(), "precision": "float16 and float32 storage",
                 "seed": f"{args.seed} (generated corpus and features, batch order)",
                 "updates": "none (collation only)", "wall time": f"{seconds:.0f} s",
                 "command": script_command("benchmarks/multimodal_collation.py", argv)}
        record = {**facts, "settings": {k: v for k, v in vars(args).items() if k != "json"},
                  "median_ms": medians, "ratio_to_text": ratios, "feature_bytes": feature_bytes,
                  "times_s": times}
        write_results(str(Path(args.json).parent), "multimodal_collation",
                      results_page("Collation of multimodal batches against text-only ones", facts,
                                   ["```", *lines, "```"]), record)


if __name__ == "__main__":
    main()
