"""ctxpro evaluation sets (Wicks & Post, 2023, "Identifying Context-Dependent Translations for
Evaluation Set Production", WMT; rewicks/ctxpro) in their released layout: ``SET.json``, one entry
per example (``rule``, ``expected`` form, ``ante distance``, …), and ``SET.input``, the same
examples one per line, the preceding source sentences and the sentence joined by ``<eos>``.

Each example's last sentence is translated with the sentences before it as the model's source
context (and, for a model with ``--target-context-size`` M > 0, its own translations of them as
target context), and scored exactly as ``ctxpro score`` scores a translation: the ``ctxpro``
package's own check (the last sentence of the translation, lowercased, punctuation removed, must
contain the expected form as a word), per rule, overall and by antecedent distance."""
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Dict, List, Sequence

from fairseq_ctx.context.contrastive.example import ContrastiveInputError, load_json, read_lines

SEPARATOR = "<eos>"


@dataclass
class CtxproExample:
    """One example: the sentence to translate, its preceding source sentences (oldest first, as in
    the input file) and the set's entry (``rule``, ``expected``, ``ante distance``, …)."""

    sentence: str
    preceding: List[str]
    entry: Dict[str, object]
    origin: str

    @property
    def rule(self) -> str:
        return str(self.entry["rule"])

    @property
    def expected(self) -> str:
        return str(self.entry["expected"])


def read_ctxpro_set(json_path: str, input_path: str) -> List[CtxproExample]:
    """The examples of a released ctxpro set; a JSON entry without ``rule`` / ``expected``, an empty
    sentence or a line count other than the JSON's are input errors naming the file and line."""
    entries = load_json(json_path)
    if not isinstance(entries, list) or not entries:
        raise ContrastiveInputError(f"{json_path}: not a ctxpro evaluation set (a JSON list of examples)")
    lines = read_lines(input_path)
    if len(lines) != len(entries):
        raise ContrastiveInputError(f"{input_path} has {len(lines)} lines but {json_path} has {len(entries)} examples; "
                                    f"give the input file released with the set (one line per example)")
    examples = []
    for number, (entry, line) in enumerate(zip(entries, lines), start=1):
        missing = [key for key in ("rule", "expected") if key not in entry]
        if missing:
            raise ContrastiveInputError(f"{json_path}: example {number} has no {' or '.join(missing)}")
        sentences = [part.strip() for part in line.split(SEPARATOR)]
        if not sentences[-1]:
            raise ContrastiveInputError(f"{input_path}:{number}: the sentence to translate (after the last "
                                        f"{SEPARATOR}) is empty")
        example = CtxproExample(sentences[-1], [s for s in sentences[:-1] if s], entry, f"{input_path}:{number}")
        check_against_entry(example, json_path, number)
        examples.append(example)
    return examples


def check_against_entry(example: CtxproExample, json_path: str, number: int) -> None:
    """The input line must be the one the JSON describes: its sentence is the entry's ``src
    segment`` (up to spacing), and it carries at least ``ante distance`` preceding sentences (else
    the antecedent the expected form depends on is not in the model's context). Both hold for
    every example of the released sets."""
    segment = example.entry.get("src segment")
    if segment is not None and " ".join(example.sentence.split()) != " ".join(str(segment).split()):
        raise ContrastiveInputError(
            f"{example.origin}: the sentence to translate is {example.sentence!r}, but example {number} of {json_path} "
            f"is {str(segment)!r}: the input lines are in another order than the JSON, or from another set; give the "
            f"input file released with this JSON")
    distance = example.entry.get("ante distance")
    if isinstance(distance, int) and len(example.preceding) < distance:
        raise ContrastiveInputError(
            f"{example.origin}: example {number} of {json_path} has its antecedent {distance} sentence(s) back, but the "
            f"line carries {len(example.preceding)} preceding sentence(s) (joined by {SEPARATOR}): it would be scored "
            f"without the context that decides it; give the input file released with this JSON")


def ctxpro_check(lang: str) -> Callable[[str, str], bool]:
    """``check(translation, expected)``: ``ctxpro score``'s test of one translation (the last
    sentence by its sentence splitter for ``lang``, then its word match), from the ``ctxpro``
    package; an input error saying how to install it when it is missing."""
    try:
        from ctxpro.score import get_last, passes_test
        from sentence_splitter import SentenceSplitter
    except ImportError:
        raise ContrastiveInputError('scoring a ctxpro set needs the ctxpro package: pip install "fairseq-ctx[ctxpro]" '
                                    '(or pip install ctxpro)') from None
    splitter = SentenceSplitter(language=lang)
    return lambda translation, expected: bool(passes_test(get_last(translation.strip(), splitter), expected))


def score_translations(examples: Sequence[CtxproExample], translations: Sequence[str], lang: str) -> Dict:
    """ctxpro's score of ``translations`` (one per example, in order): correct / total / accuracy
    per rule (with its expected form), overall and by antecedent distance, and each example's
    outcome. The check is the ``ctxpro`` package's (``pip install ctxpro``)."""
    if len(translations) != len(examples):
        raise ContrastiveInputError(f"{len(translations)} translations for {len(examples)} examples")
    check = ctxpro_check(lang)
    outcomes = [check(translation, example.expected) for example, translation in zip(examples, translations)]
    rules: Dict[str, Dict[str, object]] = {}
    distances: Dict[str, List[bool]] = defaultdict(list)
    for example, correct in zip(examples, outcomes):
        rule = rules.setdefault(example.rule, {"form": example.expected, "correct": 0, "total": 0})
        rule["correct"] += int(correct)
        rule["total"] += 1
        distances[str(example.entry.get("ante distance", "?"))].append(correct)
    for rule in rules.values():
        rule["accuracy"] = rule["correct"] / rule["total"]
    by_distance = outcome_counts(distances, key=distance_order)
    return {"correct": sum(outcomes), "total": len(outcomes), "accuracy": sum(outcomes) / len(outcomes),
            "rules": rules, "ante_distance": by_distance,
            "examples": [{"origin": e.origin, "rule": e.rule, "expected": e.expected, "translation": t, "correct": c}
                         for e, t, c in zip(examples, translations, outcomes)]}


def outcome_counts(groups: Dict[str, List[bool]], key: Callable[[str], object]) -> Dict[str, Dict]:
    """Correct / total / accuracy of each group of outcomes, the groups in the order of ``key``."""
    return {name: {"correct": sum(flags), "total": len(flags), "accuracy": sum(flags) / len(flags)}
            for name, flags in sorted(groups.items(), key=lambda item: key(item[0]))}


def distance_order(distance: str) -> tuple:
    """Sort key of antecedent distances: the numbers in order, then labels such as ``>3``."""
    return (0, int(distance)) if distance.lstrip("-").isdigit() else (1, distance)


def format_report(result: Dict) -> str:
    """The lines ``ctxpro score --complete`` prints (rule (form), correct, total, accuracy %; the
    total), then the breakdown by antecedent distance."""
    lines = [f"{rule} ({scores['form']})\t{scores['correct']}\t{scores['total']}\t{100 * scores['accuracy']:.1f}%"
             for rule, scores in result["rules"].items()]
    lines.append(f"total\t{result['correct']}\t{result['total']}\t{100 * result['accuracy']:.1f}")
    lines.append("antecedent distance\tcorrect\ttotal\taccuracy")
    lines += [f"{distance}\t{scores['correct']}\t{scores['total']}\t{100 * scores['accuracy']:.1f}%"
              for distance, scores in result["ante_distance"].items()]
    return "\n".join(lines)
