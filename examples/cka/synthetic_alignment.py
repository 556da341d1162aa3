"""Reproduction 1 (Yun 2022 §5.3.1): CKA as a modality-alignment objective on synthetic data.

Set-up as the thesis states it (§5.3.1 "Experiment settings"):
- data: 10,000 class-A samples from one 64-d normal distribution, 10,000 class-B samples from a
  mixture of four 64-d normals (random means and per-component scales), paired 1:1 at random;
- two encoders with the same architecture, weights not shared: three fully-connected layers of
  hidden size 32, *each* followed by ReLU and BatchNorm (affine, PyTorch defaults);
- mini-batch 512 (reshuffled every epoch), Adam lr 1e-3, betas (0.9, 0.999), λ_cka = 0.1;
- runs: (a) ``cosine``: maximise the mean cosine similarity of the pairs; (b) ``cka``: maximise
  linear CKA of the mini-batch; (c) ``both``: CKA alone for ``--warmup`` steps ("a few steps"),
  then L = −cos − λ·CKA (eq. 5.4);
- length: 10 epochs (the thesis shows t-SNE after 1, 5 and 10 epochs);
- curves: the thesis plots "training curves" of cosine and CKA over steps, i.e. the values of the
  training mini-batch (n = 512, train mode) at each step. These are recorded (``batch_*``), and,
  once per epoch, the evaluation criterion of the thesis — the mean cosine over all 10,000 pairs —
  with the CKA over all pairs, in eval mode (``full_*``).
All runs of one seed start from the same initialisation and see the same batches; the summary
averages ``--seeds`` seeds. Writes ``<out>.csv`` (curves of the first seed), ``<out>_summary.md``
(initial/final values, mean ± sd over seeds) and ``<out>.png``.
"""
import argparse
import csv
import statistics
from pathlib import Path
from typing import Dict, List

import torch
from torch import nn

from devtools.results_file import script_command
from devtools.recipe_report import facts_lines

from fairseq_ctx.analysis.cka import cka
from fairseq_ctx.core.plots import PlotsUnavailableError, pyplot, require_plots

DIM, HIDDEN, SAMPLES, COMPONENTS = 64, 32, 10_000, 4
MODES = ("cosine", "cka", "both")


def make_data(seed: int):
    """Class A ~ N(0, I); class B ~ mixture of four normals; rows paired by a random permutation."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(SAMPLES, DIM, generator=g)
    means = 3.0 * torch.randn(COMPONENTS, DIM, generator=g)
    scales = 0.5 + torch.rand(COMPONENTS, 1, generator=g)
    component = torch.randint(0, COMPONENTS, (SAMPLES,), generator=g)
    b = means[component] + scales[component] * torch.randn(SAMPLES, DIM, generator=g)
    return a, b[torch.randperm(SAMPLES, generator=g)]


def encoder() -> nn.Module:
    layers: List[nn.Module] = []
    for in_dim in (DIM, HIDDEN, HIDDEN):
        layers += [nn.Linear(in_dim, HIDDEN), nn.ReLU(), nn.BatchNorm1d(HIDDEN)]
    return nn.Sequential(*layers)


def measure(x: torch.Tensor, y: torch.Tensor) -> Dict[str, float]:
    return {"cosine": nn.functional.cosine_similarity(x, y).mean().item(), "cka": cka(x, y).item()}


def evaluate(enc_a, enc_b, a, b) -> Dict[str, float]:
    enc_a.eval(), enc_b.eval()
    with torch.no_grad():
        result = measure(enc_a(a), enc_b(b))
    enc_a.train(), enc_b.train()
    return result


def run(mode: str, a, b, seed: int, args) -> Dict[str, List[Dict[str, float]]]:
    """One training run; returns per-step batch values and per-epoch full-data values."""
    torch.manual_seed(seed)
    enc_a, enc_b = encoder(), encoder()
    optimizer = torch.optim.Adam(list(enc_a.parameters()) + list(enc_b.parameters()), lr=args.lr,
                                 betas=(0.9, 0.999))
    order = torch.Generator().manual_seed(seed)
    batch_curve: List[Dict[str, float]] = []
    full_curve = [{"step": 0, **evaluate(enc_a, enc_b, a, b)}]
    step = 0
    for _ in range(args.epochs):
        for idx in torch.randperm(SAMPLES, generator=order).split(args.batch_size):
            x, y = enc_a(a[idx]), enc_b(b[idx])
            cosine = nn.functional.cosine_similarity(x, y).mean()
            alignment = cka(x, y)
            batch_curve.append({"step": step, "cosine": cosine.item(), "cka": alignment.item()})
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
        full_curve.append({"step": step, **evaluate(enc_a, enc_b, a, b)})
    return {"batch": batch_curve, "full": full_curve}


def smooth(values: List[float], window: int) -> List[float]:
    return [statistics.fmean(values[max(0, i - window + 1): i + 1]) for i in range(len(values))]


def plot(curves: Dict[str, Dict[str, List[Dict[str, float]]]], path: str) -> None:
    plt = pyplot()

    fig, axes = plt.subplots(2, 2, figsize=(9, 6), sharex=True)
    for mode, curve in curves.items():
        for col, key in enumerate(("cosine", "cka")):
            batch = curve["batch"]
            axes[0, col].plot([p["step"] for p in batch], [p[key] for p in batch], label=mode)
            full = curve["full"]
            axes[1, col].plot([p["step"] for p in full], [p[key] for p in full], marker="o", label=mode)
    titles = [["training mini-batch: mean cosine", "training mini-batch: linear CKA (n=512)"],
              ["all 10,000 pairs: mean cosine", "all 10,000 pairs: linear CKA"]]
    for row in range(2):
        for col in range(2):
            axes[row, col].set_title(titles[row][col], fontsize=9)
            axes[row, col].legend(fontsize=8)
            axes[1, col].set_xlabel("step")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def endpoints(curve: Dict[str, List[Dict[str, float]]], last: int) -> Dict[str, float]:
    """Initial and final values; batch values are averaged over the first/last ``last`` steps."""
    batch, full = curve["batch"], curve["full"]
    out = {}
    for key in ("cosine", "cka"):
        out[f"batch_{key}_initial"] = batch[0][key]
        out[f"batch_{key}_final"] = statistics.fmean(p[key] for p in batch[-last:])
        out[f"full_{key}_initial"] = full[0][key]
        out[f"full_{key}_final"] = full[-1][key]
    return out


def summary_table(per_seed: Dict[str, List[Dict[str, float]]], seeds: int, last: int) -> List[str]:
    columns = [("batch_cosine_initial", "batch cos start"), ("batch_cosine_final", "batch cos end"),
               ("batch_cka_initial", "batch CKA start"), ("batch_cka_final", "batch CKA end"),
               ("full_cosine_final", "all-pairs cos end"), ("full_cka_initial", "all-pairs CKA start"),
               ("full_cka_final", "all-pairs CKA end")]
    lines = [f"Mean ± sd over {seeds} seeds; 'end' batch values = mean of the last {last} steps.", "",
             "| run | " + " | ".join(title for _, title in columns) + " |",
             "|---|" + "---|" * len(columns)]
    for mode, rows in per_seed.items():
        cells = []
        for key, _ in columns:
            values = [r[key] for r in rows]
            sd = statistics.stdev(values) if len(values) > 1 else 0.0
            cells.append(f"{statistics.fmean(values):.3f} ± {sd:.3f}")
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    gaps = [both["full_cosine_final"] - cosine["full_cosine_final"]
            for both, cosine in zip(per_seed["both"], per_seed["cosine"])]
    lines += ["", "Final all-pairs cosine, both − cosine, per seed: "
              + ", ".join(f"{gap:+.3f}" for gap in gaps) + f" (mean {statistics.fmean(gaps):+.3f})"]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=10, help="CKA-only steps of the 'both' run")
    parser.add_argument("--lam", type=float, default=0.1)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--seeds", type=int, default=5, help="seeds 1..N (data, initialisation, batch order)")
    parser.add_argument("--last", type=int, default=20, help="steps averaged for the final batch values")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "synthetic_alignment"))
    args = parser.parse_args()
    try:
        require_plots("synthetic_alignment.py (its curves)")
    except PlotsUnavailableError as err:
        raise SystemExit(f"synthetic_alignment.py: {err}")
    torch.set_num_threads(1)
    per_seed: Dict[str, List[Dict[str, float]]] = {mode: [] for mode in MODES}
    first: Dict[str, Dict[str, List[Dict[str, float]]]] = {}
    for seed in range(1, args.seeds + 1):
        a, b = make_data(seed)
        for mode in MODES:
            curve = run(mode, a, b, seed, args)
            per_seed[mode].append(endpoints(curve, args.last))
            if seed == 1:
                first[mode] = curve
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(f"{args.out}.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["run", "measured_on", "step", "cosine", "cka"])
        for mode, curve in first.items():
            for where in ("batch", "full"):
                writer.writerows([mode, where, p["step"], round(p["cosine"], 4), round(p["cka"], 4)]
                                 for p in curve[where])
    lines = [*facts_lines(script_command("examples/cka/synthetic_alignment.py", None), "float32", f"seeds: 1..{args.seeds}"), "",
             *summary_table(per_seed, args.seeds, args.last)]
    Path(f"{args.out}_summary.md").write_text("\n".join(lines) + "\n")
    plot(first, f"{args.out}.png")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
