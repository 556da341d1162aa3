"""Reproduction 1 (SPEC §3, Yun 2022 §5.3.1): CKA as a modality-alignment objective on synthetic data.

Data: 10,000 samples of class A from one 64-d Gaussian, 10,000 of class B from a mixture of four
64-d Gaussians, paired 1:1 at random. Two encoders (weights not shared) of 3 FC layers, hidden 32,
ReLU + BatchNorm, the output normalised by a BatchNorm without affine parameters (otherwise the
cosine objective is maximised trivially by a constant output); batch 512, Adam lr 1e-3, λ = 0.1. Three runs from the same initialisation:
``cosine`` maximises the mean cosine similarity of the pairs; ``cka`` maximises linear CKA of the
batch; ``both`` warms up on CKA alone, then maximises cosine + λ·CKA. Every ``--eval-every`` steps the
mean cosine similarity and CKA on the whole data set (eval mode) are recorded.

Writes ``<out>.csv`` (curves), ``<out>_summary.md`` (initial/final values) and ``<out>.png``.
"""
import argparse
import csv
import logging
from pathlib import Path
from typing import Dict, List

import torch
from torch import nn

from fairseq_ctx.modules.cka import cka

DIM, HIDDEN, SAMPLES = 64, 32, 10_000


def make_data(seed: int):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(SAMPLES, DIM, generator=g)
    means = 3.0 * torch.randn(4, DIM, generator=g)
    component = torch.randint(0, 4, (SAMPLES,), generator=g)
    b = means[component] + torch.randn(SAMPLES, DIM, generator=g)
    return a, b[torch.randperm(SAMPLES, generator=g)]


def encoder() -> nn.Module:
    return nn.Sequential(nn.Linear(DIM, HIDDEN), nn.BatchNorm1d(HIDDEN), nn.ReLU(),
                         nn.Linear(HIDDEN, HIDDEN), nn.BatchNorm1d(HIDDEN), nn.ReLU(),
                         nn.Linear(HIDDEN, HIDDEN), nn.BatchNorm1d(HIDDEN, affine=False))


def evaluate(enc_a, enc_b, a, b) -> Dict[str, float]:
    enc_a.eval(), enc_b.eval()
    with torch.no_grad():
        x, y = enc_a(a), enc_b(b)
        result = {"cosine": nn.functional.cosine_similarity(x, y).mean().item(), "cka": cka(x, y).item()}
    enc_a.train(), enc_b.train()
    return result


def run(mode: str, a, b, args) -> List[Dict[str, float]]:
    torch.manual_seed(args.seed)
    enc_a, enc_b = encoder(), encoder()
    optimizer = torch.optim.Adam(list(enc_a.parameters()) + list(enc_b.parameters()), lr=args.lr)
    order = torch.Generator().manual_seed(args.seed)
    curve = [{"step": 0, **evaluate(enc_a, enc_b, a, b)}]
    step = 0
    while step < args.steps:
        for idx in torch.randperm(SAMPLES, generator=order).split(args.batch_size):
            if len(idx) < 2 or step >= args.steps:
                continue
            x, y = enc_a(a[idx]), enc_b(b[idx])
            cosine = nn.functional.cosine_similarity(x, y).mean()
            alignment = cka(x, y)
            if mode == "cosine":
                loss = -cosine
            elif mode == "cka" or step < args.warmup:
                loss = -alignment
            else:
                loss = -cosine - args.lam * alignment
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % args.eval_every == 0:
                curve.append({"step": step, **evaluate(enc_a, enc_b, a, b)})
    return curve


def plot(curves: Dict[str, List[Dict[str, float]]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for mode, curve in curves.items():
        steps = [p["step"] for p in curve]
        for ax, key in zip(axes, ("cosine", "cka")):
            ax.plot(steps, [p[key] for p in curve], label=mode)
    for ax, title in zip(axes, ("mean cosine similarity", "linear CKA")):
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=100, help="CKA-only steps of the 'both' run")
    parser.add_argument("--lam", type=float, default=0.1)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--eval-every", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "synthetic_alignment"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    a, b = make_data(args.seed)
    curves = {mode: run(mode, a, b, args) for mode in ("cosine", "cka", "both")}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(f"{args.out}.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["run", "step", "cosine", "cka"])
        for mode, curve in curves.items():
            writer.writerows([mode, p["step"], round(p["cosine"], 4), round(p["cka"], 4)] for p in curve)
    lines = ["| run | initial cosine | final cosine | initial CKA | final CKA |", "|---|---|---|---|---|"]
    for mode, curve in curves.items():
        lines.append(f"| {mode} | {curve[0]['cosine']:.3f} | {curve[-1]['cosine']:.3f} | "
                     f"{curve[0]['cka']:.3f} | {curve[-1]['cka']:.3f} |")
    Path(f"{args.out}_summary.md").write_text("\n".join(lines) + "\n")
    plot(curves, f"{args.out}.png")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
