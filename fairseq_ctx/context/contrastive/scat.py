"""SCAT (Yin et al. (2021), github.com/neulab/contextual-mt ``data/scat``), English→French
ambiguous pronouns from the large contrastive pronoun set of Lopes et al. (2020).

A split is four line-aligned files: ``highlighted.{split}.{en,fr}`` (the sentence; the ambiguous
pronoun marked ``<p>…</p>``) and ``highlighted.{split}.context.{en,fr}`` (the preceding sentences
on one line, kept as one context segment; French words supporting the choice marked
``<hon>…<hoff>``). The contrastive translation flips the gender of every marked French pronoun
(il↔elle, ils↔elles, keeping the case). Markers are removed (and runs of spaces
collapsed) before scoring. Breakdowns:
``pronoun`` (the correct French pronoun; ``mixed`` when the marked ones differ) and ``support``
(where the marked supporting words are: ``context``, ``current``, ``both``, ``none``). A line
without a marked French pronoun has nothing to flip and is skipped (reported).

:func:`read_marked_context` reads the marked supporting words of one side's context, per word
of the unmarked line (``fairseq-ctx-supporting-attention``).
"""
import re
from dataclasses import dataclass
from typing import List, Tuple

from fairseq_ctx.context.contrastive.example import (Candidate, ContrastiveExample, ContrastiveInputError,
                                                     check_same_length, read_lines)

FLIP = {"il": "elle", "elle": "il", "ils": "elles", "elles": "ils"}
PRONOUN = re.compile(r"<p>(.*?)</p>")
SUPPORT = re.compile(r"<hon>.*?</?hoff>")
MARKER = re.compile(r"</?p>|<hon>|</?hoff>")
SIDES = ("source", "target")
OPEN, CLOSE = "\x01", "\x02"
SUPPORT_MARKERS = ((re.compile(r"<hon>"), OPEN), (re.compile(r"</?hoff>"), CLOSE), (re.compile(r"</?p>"), ""))


@dataclass(frozen=True)
class MarkedLine:
    """A context line without its markers, whether each of its whitespace words was (partly)
    inside ``<hon>…<hoff>``, and where it comes from (``file:line``)."""

    text: str
    marked: Tuple[bool, ...]
    origin: str


def unmark(text: str) -> str:
    return " ".join(MARKER.sub("", text).split())


def flip(word: str) -> str:
    other = FLIP[word.lower()]
    if word.isupper() and len(word) > 1:
        return other.upper()
    return other.capitalize() if word[0].isupper() else other


def support_of(current: str, context: str) -> str:
    in_context, in_current = bool(SUPPORT.search(context)), bool(SUPPORT.search(current))
    if in_context and in_current:
        return "both"
    return "context" if in_context else "current" if in_current else "none"


def read_scat(prefix: str, source_lang: str = "en",
              target_lang: str = "fr") -> Tuple[List[ContrastiveExample], List[str]]:
    """Read a split given by its prefix (``data/scat/highlighted.test``); returns the examples
    and the ``file:line`` of every skipped line."""
    paths = {"source": f"{prefix}.{source_lang}", "target": f"{prefix}.{target_lang}",
             "source context": f"{prefix}.context.{source_lang}", "target context": f"{prefix}.context.{target_lang}"}
    columns = {name: read_lines(path) for name, path in paths.items()}
    check_same_length({paths[name]: lines for name, lines in columns.items()}, "the SCAT files")
    examples, skipped = [], []
    for line, (source, target, source_context, target_context) in enumerate(
            zip(*(columns[name] for name in paths)), 1):
        where = f"{paths['target']}:{line}"
        if target.count("<p>") != target.count("</p>"):
            raise ContrastiveInputError(f"{where}: unbalanced <p> … </p> markers")
        pronouns = [p.strip() for p in PRONOUN.findall(target)]
        if not pronouns:
            skipped.append(where)
            continue
        for pronoun in pronouns:
            if pronoun.lower() not in FLIP:
                raise ContrastiveInputError(f"{where}: the marked pronoun {pronoun!r} is not il, elle, ils or elles; "
                                            f"SCAT's contrastive translation flips the gender of the marked pronoun")
        distinct = {p.lower() for p in pronouns}
        contrastive = PRONOUN.sub(lambda match: flip(match.group(1).strip()), target)
        examples.append(ContrastiveExample(
            source=unmark(source), source_context=[unmark(source_context)] if source_context.strip() else [],
            correct=Candidate(unmark(target), [unmark(target_context)] if target_context.strip() else []),
            contrastive=[Candidate(unmark(contrastive), [unmark(target_context)] if target_context.strip() else [])],
            labels={"pronoun": distinct.pop() if len(distinct) == 1 else "mixed",
                    "support": support_of(target, target_context)},
            origin=where,
            origins={"source": f"{paths['source']}:{line}"},
        ))
    return examples, skipped


def marked_words(line: str) -> Tuple[str, Tuple[bool, ...]]:
    """A SCAT line → its text with the markers removed and spaces collapsed (as the contrastive
    reader's ``unmark``) and, per whitespace word, whether any of it lies inside ``<hon>…<hoff>``."""
    for pattern, replacement in SUPPORT_MARKERS:
        line = pattern.sub(replacement, line)
    words, flags, inside = [], [], False
    for raw in line.split():
        word, marked = [], False
        for char in raw:
            if char == OPEN:
                inside = True
            elif char == CLOSE:
                inside = False
            else:
                word.append(char)
                marked |= inside
        if word:
            words.append("".join(word))
            flags.append(marked)
    return " ".join(words), tuple(flags)


def read_marked_context(prefix: str, side: str, source_lang: str = "en",
                        target_lang: str = "fr") -> Tuple[List[MarkedLine], int]:
    """The context lines of a SCAT split (``data/scat/highlighted.valid``) on ``side`` that have
    marked words, and the number of lines without any."""
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")
    lang = source_lang if side == "source" else target_lang
    path = f"{prefix}.context.{lang}"
    lines = read_lines(path)
    check_same_length({path: lines, f"{prefix}.{lang}": read_lines(f"{prefix}.{lang}")}, "the SCAT files")
    marked, unmarked = [], 0
    for number, line in enumerate(lines, 1):
        text, flags = marked_words(line)
        if any(flags):
            marked.append(MarkedLine(text, flags, f"{path}:{number}"))
        else:
            unmarked += 1
    if not marked:
        raise ContrastiveInputError(f"{path}: no context line has <hon>…<hoff> marks; SCAT marks its supporting "
                                    f"words in the French context (side 'target') and on some English training lines")
    return marked, unmarked
