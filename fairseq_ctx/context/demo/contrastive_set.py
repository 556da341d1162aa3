"""A contrastive pronoun test set generated like the demo corpus (synthetic_corpus).

Every pronoun sentence of freshly generated documents becomes one example: its source, the
previous source sentences of its document as context (nearest first), the correct target
and one contrastive target per wrong pronoun (the target with er/sie/es swapped). The
category is the distance of the antecedent noun: ``distance-1`` or ``distance-2``.
"""
import os
from typing import Dict, List

from fairseq_ctx.context.demo.synthetic_corpus import PRONOUN, DocumentGenerator

CONTRASTIVE_SEED_OFFSET = 7  # corpus splits use 0..2 (synthetic_corpus.SPLIT_SEED_OFFSET)


def contrastive_examples(num_docs: int, seed: int, context_size: int) -> List[Dict]:
    generator = DocumentGenerator(seed * 1000 + CONTRASTIVE_SEED_OFFSET)
    examples = []
    for _ in range(num_docs):
        document = generator.document()
        for position, (source, target, key) in enumerate(document):
            if not key:
                continue
            expected = key.split("|")[0]
            words = target.split()
            variants = [" ".join([p, *words[1:]]) for p in PRONOUN.values() if p != expected]
            previous = [document[i][0] for i in range(position - 1, max(position - 1 - context_size, -1), -1)]
            examples.append({
                "source": source,
                "context": previous,
                "reference": target,
                "contrastive": variants,
                "category": "distance-1" if previous and previous[0].startswith("the ") else "distance-2",
            })
    return examples


def write_contrastive_set(out_dir: str, num_docs: int = 60, seed: int = 1, context_size: int = 2,
                          src_lang: str = "en", tgt_lang: str = "de") -> int:
    """Write ``contrastive.{src,ref,contrastive0,contrastive1,context0..,category}`` files
    (parallel, one example per line) for ``fairseq-ctx-contrastive``; returns the example count."""
    examples = contrastive_examples(num_docs, seed, context_size)
    os.makedirs(out_dir, exist_ok=True)
    columns = {
        f"src.{src_lang}": [e["source"] for e in examples],
        f"ref.{tgt_lang}": [e["reference"] for e in examples],
        "category": [e["category"] for e in examples],
    }
    for number in range(2):
        columns[f"contrastive{number}.{tgt_lang}"] = [e["contrastive"][number] for e in examples]
    for slot in range(context_size):
        columns[f"context{slot}.{src_lang}"] = [e["context"][slot] if slot < len(e["context"]) else "" for e in examples]
    for name, lines in columns.items():
        with open(os.path.join(out_dir, f"contrastive.{name}"), "w", encoding="utf-8") as handle:
            handle.write("".join(line + "\n" for line in lines))
    return len(examples)
