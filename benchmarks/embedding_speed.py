"""Training words/s of tmde, tmde + distance_constraint and laser_bilstm (similar parameter
counts, same batches, one run), and embedding throughput / peak memory of the streaming embedder.

Target (issue 6): the distance constraint costs <= 15% of tmde's training speed (thesis: 35%).
Usage: python benchmarks/embedding_speed.py [--steps 30] [--lines 100000]
"""
import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from conftest import EMBEDDING_PAIRS, binarize_multilingual  # noqa: E402
from embedding_helpers import build_embedding_model  # noqa: E402

from fairseq_ctx.cli.embed import Embedder, embed_file  # noqa: E402
from fairseq_ctx.data.multilingual_corpus import MultilingualSizes, write_multilingual_corpus  # noqa: E402

TRANSFORMER = ["--encoder-embed-dim", "128", "--decoder-embed-dim", "128", "--encoder-ffn-embed-dim", "256",
               "--decoder-ffn-embed-dim", "256", "--encoder-attention-heads", "4", "--decoder-attention-heads", "4",
               "--encoder-layers", "3", "--dropout", "0.1"]
LASER = ["--encoder-embed-dim", "128", "--encoder-hidden-size", "128", "--decoder-embed-dim", "128",
         "--decoder-hidden-size", "192", "--decoder-lang-embed-dim", "16", "--dropout", "0.1"]

PLAIN = ["--criterion", "label_smoothed_cross_entropy"]


def train_wps(data: Path, arch: str, criterion_args, steps: int) -> tuple:
    size = LASER if arch == "laser_bilstm" else TRANSFORMER
    task, model, criterion = build_embedding_model(data, arch, criterion_args, size=size)
    task.load_dataset("train")
    dataset = task.datasets["train"]
    batches = [dataset.collater([dataset[i] for i in b])
               for b in dataset.batch_by_size(dataset.ordered_indices(), max_tokens=2000)[:steps + 3]]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    model.train()
    words, start = 0, None
    for step, sample in enumerate(batches):
        if step == 3:
            start, words = time.perf_counter(), 0
        optimizer.zero_grad()
        criterion(model, sample)[0].backward()
        optimizer.step()
        words += sample["ntokens"]
    return words / (time.perf_counter() - start), sum(p.numel() for p in model.parameters()), task, model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--lines", type=int, default=100000)
    args = parser.parse_args()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_multilingual_corpus(str(root / "raw"), MultilingualSizes(200, 10, 60), seed=3)
        data = binarize_multilingual(root / "raw", root / "data-bin", EMBEDDING_PAIRS.split(","), ["pa", "pb", "xa"])
        results = {}
        for name, arch, extra in [("tmde", "tmde", PLAIN),
                                  ("tmde + distance_constraint", "tmde", []),
                                  ("laser_bilstm", "laser_bilstm", PLAIN)]:
            results[name] = train_wps(data, arch, extra, args.steps)
        print("| model | params | train words/s | relative to tmde |\n|---|---|---|---|")
        base = results["tmde"][0]
        for name, (wps, params, _, _) in results.items():
            print(f"| {name} | {params / 1e6:.2f}M | {wps:.0f} | {wps / base:.2f} |")
        cost = 1 - results["tmde + distance_constraint"][0] / base
        print(f"distance-constraint cost: {100 * cost:.1f}% of tmde's speed (target <= 15%, thesis 35%)")

        _, _, task, model = results["tmde"]
        embedder = Embedder.from_model(model, task)
        sentences = (root / "raw" / "test.xa").read_text().splitlines()
        lines_path = root / "lines.txt"
        for count in (args.lines // 10, args.lines):
            with open(lines_path, "w") as handle:
                for i in range(count):
                    handle.write(sentences[i % len(sentences)] + "\n")
            rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            start = time.perf_counter()
            embed_file(embedder, str(lines_path), str(root / "out.npy"), max_tokens=12000, chunk_lines=20000)
            seconds = time.perf_counter() - start
            rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"embed {count} lines: {count / seconds:.0f} sentences/s, peak RSS {rss_after:.0f} MB "
                  f"(+{rss_after - rss_before:.0f} MB during this run)")


if __name__ == "__main__":
    main()
