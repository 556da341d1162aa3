"""Inter-head CKA and SVCCA of a trained model (Yun 2022 §4.2, Table 4.3 style) and layer × layer
CKA/SVCCA between two models (Table 4.2 style).

Every MultiheadAttention is tapped (encoder self-attention, decoder self-attention,
encoder-decoder attention, and our archs' other attentions, kind ``other``); each head's output
(before the output projection) is collected over the non-padding query positions of a split,
teacher-forced, in eval mode, up to ``max_positions`` per module. For each module: the H × H
matrix of linear CKA and of SVCCA (99% variance) between heads, and their means over pairs i < j.
"""
import csv
import itertools
import os
import re
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from fairseq_ctx.analysis.attention_heads import HeadTap, module_kind
from fairseq_ctx.analysis.cka import cka, mean_off_diagonal, pairwise_linear_cka
from fairseq_ctx.analysis.svcca import svcca
from fairseq_ctx.core.atomic_output import atomic_output, write_json
from fairseq_ctx.core.plots import pyplot, save_figure
from fairseq_ctx.core.progress import progress


def collect(models: Sequence[torch.nn.Module], tasks: Sequence, split: str, batch_size: int, max_positions: int):
    """Head outputs per model and module: {module: (m, H, d_head) float64 array}, same positions for
    all models. Model i reads batches of its own task ``tasks[i]`` (its context settings: a model
    trained with target-side context gets its target-context entries), made of the sentences of
    the first task's batches, so every model sees the same sentences in the same rows."""
    datasets = []
    for task in tasks:
        task.load_dataset(split)
        datasets.append(task.dataset(split))
    iterator = tasks[0].get_batch_iterator(datasets[0], max_sentences=batch_size, seed=1, ignore_invalid_inputs=True)
    taps = [HeadTap(model) for model in models]
    store: List[Dict[str, List[np.ndarray]]] = [{} for _ in models]
    counts: Dict[str, int] = {}
    pad = tasks[0].source_dictionary.pad()
    batches = iterator.next_epoch_itr(shuffle=False)
    with torch.no_grad():
        for batch in progress(batches, total=len(batches), desc="collect heads", unit="batch"):
            if not batch or all(c >= max_positions for c in counts.values()) and counts:
                break
            samples = same_sentences(datasets, batch["id"].tolist())
            for model, sample, tap, out in zip(models, samples, taps, store):
                net_input = sample["net_input"]
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


def same_sentences(datasets: Sequence, ids: List[int]) -> List[Dict]:
    """The sentences ``ids`` collated by each dataset (each model's task), all in the same rows: the
    collaters order a batch by source length, and the same sentences give the same order."""
    samples = [dataset.collater([dataset[i] for i in ids]) for dataset in datasets]
    for sample in samples[1:]:
        if not torch.equal(sample["net_input"]["src_tokens"], samples[0]["net_input"]["src_tokens"]):
            raise ValueError("the two checkpoints' tasks give the sentences of the split different source tokens "
                             "(other dictionaries or data); compare checkpoints trained on the same data directory")
    return samples


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


def heatmaps(panels: Dict[str, np.ndarray], title: str, path: str, xlabel: str, ylabel: str,
             colour_label: Optional[Dict[str, str]] = None) -> None:
    """One similarity heatmap per panel (0 to 1), each with its colour bar labelled by the measure
    (``colour_label``: panel → measure; default: linear CKA)."""
    plt = pyplot()
    cols = min(4, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.9 * rows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    for ax, (name, matrix) in zip(axes.flat, panels.items()):
        image = ax.imshow(matrix, vmin=0, vmax=1, cmap="viridis")
        ax.set_title(name, fontsize=10)
        ax.set_xlabel(xlabel, fontsize=9)
        ax.set_ylabel(ylabel, fontsize=9)
        ax.tick_params(labelsize=8)
        bar = fig.colorbar(image, ax=ax, fraction=0.046)
        bar.set_label((colour_label or {}).get(name, "linear CKA"), fontsize=9)
        bar.ax.tick_params(labelsize=8)
    fig.suptitle(title, fontsize=12)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
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


def analyze(models: Sequence[torch.nn.Module], tags: Sequence[str], tasks: Sequence, split: str, batch_size: int,
            max_positions: int, output_dir: str, plots: bool = True) -> Dict[str, float]:
    """Write ``heads.csv`` and ``heads.json`` to ``output_dir`` and, for two models,
    ``layers.csv``/``layers.json`` (layer × layer of the same module kind, the whole layer output =
    all heads concatenated); with ``plots`` (matplotlib installed), also the heatmaps
    ``heads_<tag>.png`` (head × head, one panel per module) and ``layers_<kind>.png``. Model i is run
    on batches of ``tasks[i]``. The directory is made once the numbers are computed. Returns the
    mean inter-head CKA over the modules of each tag."""
    collected = collect(models, tasks, split, batch_size, max_positions)
    rows, report = [], {}
    for tag, heads_by_module in zip(tags, collected):
        report[tag] = {}
        for name in sorted(heads_by_module, key=lambda n: (module_kind(n), layer_index(n), n)):
            stats = head_statistics(heads_by_module[name])
            report[tag][name] = {"kind": module_kind(name), "layer": layer_index(name), **stats}
            rows.append({"model": tag, "module": name, "kind": module_kind(name), "layer": layer_index(name),
                         "heads": stats["heads"], "positions": stats["positions"],
                         "mean_cka": round(stats["mean_cka"], 4), "mean_svcca": round(stats["mean_svcca"], 4)})
    layers = compare_layers(*collected) if len(models) > 1 else None
    os.makedirs(output_dir, exist_ok=True)
    with atomic_output(os.path.join(output_dir, "heads.csv"), newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    write_json(os.path.join(output_dir, "heads.json"), report, indent=1)
    if layers is not None:
        write_json(os.path.join(output_dir, "layers.json"), layers, indent=1)
        with atomic_output(os.path.join(output_dir, "layers.csv"), newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["kind", f"layer_{tags[0]}", f"layer_{tags[1]}", "cka", "svcca"])
            for kind, item in layers.items():
                for (i, na), (j, nb) in itertools.product(enumerate(item["layers_a"]), enumerate(item["layers_b"])):
                    writer.writerow([kind, na, nb, round(item["cka"][i][j], 4), round(item["svcca"][i][j], 4)])
    if plots:
        for tag in tags:
            heatmaps({n: np.array(s["cka"]) for n, s in report[tag].items()}, f"inter-head CKA — {tag}",
                     os.path.join(output_dir, f"heads_{tag}.png"), "head", "head")
        for kind, item in (layers or {}).items():
            heatmaps({"CKA": np.array(item["cka"]), "SVCCA": np.array(item["svcca"])}, f"{kind}: {tags[0]} × {tags[1]}",
                     os.path.join(output_dir, f"layers_{kind}.png"), f"layer ({tags[1]})", f"layer ({tags[0]})",
                     {"CKA": "linear CKA", "SVCCA": "SVCCA (99% variance)"})
    return {tag: float(np.mean([r["mean_cka"] for r in rows if r["model"] == tag])) for tag in tags}
