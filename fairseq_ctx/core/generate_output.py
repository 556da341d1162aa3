"""Reading the text output of ``fairseq-generate``: per sentence id, the source (``S-``), the
reference (``T-``), the best hypothesis (``H-``, tokenized) and its detokenized form (``D-``).

``S-``, ``T-`` and ``D-`` lines are already decoded by fairseq (``--bpe`` / ``--tokenizer``
undone); ``H-`` lines only have ``--post-process`` applied. With ``--nbest`` > 1 the first
hypothesis of a sentence is its best.
"""
from typing import Dict, Tuple

FIELDS = {"S": 1, "T": 1, "H": 2, "D": 2}


def read_generate_lines(path: str) -> Dict[str, Dict[int, str]]:
    """{"S": {id: text}, "T": ..., "H": ..., "D": ...}; the first line of each kind per id."""
    lines: Dict[str, Dict[int, str]] = {kind: {} for kind in FIELDS}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            kind, _, rest = line.rstrip("\n").partition("-")
            if kind not in FIELDS:
                continue
            fields = rest.split("\t")
            if not fields[0].isdigit():
                continue
            text = fields[FIELDS[kind]] if len(fields) > FIELDS[kind] else ""
            lines[kind].setdefault(int(fields[0]), text)
    return lines


def read_generate_output(path: str) -> Tuple[Dict[int, str], Dict[int, str]]:
    """Best hypothesis (first H line) and reference (T line) per sentence id."""
    lines = read_generate_lines(path)
    return lines["H"], lines["T"]
