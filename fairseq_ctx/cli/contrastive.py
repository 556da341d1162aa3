"""``fairseq-ctx-contrastive``: contrastive evaluation of a context-aware model.

Every example is a source sentence, its context (previous source sentences), the correct
target and one or more contrastive targets (e.g. the wrong pronouns). The model scores every
target (sum of token log-probabilities; ``--length-normalize`` for the mean) and the example
is correct when the correct target scores strictly highest. Accuracy is printed overall and
per category.

Input: parallel text files, one example per line, the layout of the large contrastive pronoun
sets (ContraPro EN-DE, Bawden et al. EN-FR) once split into files:

    --source src.txt --reference ref.txt --contrastive wrong1.txt [wrong2.txt ...]
    [--context ctx0.txt [ctx1.txt ...]]   nearest previous sentence first; empty line = none
    [--categories cat.txt]                one label per line (e.g. antecedent distance)

An empty line in a contrastive file means the example has no such variant. Text must be
tokenised like the training data (or give ``--spm`` with the sentencepiece model).

Example:
    fairseq-ctx-contrastive checkpoints/hmce --source contrastive.src.en --reference contrastive.ref.de \\
      --contrastive contrastive.contrastive0.de contrastive.contrastive1.de \\
      --context contrastive.context0.en contrastive.context1.en --categories contrastive.category
"""
import argparse
import json
import sys
from collections import defaultdict
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from fairseq_ctx.cli.tool_args import add_model_args, load_translator, model_inputs, refuse_overwriting


class ContrastiveInputError(ValueError):
    """The parallel contrastive files do not line up."""


@dataclass
class ContrastiveExample:
    source: str
    context: List[str]
    reference: str
    contrastive: List[str]
    category: str = "all"


def read_lines(path: str) -> List[str]:
    with open(path, encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle]


def read_contrastive_set(source: str, reference: str, contrastive: Sequence[str], context: Sequence[str] = (),
                         categories: Optional[str] = None) -> List[ContrastiveExample]:
    """Read the parallel files; raise :class:`ContrastiveInputError` naming every file and its
    line count when they differ, or the line of an example without any contrastive target."""
    if not contrastive:
        raise ContrastiveInputError("give at least one --contrastive file")
    paths = {"--source": [source], "--reference": [reference], "--contrastive": list(contrastive),
             "--context": list(context), "--categories": [categories] if categories else []}
    columns = {(flag, path): read_lines(path) for flag, files in paths.items() for path in files}
    counts = {key: len(lines) for key, lines in columns.items()}
    if len(set(counts.values())) > 1:
        listing = ", ".join(f"{flag} {path}: {n} lines" for (flag, path), n in counts.items())
        raise ContrastiveInputError(f"the contrastive files must have one line per example, but {listing}")
    examples = []
    for line_no in range(counts[("--source", source)]):
        variants = [columns[("--contrastive", p)][line_no] for p in contrastive]
        variants = [v for v in variants if v.strip()]
        if not variants:
            raise ContrastiveInputError(f"line {line_no + 1}: no contrastive target in {', '.join(contrastive)}")
        examples.append(ContrastiveExample(
            source=columns[("--source", source)][line_no],
            context=[c for c in (columns[("--context", p)][line_no] for p in context) if c.strip()],
            reference=columns[("--reference", reference)][line_no],
            contrastive=variants,
            category=columns[("--categories", categories)][line_no].strip() if categories else "all",
        ))
    return examples


def evaluate(translator, examples: Sequence[ContrastiveExample], batch_size: int = 32,
             length_normalize: bool = False) -> Dict:
    """Score every target; returns overall and per-category accuracy and per-example scores."""
    from fairseq_ctx.context.hub import Example

    flat, owner = [], []
    for number, example in enumerate(examples):
        source = translator.encode_source(example.source)
        context = [translator.encode_source(c) for c in example.context]
        for target in [example.reference, *example.contrastive]:
            flat.append(Example(source, context, translator.encode_target(target)))
            owner.append(number)
    scores: List[float] = []
    for start in range(0, len(flat), batch_size):
        for positional in translator.score_examples(flat[start:start + batch_size]):
            total = float(positional.double().sum())
            scores.append(total / positional.numel() if length_normalize else total)
    per_example: List[List[float]] = [[] for _ in examples]
    for number, score in zip(owner, scores):
        per_example[number].append(score)
    correct = [s[0] > max(s[1:]) for s in per_example]
    by_category: Dict[str, List[bool]] = defaultdict(list)
    for example, ok in zip(examples, correct):
        by_category[example.category].append(ok)
    return {
        "accuracy": sum(correct) / len(correct) if correct else 0.0,
        "correct": sum(correct),
        "total": len(correct),
        "categories": {c: {"accuracy": sum(v) / len(v), "correct": sum(v), "total": len(v)}
                       for c, v in sorted(by_category.items())},
        "scores": per_example,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(parser)
    parser.add_argument("--source", required=True, help="source sentences, one example per line")
    parser.add_argument("--reference", required=True, help="correct targets")
    parser.add_argument("--contrastive", nargs="+", required=True, help="contrastive target files (one per variant)")
    parser.add_argument("--context", nargs="*", default=[], help="context files, nearest previous sentence first")
    parser.add_argument("--categories", help="optional category label per example")
    parser.add_argument("--length-normalize", action="store_true", help="compare mean instead of summed log-probs")
    parser.add_argument("--json", help="also write accuracies and per-example scores to this JSON file")
    args = parser.parse_args(argv)
    refuse_overwriting(parser, {"--json": args.json}, {
        "--source": args.source, "--reference": args.reference, "--contrastive": args.contrastive,
        "--context": args.context, "--categories": args.categories, **model_inputs(args)})
    try:
        examples = read_contrastive_set(args.source, args.reference, args.contrastive, args.context, args.categories)
    except (ContrastiveInputError, OSError) as err:
        sys.exit(f"fairseq-ctx-contrastive: {err}")
    result = evaluate(load_translator(args), examples, args.batch_size, args.length_normalize)
    print(f"contrastive accuracy = {result['accuracy']:.4f} ({result['correct']}/{result['total']})")
    if args.categories:
        for name, value in result["categories"].items():
            print(f"  {name}: {value['accuracy']:.4f} ({value['correct']}/{value['total']})")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
