"""``fairseq-ctx-doc-classify``: cross-lingual document classification on frozen embeddings.

For every language X, a small FFN classifier is trained on X's training embeddings and
tested on every language Y (SPEC §5, MLDoc protocol). Prints the X-Y accuracy matrix and
Cross (mean over X≠Y), Same (mean over X=Y) and All. Files: ``DIR/{split}.{lang}.npy`` and
labels in ``DIR/{split}.{lang}.labels`` or, shared by all languages, ``DIR/{split}.labels``.
"""
import argparse
import json
import os
from typing import Dict, List, Tuple

import numpy as np
import torch
from torch import nn

from fairseq_ctx.cli.tool_args import refuse_overwriting
from fairseq_ctx.core.text_input import read_utf8_lines


def load_split(directory: str, split: str, lang: str) -> Tuple[np.ndarray, List[str]]:
    embeddings = np.load(os.path.join(directory, f"{split}.{lang}.npy"))
    own, shared = os.path.join(directory, f"{split}.{lang}.labels"), os.path.join(directory, f"{split}.labels")
    path = own if os.path.exists(own) else shared
    labels = [line.strip() for line in read_utf8_lines(path)]
    blank = next((number for number, label in enumerate(labels, start=1) if not label), None)
    if blank is not None:
        raise ValueError(f"doc-classify: {path}:{blank} is blank; every line needs the class label of its "
                         f"document (a blank label would become a class of its own)")
    if len(labels) != len(embeddings):
        raise ValueError(f"doc-classify: {path} has {len(labels)} labels but {split}.{lang}.npy has "
                         f"{len(embeddings)} rows; they must be aligned line by line")
    return embeddings.astype(np.float32), labels


def train_classifier(x: np.ndarray, y: np.ndarray, n_classes: int, hidden: int, epochs: int, seed: int) -> nn.Module:
    """FFN (one hidden layer, dropout) trained full-batch with Adam; inputs are standardised
    inside the model with the training statistics."""
    torch.manual_seed(seed)
    mean, std = x.mean(0), x.std(0) + 1e-6
    model = nn.Sequential(nn.Linear(x.shape[1], hidden), nn.ReLU(), nn.Dropout(0.2), nn.Linear(hidden, n_classes))
    model.register_buffer("mean", torch.from_numpy(mean))
    model.register_buffer("std", torch.from_numpy(std))
    inputs, targets = (torch.from_numpy(x) - model.mean) / model.std, torch.from_numpy(y)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-4)
    model.train()
    for _ in range(epochs):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(inputs), targets).backward()
        optimizer.step()
    return model.eval()


@torch.no_grad()
def accuracy(model: nn.Module, x: np.ndarray, y: np.ndarray) -> float:
    predictions = model((torch.from_numpy(x) - model.mean) / model.std).argmax(-1).numpy()
    return float((predictions == y).mean())


def accuracy_matrix(train: Dict[str, Tuple[np.ndarray, List[str]]], test: Dict[str, Tuple[np.ndarray, List[str]]],
                    hidden: int = 64, epochs: int = 200, seed: int = 1) -> Dict:
    classes = sorted({label for _, labels in train.values() for label in labels})
    index = {label: i for i, label in enumerate(classes)}
    langs = list(train)
    matrix = {}
    for x_lang in langs:
        x, labels = train[x_lang]
        model = train_classifier(x, np.array([index[l] for l in labels]), len(classes), hidden, epochs, seed)
        for y_lang in langs:
            tx, tlabels = test[y_lang]
            matrix[f"{x_lang}-{y_lang}"] = accuracy(model, tx, np.array([index.get(l, -1) for l in tlabels]))
    cross = [v for k, v in matrix.items() if k.split("-")[0] != k.split("-")[1]]
    same = [v for k, v in matrix.items() if k.split("-")[0] == k.split("-")[1]]
    return {"langs": langs, "matrix": matrix, "cross": float(np.mean(cross)) if cross else float("nan"),
            "same": float(np.mean(same)), "all": float(np.mean(list(matrix.values())))}


def format_matrix(result: Dict) -> str:
    langs = result["langs"]
    lines = ["train\\test " + " ".join(f"{l:>7}" for l in langs)]
    for x in langs:
        lines.append(f"{x:>10} " + " ".join(f"{100 * result['matrix'][f'{x}-{y}']:7.1f}" for y in langs))
    lines.append(f"Cross {100 * result['cross']:.1f}  Same {100 * result['same']:.1f}  All {100 * result['all']:.1f}")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embeddings", required=True, help="directory with {split}.{lang}.npy and labels")
    parser.add_argument("--langs", required=True, help="comma-separated languages")
    parser.add_argument("--train-split", default="train")
    parser.add_argument("--test-split", default="test")
    parser.add_argument("--hidden", type=int, default=64, help="hidden units of the FFN classifier")
    parser.add_argument("--epochs", type=int, default=200, help="full-batch Adam steps")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="also write the matrix and summary here")
    args = parser.parse_args(argv)
    langs = [l for l in args.langs.split(",") if l]
    read = [name for split in (args.train_split, args.test_split)
            for name in (f"{split}.labels", *(f"{split}.{l}.{ext}" for l in langs for ext in ("npy", "labels")))]
    refuse_overwriting(parser, {"--json": args.json}, {"--embeddings": [os.path.join(args.embeddings, n) for n in read]})
    try:
        train = {l: load_split(args.embeddings, args.train_split, l) for l in langs}
        test = {l: load_split(args.embeddings, args.test_split, l) for l in langs}
    except (ValueError, FileNotFoundError) as err:
        parser.exit(2, f"fairseq-ctx-doc-classify: error: {err}\n")
    result = accuracy_matrix(train, test, args.hidden, args.epochs, args.seed)
    print(format_matrix(result))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
