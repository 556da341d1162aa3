"""Reading the text output of ``fairseq-generate``: per sentence id, the source (``S-``), the
reference (``T-``), the best hypothesis (``H-``, tokenized) and its detokenized form (``D-``),
and how many sentences fairseq-generate says it translated (its last line, ``Translated N
sentences``), from which a cut-off output is told apart from a whole one.

``S-``, ``T-`` and ``D-`` lines are already decoded by fairseq (``--bpe`` / ``--tokenizer``
undone); ``H-`` lines only have ``--post-process`` applied. With ``--nbest`` > 1 the first
hypothesis of a sentence is its best.
"""
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from fairseq_ctx.core.text_input import utf8_lines

FIELDS = {"S": 1, "T": 1, "H": 2, "D": 2}
TRANSLATED = re.compile(r"\bTranslated ([\d,]+) sentences\b")


@dataclass
class GenerateOutput:
    """The lines of one fairseq-generate output, ``{"S": {id: text}, "T": ..., "H": ..., "D": ...}``
    (the first line of each kind per id), and the N of its ``Translated N sentences`` line (None
    when the output has none: cut off, or only the sentence lines were kept)."""

    path: str
    lines: Dict[str, Dict[int, str]]
    translated: Optional[int]

    def missing(self) -> Tuple[int, List[int]]:
        """(sentences the split has at least, ids among them without a hypothesis): ids run from 0,
        so a gap, or fewer hypotheses than fairseq-generate says it translated, means sentences
        are missing (a cut-off output, or sentences generate left out)."""
        ids = set(self.lines["D"] or self.lines["H"])
        expected = max(self.translated or 0, max(ids, default=-1) + 1)
        missing = [i for i in range(expected) if i not in ids]
        return expected, missing

    def incomplete(self) -> Optional[str]:
        """Why the output does not cover its split, or None."""
        expected, missing = self.missing()
        present = expected - len(missing)
        if not missing:
            return None
        return (f"{self.path} has hypotheses for {present} of the {expected} sentences of its split ({len(missing)} "
                f"missing, first: sentence {missing[0]}): the output is cut off (an interrupted run, or part of its "
                f"lines copied) or fairseq-generate left sentences out (--skip-invalid-size-inputs-valid-test)")


def read_generate(path: str) -> GenerateOutput:
    """Read a fairseq-generate output (UTF-8; other bytes are an error naming the line)."""
    lines: Dict[str, Dict[int, str]] = {kind: {} for kind in FIELDS}
    translated = None
    with open(path, "rb") as handle:
        for line in utf8_lines(handle, path):
            kind, _, rest = line.rstrip("\n").partition("-")
            if kind not in FIELDS:
                found = TRANSLATED.search(line)
                translated = int(found.group(1).replace(",", "")) if found else translated
                continue
            fields = rest.split("\t")
            if not fields[0].isdigit():
                continue
            text = fields[FIELDS[kind]] if len(fields) > FIELDS[kind] else ""
            lines[kind].setdefault(int(fields[0]), text)
    return GenerateOutput(path, lines, translated)


def read_generate_lines(path: str) -> Dict[str, Dict[int, str]]:
    """{"S": {id: text}, "T": ..., "H": ..., "D": ...}; the first line of each kind per id."""
    return read_generate(path).lines


def read_generate_output(path: str) -> Tuple[Dict[int, str], Dict[int, str]]:
    """Best hypothesis (first H line) and reference (T line) per sentence id."""
    lines = read_generate_lines(path)
    return lines["H"], lines["T"]
