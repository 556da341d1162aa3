"""``fairseq-ctx-analyze-heads``: inter-head CKA and SVCCA of a trained model (Yun 2022 §4.2,
Table 4.3 style), and optionally layer × layer CKA/SVCCA between two checkpoints (Table 4.2 style).

Every MultiheadAttention is tapped (encoder self-attention, decoder self-attention,
encoder-decoder attention, and our archs' other attentions, kind ``other``); each head's output
(before the output projection) is collected over the non-padding query positions of the split,
teacher-forced, in eval mode, up to ``--max-positions`` per module. For each module: the H × H
matrix of linear CKA and of SVCCA (99% variance) between heads, and their means over pairs i < j.

Writes to ``--output-dir``: ``heads.csv`` (one row per checkpoint and module), ``heads.json``
(with the matrices), ``heads_<tag>.png`` (head × head heatmaps, one panel per module) and, with
``--compare-path``, ``layers.csv``/``layers.json`` and ``layers_<kind>.png`` (layer × layer of the
same module kind, the whole layer output = all heads concatenated).
"""
import argparse
import csv
import itertools
import json
import logging
import os
import re
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from fairseq_ctx.analysis.attention_heads import HeadTap, module_kind
from fairseq_ctx.analysis.cka import cka, mean_off_diagonal, pairwise_linear_cka
from fairseq_ctx.analysis.svcca import svcca
from fairseq_ctx.cli.tool_args import refuse_overwriting
from fairseq_ctx.core.output_paths import split_files

logger = logging.getLogger("fairseq_ctx.analyze_heads")


def load(path: str, data: str, task_overrides: Dict[str, object]):
    import fairseq_ctx  # noqa: F401  (registers our task/archs, allow-lists checkpoint classes)
    from fairseq_ctx.core.checkpoint_loading import load_ensemble

    models, cfg, task = load_ensemble(path, None, "fairseq-ctx-analyze-heads --path", {"data": data, **task_overrides})
    model = models[0].float().eval()
    return model, task


def collect(models: Sequence[torch.nn.Module], task, split: str, batch_size: int, max_positions: int):
    """Head outputs per model and module: {module: (m, H, d_head) float64 array}, same positions for all models."""
    task.load_dataset(split)
    dataset = task.dataset(split)
    iterator = task.get_batch_iterator(dataset, max_sentences=batch_size, seed=1, ignore_invalid_inputs=True)
    taps = [HeadTap(model) for model in models]
    store: List[Dict[str, List[np.ndarray]]] = [{} for _ in models]
    counts: Dict[str, int] = {}
    pad = task.source_dictionary.pad()
    with torch.no_grad():
        for batch in iterator.next_epoch_itr(shuffle=False):
            if not batch or all(c >= max_positions for c in counts.values()) and counts:
                break
            net_input = batch["net_input"]
            for model, tap, out in zip(models, taps, store):
                tap.reset(net_input["src_tokens"].eq(pad), net_input["prev_output_tokens"].eq(pad))
                model(**net_input)
                for name, record in tap.records.items():
                    heads = record.heads.transpose(0, 1)
                    mask = record.query_padding_mask
                    rows = heads[~mask] if mask is not None else heads.reshape(-1, *heads.shape[2:])
                    out.setdefault(name, []).append(rows.double().numpy())
            for name in store[0]:
                counts[name] = sum(len(a) for a in store[0][name])
    for tap in taps:
        tap.remove()
    return [{name: np.concatenate(chunks)[:max_positions] for name, chunks in out.items()} for out in store]


def layer_index(name: str) -> int:
    match = re.search(r"layers\.(\d+)\.", name)
    return int(match.group(1)) if match else -1


def head_statistics(heads: np.ndarray) -> dict:
    h = heads.shape[1]
    cka_matrix = pairwise_linear_cka(torch.from_numpy(heads))
    svcca_matrix = np.eye(h)
    for i, j in itertools.combinations(range(h), 2):
        svcca_matrix[i, j] = svcca_matrix[j, i] = svcca(heads[:, i], heads[:, j])[0]
    upper = np.triu_indices(h, 1)
    return {
        "positions": int(heads.shape[0]), "heads": h,
        "mean_cka": float(mean_off_diagonal(cka_matrix)), "mean_svcca": float(svcca_matrix[upper].mean()),
        "cka": cka_matrix.tolist(), "svcca": svcca_matrix.tolist(),
    }


def heatmaps(panels: Dict[str, np.ndarray], title: str, path: str, xlabel: str, ylabel: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    import matplotlib.pyplot as plt

    cols = min(4, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.0 * rows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    for ax, (name, matrix) in zip(axes.flat, panels.items()):
        image = ax.imshow(matrix, vmin=0, vmax=1, cmap="viridis")
        ax.set_title(name, fontsize=7)
        ax.set_xlabel(xlabel, fontsize=7)
        ax.set_ylabel(ylabel, fontsize=7)
        fig.colorbar(image, ax=ax, fraction=0.046)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def compare_layers(a: Dict[str, np.ndarray], b: Dict[str, np.ndarray]) -> Dict[str, dict]:
    """Per module kind: layer × layer linear CKA and SVCCA of the layer outputs of model a vs b."""
    result = {}
    for kind in ("encoder_self", "decoder_self", "encoder_decoder"):
        names_a = sorted((n for n in a if module_kind(n) == kind), key=layer_index)
        names_b = sorted((n for n in b if module_kind(n) == kind), key=layer_index)
        if not names_a or not names_b:
            continue
        flat = lambda x: x.reshape(x.shape[0], -1)  # noqa: E731
        cka_m = np.zeros((len(names_a), len(names_b)))
        svcca_m = np.zeros_like(cka_m)
        for (i, na), (j, nb) in itertools.product(enumerate(names_a), enumerate(names_b)):
            xa, xb = flat(a[na]), flat(b[nb])
            n = min(len(xa), len(xb))
            cka_m[i, j] = float(cka(torch.from_numpy(xa[:n]), torch.from_numpy(xb[:n])))
            svcca_m[i, j] = svcca(xa[:n], xb[:n])[0]
        result[kind] = {"layers_a": names_a, "layers_b": names_b, "cka": cka_m.tolist(), "svcca": svcca_m.tolist()}
    return result


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", help="fairseq data-bin directory the checkpoint was trained on")
    parser.add_argument("--path", required=True, help="checkpoint to analyse")
    parser.add_argument("--compare-path", help="second checkpoint: layer × layer CKA/SVCCA against --path")
    parser.add_argument("--split", default="valid")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per forward pass")
    parser.add_argument("--max-positions", type=int, default=2000, help="query positions collected per module")
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--tag", default="model", help="name of --path in tables and file names")
    parser.add_argument("--compare-tag", default="other", help="name of --compare-path")
    args = parser.parse_args(argv)
    outputs = ["heads.csv", "heads.json", f"heads_{args.tag}.png"]
    if args.compare_path:
        outputs += ["layers.csv", "layers.json", f"heads_{args.compare_tag}.png",
                    *(f"layers_{kind}.png" for kind in ("encoder_self", "decoder_self", "encoder_decoder"))]
    refuse_overwriting(parser, {"--output-dir": [os.path.join(args.output_dir, name) for name in outputs]}, {
        "--path": args.path, "--compare-path": args.compare_path, "data": split_files(args.data, args.split)})
    if args.max_positions < 2 or args.batch_size < 1:
        parser.error("--max-positions must be >= 2 and --batch-size >= 1")
    return args


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    os.makedirs(args.output_dir, exist_ok=True)
    model, task = load(args.path, args.data, {})
    models, tags = [model], [args.tag]
    if args.compare_path:
        models.append(load(args.compare_path, args.data, {})[0])
        tags.append(args.compare_tag)
    collected = collect(models, task, args.split, args.batch_size, args.max_positions)
    rows, report = [], {}
    for tag, heads_by_module in zip(tags, collected):
        report[tag] = {}
        for name in sorted(heads_by_module, key=lambda n: (module_kind(n), layer_index(n), n)):
            stats = head_statistics(heads_by_module[name])
            report[tag][name] = {"kind": module_kind(name), "layer": layer_index(name), **stats}
            rows.append({"model": tag, "module": name, "kind": module_kind(name), "layer": layer_index(name),
                         "heads": stats["heads"], "positions": stats["positions"],
                         "mean_cka": round(stats["mean_cka"], 4), "mean_svcca": round(stats["mean_svcca"], 4)})
        heatmaps({n: np.array(s["cka"]) for n, s in report[tag].items()}, f"inter-head CKA — {tag}",
                 os.path.join(args.output_dir, f"heads_{tag}.png"), "head", "head")
    with open(os.path.join(args.output_dir, "heads.csv"), "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with open(os.path.join(args.output_dir, "heads.json"), "w") as handle:
        json.dump(report, handle, indent=1)
    for tag in tags:
        means = [r["mean_cka"] for r in rows if r["model"] == tag]
        print(f"{tag}: mean inter-head CKA over {len(means)} modules = {np.mean(means):.4f}")
    if args.compare_path:
        layers = compare_layers(*collected)
        with open(os.path.join(args.output_dir, "layers.json"), "w") as handle:
            json.dump(layers, handle, indent=1)
        with open(os.path.join(args.output_dir, "layers.csv"), "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["kind", f"layer_{tags[0]}", f"layer_{tags[1]}", "cka", "svcca"])
            for kind, item in layers.items():
                for (i, na), (j, nb) in itertools.product(enumerate(item["layers_a"]), enumerate(item["layers_b"])):
                    writer.writerow([kind, na, nb, round(item["cka"][i][j], 4), round(item["svcca"][i][j], 4)])
        for kind, item in layers.items():
            heatmaps({"CKA": np.array(item["cka"]), "SVCCA": np.array(item["svcca"])}, f"{kind}: {tags[0]} × {tags[1]}",
                     os.path.join(args.output_dir, f"layers_{kind}.png"), f"layer ({tags[1]})", f"layer ({tags[0]})")


if __name__ == "__main__":
    main()
