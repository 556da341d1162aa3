"""Cross-lingual document classification on frozen embeddings (MLDoc protocol, Schwenk and Li
2018; Li 2021 ch. 4): for every language X a small FFN is trained on X's training embeddings and
tested on every language Y; the X-Y accuracy matrix with Cross (mean over X != Y), Same (X = Y)
and All."""
import os
from typing import Dict, List, Tuple

import numpy as np
import torch
from torch import nn

from fairseq_ctx.core.text_input import read_utf8_lines
from fairseq_ctx.embedding.embedding_file import read_embeddings


def load_split(directory: str, split: str, lang: str) -> Tuple[np.ndarray, List[str]]:
    embeddings = read_embeddings(os.path.join(directory, f"{split}.{lang}.npy"))
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
    return embeddings, labels


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
