"""GenPro: generative ContraPro (Post & Junczys-Dowmunt, 2023, "Escaping the sentence-level paradigm
in machine translation", §4; marian-nmt/docmt23). Instead of scoring the correct and the contrastive
pronoun, the sentence is translated with its preceding sentences and the translation is checked
for the pronoun the reference uses, as docmt23's ``evaluate_tsv.py`` checks it: the translation of
the sentence, tokenised by the Moses tokenizer of the target language (sacremoses, its defaults),
lowercased and split on white space, must contain the pronoun (lowercased) as one token.

Two layouts of a set:

- docmt23's TSV (``genpro.max250+10.en-fr.tsv``), one example per line: the index of the sentence
  in its line (0-based), the antecedent distance, ``correct`` or ``contrastive``, the correct
  pronoun, the source sentences joined by ``<eos>``, the reference sentences joined the same way
  (the older layout without the index: the sentence is the last one). Only ``correct`` lines are
  examples, as in ``evaluate_tsv.py``.
- ContraPro's (``contrapro.json`` with the text and context files its conversion script writes,
  the layout ``fairseq-ctx-contrastive --format contrapro`` reads): each entry's source sentence
  with its context, the entry's ``ref pronoun``.
"""
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Dict, List, Sequence

from fairseq_ctx.context.contrastive.example import ContrastiveExample, ContrastiveInputError, read_lines
from fairseq_ctx.context.generative.ctxpro_sets import distance_order, outcome_counts

SEPARATOR = "<eos>"


@dataclass
class GenproExample:
    """One example: the sentence to translate, its preceding source sentences (oldest first), the
    pronoun the reference uses and the antecedent distance (as the set writes it)."""

    sentence: str
    preceding: List[str]
    pronoun: str
    distance: str
    origin: str


def read_genpro_tsv(path: str) -> List[GenproExample]:
    """The ``correct`` lines of a docmt23 GenPro TSV; a line of another shape, an index outside
    its sentences or an empty sentence are input errors naming the file and line."""
    examples = []
    for number, line in enumerate(read_lines(path), start=1):
        fields = line.split("\t")
        if len(fields) == 5:
            fields = ["-1", *fields]
        if len(fields) != 6:
            raise ContrastiveInputError(
                f"{path}:{number}: {len(fields)} tab-separated fields, where a GenPro line has 6 (sentence index, "
                f"antecedent distance, correct/contrastive, pronoun, source, reference) or 5 (without the index)")
        index, distance, label, pronoun, source = fields[:5]
        if label not in ("correct", "contrastive"):
            raise ContrastiveInputError(f"{path}:{number}: the third field is {label!r}, not correct or contrastive")
        if label != "correct":
            continue
        sentences = [part.strip() for part in source.split(SEPARATOR)]
        try:
            position = int(index)
            sentence = sentences[position]
        except (ValueError, IndexError):
            raise ContrastiveInputError(f"{path}:{number}: the sentence index {index!r} is not one of the "
                                        f"{len(sentences)} sentences of the line") from None
        if not sentence:
            raise ContrastiveInputError(f"{path}:{number}: the sentence to translate (number {index} of the line) "
                                        f"is empty")
        preceding = [s for s in sentences[:position % len(sentences)] if s]
        examples.append(GenproExample(sentence, preceding, pronoun, distance, f"{path}:{number}"))
    if not examples:
        raise ContrastiveInputError(f"{path}: no line is a 'correct' example: nothing to score")
    return examples


def from_contrapro(examples: Sequence[ContrastiveExample]) -> List[GenproExample]:
    """GenPro examples of a ContraPro-layout set (as the ContraPro reader gives them): each entry's
    source with its context (nearest first in ``source_context``) and its ``ref pronoun`` (the
    right side of the ``category`` label, ``src:ref``)."""
    return [GenproExample(e.source, list(reversed(e.source_context)), e.labels["category"].split(":", 1)[1],
                          e.labels["ante distance"], e.origin) for e in examples]


def genpro_check(lang: str) -> Callable[[str, str], bool]:
    """``check(translation, pronoun)``: ``evaluate_tsv.py``'s test of one translation; an input
    error saying how to install sacremoses when it is missing."""
    try:
        from sacremoses import MosesTokenizer
    except ImportError:
        raise ContrastiveInputError('scoring a GenPro set needs sacremoses: pip install "fairseq-ctx[genpro]" '
                                    '(or pip install sacremoses)') from None
    tokenizer = MosesTokenizer(lang=lang)
    return lambda translation, pronoun: pronoun.lower() in tokenizer.tokenize(translation, return_str=True).lower().split()


def within_distances(examples: Sequence[GenproExample], bounds: Sequence[int]) -> List[GenproExample]:
    """The examples whose antecedent distance is in ``bounds`` (low, high; inclusive), as
    ``evaluate_tsv.py -d`` keeps them; none is an input error."""
    kept = [e for e in examples if e.distance.lstrip("-").isdigit() and bounds[0] <= int(e.distance) <= bounds[1]]
    if not kept:
        raise ContrastiveInputError(f"no example has its antecedent distance in {bounds[0]}..{bounds[1]}")
    return kept


def score_genpro(examples: Sequence[GenproExample], translations: Sequence[str], lang: str) -> Dict:
    """GenPro accuracy of ``translations`` (one per example, in order): overall, by pronoun and by
    antecedent distance, and each example's outcome."""
    if len(translations) != len(examples):
        raise ContrastiveInputError(f"{len(translations)} translations for {len(examples)} examples")
    check = genpro_check(lang)
    outcomes = [check(translation, example.pronoun) for example, translation in zip(examples, translations)]
    by_pronoun: Dict[str, List[bool]] = defaultdict(list)
    by_distance: Dict[str, List[bool]] = defaultdict(list)
    for example, correct in zip(examples, outcomes):
        by_pronoun[example.pronoun.lower()].append(correct)
        by_distance[example.distance].append(correct)
    return {"correct": sum(outcomes), "total": len(outcomes), "accuracy": sum(outcomes) / len(outcomes),
            "pronouns": outcome_counts(by_pronoun, key=str), "ante_distance": outcome_counts(by_distance, key=distance_order),
            "examples": [{"origin": e.origin, "pronoun": e.pronoun, "ante distance": e.distance, "translation": t,
                          "correct": c} for e, t, c in zip(examples, translations, outcomes)]}


def format_genpro_report(result: Dict) -> str:
    """The accuracy as ``evaluate_tsv.py --verbose`` prints it (correct, total, %), then by pronoun
    and by antecedent distance."""
    lines = [f"{result['correct']} {result['total']} {100 * result['accuracy']:.1f}"]
    for title, breakdown in (("pronoun", result["pronouns"]), ("antecedent distance", result["ante_distance"])):
        lines.append(f"{title}\tcorrect\ttotal\taccuracy")
        lines += [f"{name}\t{s['correct']}\t{s['total']}\t{100 * s['accuracy']:.1f}%" for name, s in breakdown.items()]
    return "\n".join(lines)
