"""DiscEvalMT (Bawden et al. (2018), github.com/rbawden/discourse-mt-test-sets), English→French.

``anaphora.json``: numbered blocks ``{"src": [previous, current], "trg": [...]}``; every ``trg``
item is a contrastive pair ``{"correct" | "semi-correct": [previous, current], "incorrect":
[previous, current], "type": "m.sg" | "f.sg" | "m.pl" | "f.pl"}``. ``lexical-choice.json``:
numbered blocks ``{"type": "repet" | "disambig" | ..., "examples": [{"src": [previous, current],
"trg": {"correct": [...], "incorrect": [...]}}]}``. Every pair is one example whose candidates
carry their own previous translation as target context. As in Bawden et al.'s
``scripts/evaluate.py``, a semi-correct translation (correct given its own previous target
sentence, which is a less natural translation) plays the correct role of its pair and counts
like a correct one; the breakdown ``reference`` separates the two. Breakdowns: ``phenomenon``,
``type``, ``reference`` (anaphora); blocks entirely correct are counted too. The blocks are
balanced (each translation is correct in one context and incorrect in another), so a model
that ignores the context scores 50%.
"""
import os
from typing import Any, Dict, List

from fairseq_ctx.context.contrastive.example import (Candidate, ContrastiveExample, ContrastiveInputError,
                                                     load_json, strip_missing)


def sentence_pair(value: Any, where: str, name: str) -> List[str]:
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(s, str) for s in value)):
        raise ContrastiveInputError(f"{where}: '{name}' must be [previous sentence, current sentence], got {value!r}")
    return value


def pair_example(source: List[str], correct: List[str], incorrect: List[str], labels: Dict[str, str],
                 group: str, origin: str) -> ContrastiveExample:
    return ContrastiveExample(
        source=source[1], source_context=strip_missing([source[0]]),
        correct=Candidate(correct[1], strip_missing([correct[0]])),
        contrastive=[Candidate(incorrect[1], strip_missing([incorrect[0]]))],
        labels=labels, group=group, origin=origin,
    )


def anaphora_block(block: Dict, where: str, group: str) -> List[ContrastiveExample]:
    source = sentence_pair(block["src"], where, "src")
    if not isinstance(block["trg"], list) or not block["trg"]:
        raise ContrastiveInputError(f"{where}: 'trg' must be a non-empty list of contrastive pairs")
    examples = []
    for number, pair in enumerate(block["trg"], 1):
        at = f"{where}, trg {number}"
        if not isinstance(pair, dict):
            raise ContrastiveInputError(f"{at}: expected an object, got {type(pair).__name__}")
        kinds = [k for k in ("correct", "semi-correct") if k in pair]
        if len(kinds) != 1 or "incorrect" not in pair or "type" not in pair:
            raise ContrastiveInputError(f"{at}: needs 'incorrect', 'type' and exactly one of 'correct' or "
                                        f"'semi-correct' (has {', '.join(sorted(pair)) or 'nothing'})")
        kind = kinds[0]
        examples.append(pair_example(
            source, sentence_pair(pair[kind], at, kind), sentence_pair(pair["incorrect"], at, "incorrect"),
            {"phenomenon": "anaphora", "type": str(pair["type"]), "reference": kind}, group, at))
    return examples


def lexical_choice_block(block: Dict, where: str, group: str) -> List[ContrastiveExample]:
    if not isinstance(block["examples"], list) or not block["examples"]:
        raise ContrastiveInputError(f"{where}: 'examples' must be a non-empty list")
    kind = block.get("type") or "none"  # the published scorer allows blocks without a type
    examples = []
    for number, example in enumerate(block["examples"], 1):
        at = f"{where}, example {number}"
        if not (isinstance(example, dict) and "src" in example and isinstance(example.get("trg"), dict)
                and "correct" in example["trg"] and "incorrect" in example["trg"]):
            raise ContrastiveInputError(f"{at}: needs 'src' and 'trg' with 'correct' and 'incorrect'")
        target = example["trg"]
        examples.append(pair_example(
            sentence_pair(example["src"], at, "src"), sentence_pair(target["correct"], at, "correct"),
            sentence_pair(target["incorrect"], at, "incorrect"),
            {"phenomenon": "lexical choice", "type": str(kind)}, group, at))
    return examples


def read_discevalmt(json_path: str) -> List[ContrastiveExample]:
    """Read ``anaphora.json`` or ``lexical-choice.json`` (blocks in numeric order, as the
    published scripts do)."""
    blocks = load_json(json_path)
    if not isinstance(blocks, dict) or not blocks:
        raise ContrastiveInputError(f"{json_path}: expected a JSON object of numbered blocks (DiscEvalMT's "
                                    f"anaphora.json or lexical-choice.json)")
    bad = [key for key in blocks if not key.strip().isdigit()]
    if bad:
        raise ContrastiveInputError(f"{json_path}: block key {bad[0]!r} is not a number")
    stem = os.path.splitext(os.path.basename(json_path))[0]
    examples = []
    for key in sorted(blocks, key=int):
        block, where, group = blocks[key], f"{json_path}: block {key}", f"{stem}:{key}"
        if isinstance(block, dict) and "examples" in block:
            examples.extend(lexical_choice_block(block, where, group))
        elif isinstance(block, dict) and "src" in block and "trg" in block:
            examples.extend(anaphora_block(block, where, group))
        else:
            raise ContrastiveInputError(f"{where}: neither an anaphora block ('src' and 'trg') nor a lexical-choice "
                                        f"block ('examples')")
    return examples
