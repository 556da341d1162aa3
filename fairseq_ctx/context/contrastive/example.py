"""What every importer produces: contrastive examples with source- and target-side context,
and the shared file-reading helpers that name the file and line of malformed input."""
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence


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
    examples the set scores together (a DiscEvalMT block); ``origin`` locates it in the input."""

    source: str
    source_context: List[str]
    correct: Candidate
    contrastive: List[Candidate]
    labels: Dict[str, str] = field(default_factory=dict)
    group: Optional[str] = None
    origin: str = ""

    @property
    def candidates(self) -> List[Candidate]:
        return [self.correct, *self.contrastive]


def read_lines(path: str) -> List[str]:
    """Lines of a UTF-8 text file without their line ends; a missing file is an input error."""
    if not os.path.isfile(path):
        raise ContrastiveInputError(f"{path}: no such file")
    with open(path, encoding="utf-8") as handle:
        return [line.rstrip("\r\n") for line in handle]


def load_json(path: str) -> Any:
    """Parse a JSON test set; a syntax error names the file, line and column."""
    if not os.path.isfile(path):
        raise ContrastiveInputError(f"{path}: no such file")
    with open(path, encoding="utf-8") as handle:
        try:
            return json.load(handle)
        except json.JSONDecodeError as err:
            raise ContrastiveInputError(f"{path}:{err.lineno}:{err.colno}: not valid JSON ({err.msg})") from None


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
