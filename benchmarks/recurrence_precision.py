"""Forward + backward time of the LASER recurrences (Artetxe & Schwenk 2019: a BiLSTM encoder of
512 units per direction over 320-dim embeddings, an LSTM decoder of 2048 units fed 320 + 1024 + 32
dims) under CPU bfloat16 autocast (oneDNN's bfloat16 LSTM) against float32 inside the same autocast
region (:mod:`fairseq_ctx.embedding.float32_recurrence`), steps interleaved in one run. Prints each
median and the ratio bfloat16 / float32 time (below 1: the bfloat16 LSTM is faster). Needs a CPU
with native bfloat16 products: without them oneDNN has no bfloat16 LSTM at all.

    python -m benchmarks.recurrence_precision --threads 1 --steps 10
"""
import argparse
import statistics
import time
from typing import Dict, List

import torch

from fairseq_ctx.core.mixed_precision import native_bfloat16


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per precision (after one warm-up step)")
    parser.add_argument("--sentences", type=int, default=32, help="sentences per batch")
    parser.add_argument("--length", type=int, default=30, help="tokens per sentence")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if not native_bfloat16():
        raise SystemExit("this CPU has no native bfloat16 products: oneDNN builds no bfloat16 LSTM here")
    encoder = torch.nn.LSTM(320, 512, bidirectional=True)
    decoder = torch.nn.LSTM(320 + 1024 + 32, 2048)
    source = torch.randn(args.length, args.sentences, 320)
    target = torch.randn(args.length, args.sentences, 320 + 1024 + 32)
    times: Dict[str, List[float]] = {"bfloat16": [], "float32": []}
    for step in range(args.steps + 1):
        for precision in times:
            start = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16"):
                loss = encoder(source)[0].float().sum() + decoder(target)[0].float().sum()
            loss.backward()
            if step:
                times[precision].append(time.perf_counter() - start)
    medians = {precision: statistics.median(values) for precision, values in times.items()}
    print(f"{args.threads} thread(s); batch {args.sentences} x {args.length}; {args.steps} steps each, interleaved")
    for precision, median in medians.items():
        print(f"{precision}: median {median * 1000:.1f} ms")
    print(f"bfloat16 / float32 time: {medians['bfloat16'] / medians['float32']:.2f}")


if __name__ == "__main__":
    main()
