"""Evaluate the demo models: xsim between the non-pivot languages xa and xb, X-Y document
classification, and t-SNE pictures. Writes results.md, results.json and tsne_*.png, stating the
date, the machine, the updates per model, the wall time since the demo started and its command."""
import argparse
import json
import os
import time

import numpy as np


from devtools.machine_facts import this_machine, utc_now
from fairseq_ctx.embedding.doc_classify import accuracy_matrix, format_matrix, load_split
from fairseq_ctx.embedding.embedder import Embedder, embed_file
from fairseq_ctx.embedding.embedding_plot import plot
from fairseq_ctx.embedding.xsim import DIRECTIONS, xsim_files

MULTILINGUAL = {"tmde": "T-MDE", "ct_mde_small": "T-MDE + distance_constraint (cT-MDE)",
                "ct_mde_detached": "cT-MDE, --distance-detach-target --distance-beta 0.5",
                "ct_mde_parallel": "cT-MDE, --distance-normalizer parallel (v_norm = mean ‖P_a−P_b‖)",
                "tmde_f": "T-MDE_F (no bottleneck)", "laser": "LASER BiLSTM"}
BILINGUAL = {"bi_tmde": "T-MDE, pa/pb only", "bi_ct_mde": "cT-MDE (β 0.25), pa/pb only",
             "bi_ct_mde_detached": "cT-MDE, --distance-detach-target --distance-beta 0.5, pa/pb only",
             "bi_ct_mde_b05": "cT-MDE, --distance-beta 0.5, pa/pb only",
             "bi_ct_mde_detached_b10": "cT-MDE, --distance-detach-target --distance-beta 1.0, pa/pb only"}


def embed_all(work: str, name: str, langs, retrieval_pair) -> str:
    out = os.path.join(work, "emb", name)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(work, "checkpoints", name, "checkpoint_last.pt")
    for lang in langs:
        embedder = Embedder(path, lang)
        for split in ("train", "test"):
            embed_file(embedder, os.path.join(work, "raw", f"{split}.doc.{lang}"), os.path.join(out, f"{split}.{lang}.npy"),
                       max_tokens=6000, chunk_lines=5000)
        if lang in retrieval_pair:
            embed_file(embedder, os.path.join(work, "raw", f"test.{lang}"), os.path.join(out, f"sent.{lang}.npy"),
                       max_tokens=6000, chunk_lines=5000)
    for split in ("train", "test"):
        with open(os.path.join(work, "raw", f"{split}.doc.labels")) as src, open(os.path.join(out, f"{split}.labels"), "w") as dst:
            dst.write(src.read())
    return out


def evaluate(work: str, name: str, langs, pair) -> dict:
    out = embed_all(work, name, langs, pair)
    errors = xsim_files(os.path.join(out, f"sent.{pair[0]}.npy"), os.path.join(out, f"sent.{pair[1]}.npy"),
                        margins=("absolute", "ratio"))
    retrieval = {f"{name}_{direction}": errors[margin][direction].percent / 100
                 for margin, name in (("absolute", "cosine"), ("ratio", "margin")) for direction in DIRECTIONS}
    train = {l: load_split(out, "train", l) for l in langs}
    test = {l: load_split(out, "test", l) for l in langs}
    classification = accuracy_matrix(train, test, hidden=64, epochs=200, seed=1)
    print(f"-- {name}: xsim {pair[0]}->{pair[1]} {100 * retrieval['cosine_src2tgt']:.1f}%\n{format_matrix(classification)}")
    return {"xsim": retrieval, "classification": classification, "dir": out}


def row(label: str, result: dict, pair) -> str:
    x, c = result["xsim"], result["classification"]
    return (f"| {label} | {100 * x['cosine_src2tgt']:.1f} / {100 * x['cosine_tgt2src']:.1f} | "
            f"{100 * x['margin_src2tgt']:.1f} / {100 * x['margin_tgt2src']:.1f} | "
            f"{100 * c['cross']:.1f} | {100 * c['same']:.1f} | {100 * c['all']:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", required=True)
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--updates", type=int, required=True, help="updates each model was trained for")
    parser.add_argument("--started", type=float, required=True, help="when the demo started (seconds since the epoch)")
    parser.add_argument("--command", required=True, help="the command that ran the demo")
    args = parser.parse_args()
    langs = ["pa", "pb", "xa", "xb", "xc"]
    results = {name: evaluate(args.work, name, langs, ("xa", "xb")) for name in MULTILINGUAL}
    bilingual = {name: evaluate(args.work, name, ["pa", "pb"], ("pa", "pb")) for name in BILINGUAL}
    header = ("| model | xsim error % cos (→ / ←) | xsim error % margin (→ / ←) | Cross acc % | Same acc % | All acc % |\n"
              "|---|---|---|---|---|---|")
    machine = this_machine()  # demo.sh exports its OMP_NUM_THREADS to training and to this process alike
    facts = {"date": utc_now(),
             "machine": machine.as_dict(),
             "command": args.command, "updates": args.updates,
             "wall_time_min": round((time.time() - args.started) / 60, 1)}
    lines = ["# Multilingual embedding demo results", "",
             f"- Date: {facts['date']}; machine: {machine.describe()}",
             f"- Command: `{args.command}`",
             f"- Updates: {args.updates} per model; wall time of the whole demo (corpus, training, evaluation): "
             f"{facts['wall_time_min']} min", "",
             "Generated corpus, 5 languages (pivots pa, pb), 8 pairs, same update budget for every model.",
             "Retrieval: test sentences xa ↔ xb (never paired in training). Classification: 4 topics, FFN on "
             "document embeddings of language X, tested on Y.", "", header]
    lines += [row(label, results[name], ("xa", "xb")) for name, label in MULTILINGUAL.items()]
    lines += ["", "Bilingual run (pa-pb and pb-pa only; retrieval pa ↔ pb; classification over pa, pb):", "", header]
    lines += [row(label, bilingual[name], ("pa", "pb")) for name, label in BILINGUAL.items()]
    for name, result in {**results, **bilingual}.items():
        lines += ["", f"X-Y accuracy, {name}:", "```", format_matrix(result["classification"]), "```"]
    with open(os.path.join(args.out_dir, "results.md"), "w") as handle:
        handle.write("\n".join(lines) + "\n")
    with open(os.path.join(args.out_dir, "results.json"), "w") as handle:
        models = {k: {"xsim": v["xsim"], "classification": v["classification"]} for k, v in {**results, **bilingual}.items()}
        json.dump({**facts, "models": models}, handle, indent=2)
    labels = open(os.path.join(args.work, "raw", "test.doc.labels")).read().split()
    for name in ("ct_mde_small", "tmde"):
        arrays = [np.load(os.path.join(results[name]["dir"], f"test.{l}.npy"))[:80] for l in ("xa", "xb", "xc")]
        plot(["xa", "xb", "xc"], arrays, os.path.join(args.out_dir, f"tsne_{name}.png"), labels[:80], "tsne", 1,
             f"t-SNE of test documents, {MULTILINGUAL[name]}\n(colour = topic, marker = language)")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
