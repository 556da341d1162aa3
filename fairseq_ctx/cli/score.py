"""``fairseq-ctx-score``: BLEU and context accuracy of a ``fairseq-generate`` output.

Context accuracy: for every line of the answer key that is not empty
(``expected|alternative,alternative``), the hypothesis is correct when it contains the
expected word and none of the alternatives.
"""
import argparse
import json
import sys
from typing import Dict, List, Tuple

import sacrebleu

from fairseq_ctx.cli.tool_args import refuse_overwriting


def read_generate_output(path: str) -> Tuple[Dict[int, str], Dict[int, str]]:
    """Best hypothesis (first H line) and reference (T line) per sentence id."""
    hyps: Dict[int, str] = {}
    refs: Dict[int, str] = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            fields = line.rstrip("\n").split("\t")
            if line.startswith("H-"):
                hyps.setdefault(int(fields[0][2:]), fields[2] if len(fields) > 2 else "")
            elif line.startswith("T-"):
                refs[int(fields[0][2:])] = fields[1] if len(fields) > 1 else ""
    return hyps, refs


def context_accuracy(hyps: Dict[int, str], key_lines: List[str]) -> Tuple[float, int, int]:
    correct = total = 0
    for sent_id, key in enumerate(key_lines):
        key = key.strip()
        if not key or sent_id not in hyps:
            continue
        expected, alternatives = key.split("|")
        words = set(hyps[sent_id].split())
        total += 1
        correct += expected in words and not words.intersection(alternatives.split(","))
    return (correct / total if total else 0.0), correct, total


def score(generate_output: str, context_key: str) -> Dict[str, float]:
    hyps, refs = read_generate_output(generate_output)
    if not hyps:
        raise ValueError(f"{generate_output} has no H- lines; is it fairseq-generate output?")
    ids = sorted(hyps)
    bleu = sacrebleu.corpus_bleu([hyps[i] for i in ids], [[refs.get(i, "") for i in ids]])
    with open(context_key, encoding="utf-8") as handle:
        key_lines = handle.read().splitlines()
    if len(ids) != len(key_lines) or max(ids) >= len(key_lines):
        raise ValueError(
            f"{generate_output} has {len(ids)} hypotheses but {context_key} has {len(key_lines)} lines; "
            f"translate the whole split (fairseq-generate --required-batch-size-multiple 1 keeps every sentence)"
        )
    accuracy, correct, total = context_accuracy(hyps, key_lines)
    return {"bleu": bleu.score, "context_accuracy": accuracy, "context_correct": correct,
            "context_total": total, "sentences": len(ids)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("generate_output", help="stdout of fairseq-generate")
    parser.add_argument("--context-key", required=True, help="answer key, one line per test sentence")
    parser.add_argument("--json", help="also write the scores to this JSON file")
    args = parser.parse_args(argv)
    refuse_overwriting(parser, {"--json": args.json},
                       {"generate_output": args.generate_output, "--context-key": args.context_key})
    try:
        result = score(args.generate_output, args.context_key)
    except ValueError as err:
        sys.exit(f"fairseq-ctx-score: {err}")
    print(f"BLEU = {result['bleu']:.2f}")
    print(f"context accuracy = {result['context_accuracy']:.3f} "
          f"({result['context_correct']}/{result['context_total']} context-dependent sentences)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
