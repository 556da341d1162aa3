"""What every importer produces: contrastive examples with source- and target-side context,
the shared file-reading helpers that name the file and line of malformed input, and the check
every set passes before it is scored (:func:`check_examples`)."""
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from fairseq_ctx.core.text_input import TextEncodingError, read_utf8_lines


class ContrastiveInputError(ValueError):
    """A contrastive test set that is malformed or does not match its published layout."""


@dataclass
class Candidate:
    """One translation to score: the current target sentence and the previous target sentences
    the set gives with it (nearest first; DiscEvalMT and Voita et al. give every candidate its
    own). Models built with ``--target-context-size`` M > 0 are scored with the first M of
    them (:func:`~fairseq_ctx.context.contrastive.evaluation.score_candidates`)."""

    target: str
    target_context: List[str] = field(default_factory=list)


@dataclass
class ContrastiveExample:
    """A source sentence with its context (previous source sentences, nearest first), the
    correct candidate and the contrastive ones. Correct when the correct candidate scores
    strictly highest (Müller et al. (2018); Bawden et al. (2018); Voita et al. (2019)).

    ``labels`` maps a breakdown (e.g. ``ante distance``) to this example's value; ``group`` ties
    examples the set scores together (a DiscEvalMT block); ``origin`` locates it in the input, and
    ``origins`` each of its parts (``source``, ``correct``, ``contrastive``) where they come from
    other files (``file:line``)."""

    source: str
    source_context: List[str]
    correct: Candidate
    contrastive: List[Candidate]
    labels: Dict[str, str] = field(default_factory=dict)
    group: Optional[str] = None
    origin: str = ""
    origins: Dict[str, str] = field(default_factory=dict)

    def where(self, part: str) -> str:
        """The ``file:line`` of one part of the example (``origin`` where the set has one place)."""
        return self.origins.get(part, self.origin)

    @property
    def candidates(self) -> List[Candidate]:
        return [self.correct, *self.contrastive]


def read_lines(path: str) -> List[str]:
    """Lines of a UTF-8 text file without their line ends; a missing file, or bytes that are not
    UTF-8 (named by line and byte offset), are input errors."""
    if not os.path.isfile(path):
        raise ContrastiveInputError(f"{path}: no such file")
    try:
        return read_utf8_lines(path)
    except TextEncodingError as err:
        raise ContrastiveInputError(str(err)) from None


def load_json(path: str) -> Any:
    """Parse a JSON test set; a syntax error names the file, line and column."""
    text = "\n".join(read_lines(path))
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ContrastiveInputError(f"{path}:{err.lineno}:{err.colno}: not valid JSON ({err.msg})") from None


def is_integer(value: Any) -> bool:
    """An integer of the JSON, not a boolean (Python's ``True`` is an ``int``: ``true`` would read as 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_examples(examples: Sequence[ContrastiveExample]) -> None:
    """A set needs examples, and every example a non-empty source sentence and non-empty candidates: an empty
    candidate gets a score (the log-probability of ``</s>`` alone) that can beat a real
    translation, and an empty source makes the comparison meaningless."""
    if not examples:
        raise ContrastiveInputError("the set has no examples: an accuracy of 0 examples is not a score; check --input "
                                    "(or --source/--reference/--contrastive) and --format")
    problems = []
    for example in examples:
        if not example.source.strip():
            problems.append(f"{example.where('source')}: the source sentence is empty")
        elif not example.correct.target.strip():
            problems.append(f"{example.where('correct')}: the correct translation is empty")
        elif any(not candidate.target.strip() for candidate in example.contrastive):
            problems.append(f"{example.where('contrastive')}: a contrastive translation is empty")
    if problems:
        raise ContrastiveInputError(
            f"{problems[0]}; {len(problems)} of the {len(examples)} examples have an empty source or candidate"
            + (f" (also {'; '.join(problems[1:3])}{', …' if len(problems) > 3 else ''})" if len(problems) > 1 else "")
            + ". Every example needs a non-empty source sentence and non-empty candidate translations: fix or remove "
              "those entries")


def check_same_length(columns: Dict[str, Sequence[str]], what: str) -> int:
    """All ``columns`` (path → lines) must have the same number of lines; returns it."""
    counts = {path: len(lines) for path, lines in columns.items()}
    if len(set(counts.values())) > 1:
        listing = ", ".join(f"{path}: {n} lines" for path, n in counts.items())
        raise ContrastiveInputError(f"{what} must have one line per example, but {listing}")
    return next(iter(counts.values()))


def strip_missing(context: List[str]) -> List[str]:
    """Drop the empty sentences that stand for "before the document start" at the far end of a
    nearest-first context."""
    context = list(context)
    while context and not context[-1].strip():
        context.pop()
    return context
