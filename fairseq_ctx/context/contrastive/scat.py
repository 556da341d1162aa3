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
"""
import re
from typing import List, Tuple

from fairseq_ctx.context.contrastive.example import (Candidate, ContrastiveExample, ContrastiveInputError,
                                                     check_same_length, read_lines)

FLIP = {"il": "elle", "elle": "il", "ils": "elles", "elles": "ils"}
PRONOUN = re.compile(r"<p>(.*?)</p>")
SUPPORT = re.compile(r"<hon>.*?</?hoff>")
MARKER = re.compile(r"</?p>|<hon>|</?hoff>")


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
        ))
    return examples, skipped
