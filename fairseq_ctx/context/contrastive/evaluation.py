"""Score contrastive examples through the hub and report accuracy with the set's breakdowns.

Every candidate is scored by the model (sum of the natural-log probabilities of its tokens,
``</s>`` included; the mean with ``length_normalize``) given the example's source and source
context and, for a model built with ``--target-context-size`` M > 0, the candidate's own
previous target sentences as the set supplies them (the first M, nearest first). An example is correct when its correct candidate scores strictly highest (a tie is
an error), the rule of Müller et al. (2018), Bawden et al. (2018) and Voita et al. (2019).
"""
import logging
from collections import defaultdict
from typing import Dict, List, Sequence

from fairseq_ctx.context.context_use import describe_context
from fairseq_ctx.context.contrastive.example import ContrastiveExample
from fairseq_ctx.core.progress import progress
from fairseq_ctx.core.unknown_tokens import UnknownTokenCheck

logger = logging.getLogger(__name__)
GIVEN_TARGETS = "the previous target sentences the set gives each candidate"


def log_context_read(translator, examples: Sequence[ContrastiveExample]) -> None:
    """Log the context the candidates are scored with (the model's context sizes and how many
    examples of the set carry context), and warn when the set's context and the model's do not
    meet: a model that reads context scored on a set without any scores as a context-blind one."""
    with_source = sum(1 for e in examples if e.source_context)
    with_target = sum(1 for e in examples if any(c.target_context for c in e.candidates))
    source, target = translator.context_size, translator.target_context_size
    logger.info(describe_context("fairseq-ctx-contrastive", source, target, GIVEN_TARGETS,
                                 f"{len(examples)} examples, {with_source} with previous source sentences, "
                                 f"{with_target} with previous target sentences"))
    for reads, given, side, flag in ((source, with_source, "source", "--context"), (target, with_target, "target", "")):
        if reads and not given:
            logger.warning(f"fairseq-ctx-contrastive: the model reads {reads} previous {side} sentence(s) but no example "
                           f"of the set gives any, so it is scored as a context-blind model would be"
                           + (f"; give the set's context ({flag} files of --format plain)" if flag else ""))
    if not source and not target and (with_source or with_target):
        logger.warning("fairseq-ctx-contrastive: the model is sentence-level (--context-size 0, --target-context-size "
                       "0): the set's context is not read")


def score_candidates(translator, examples: Sequence[ContrastiveExample], batch_size: int = 32,
                     length_normalize: bool = False) -> List[List[float]]:
    """Per example, the score of each candidate (correct first). The text is encoded with the
    translator's dictionaries (and its sentencepiece model, if any)."""
    from fairseq_ctx.context.hub import Example

    log_context_read(translator, examples)
    translator.unknown = UnknownTokenCheck(translator.src_dict, "the contrastive set's source sentences",
                                           translator.unknown_tokens_fix())
    targets = UnknownTokenCheck(translator.tgt_dict, "the contrastive set's candidates", translator.unknown_tokens_fix())
    flat, owner = [], []
    for number, example in enumerate(examples):
        source = translator.encode_source(example.source)
        context = [translator.encode_source(c) for c in example.source_context]
        for candidate in example.candidates:
            target_context = [translator.encode_target(t) for t in candidate.target_context[:translator.target_context_size]]
            candidate_tokens = translator.encode_target(candidate.target)
            targets.add(candidate_tokens)
            flat.append(Example(source, context, candidate_tokens, target_context))
            owner.append(number)
    translator.unknown.check()
    targets.check()
    scores: List[List[float]] = [[] for _ in examples]
    starts = range(0, len(flat), batch_size)
    for start in progress(starts, desc="contrastive", unit="batch"):
        positional_scores = translator.score_examples(flat[start:start + batch_size])
        for number, positional in zip(owner[start:start + batch_size], positional_scores):
            total = float(positional.double().sum())
            scores[number].append(total / positional.numel() if length_normalize else total)
    return scores


def tally(flags: Sequence[bool]) -> Dict:
    return {"accuracy": sum(flags) / len(flags) if flags else 0.0, "correct": sum(flags), "total": len(flags)}


def summarize(examples: Sequence[ContrastiveExample], scores: Sequence[Sequence[float]]) -> Dict:
    """Overall accuracy, the number of ties (the correct candidate level with the best
    contrastive one), one breakdown per label of the examples, blocks entirely correct (for
    sets with groups) and the per-example scores."""
    correct = [s[0] > max(s[1:]) for s in scores]
    by_label: Dict[str, Dict[str, List[bool]]] = defaultdict(lambda: defaultdict(list))
    by_group: Dict[str, List[bool]] = defaultdict(list)
    for example, ok in zip(examples, correct):
        for name, value in example.labels.items():
            by_label[name][value].append(ok)
        if example.group is not None:
            by_group[example.group].append(ok)
    result = {
        **tally(correct),
        "ties": sum(s[0] == max(s[1:]) for s in scores),
        "breakdowns": {name: {value: tally(flags) for value, flags in sorted(values.items())}
                       for name, values in by_label.items()},
    }
    if by_group:
        result["groups"] = {"total": len(by_group), "all_correct": sum(all(v) for v in by_group.values())}
    result["examples"] = [{"origin": e.origin, "labels": e.labels, "scores": list(s), "correct": ok}
                          for e, s, ok in zip(examples, scores, correct)]
    return result


def evaluate(translator, examples: Sequence[ContrastiveExample], batch_size: int = 32,
             length_normalize: bool = False) -> Dict:
    """Score ``examples`` with ``translator`` (a :class:`fairseq_ctx.context.hub.DocumentTranslator`)
    and summarize."""
    return summarize(examples, score_candidates(translator, examples, batch_size, length_normalize))


def format_report(result: Dict) -> str:
    """The accuracy line and a table of every breakdown."""
    lines = [f"contrastive accuracy = {result['accuracy']:.4f} ({result['correct']}/{result['total']})"]
    if result["ties"]:
        lines.append(f"ties (counted as errors): {result['ties']}; candidates that differ only in unknown words tie, "
                     f"check that the text is tokenised like the training data")
    rows = [(name, value, stats) for name, values in result["breakdowns"].items() for value, stats in values.items()]
    if rows:
        name_width = max(len("breakdown"), *(len(name) for name, _, _ in rows))
        value_width = max(len("label"), *(len(value) for _, value, _ in rows))
        lines.append(f"{'breakdown':<{name_width}}  {'label':<{value_width}}  accuracy  correct  total")
        for name, value, stats in rows:
            lines.append(f"{name:<{name_width}}  {value:<{value_width}}  {stats['accuracy']:8.4f}  "
                         f"{stats['correct']:7d}  {stats['total']:5d}")
    if "groups" in result:
        lines.append(f"blocks entirely correct: {result['groups']['all_correct']}/{result['groups']['total']}")
    if result.get("skipped"):
        lines.append(f"skipped {len(result['skipped'])} lines without a marked pronoun (first: {result['skipped'][0]})")
    return "\n".join(lines)
