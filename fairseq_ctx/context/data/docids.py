"""Reading and validating the ``{split}.docids`` file that aligns sentences with documents."""
import os
from typing import List

import numpy as np

from fairseq_ctx.core.text_input import TextEncodingError, read_utf8_lines

PREPARE_HINT = (
    "Create it with `fairseq-ctx-prepare-docs` (one document id per source line, "
    "same order as the text given to fairseq-preprocess) and copy it next to the "
    "binarized data: cp PREFIX.docids DATA_BIN/{split}.docids"
)


class DocumentIdError(ValueError):
    """A docids file is missing, empty or does not line up with its split."""


def docids_path(data_dir: str, split: str) -> str:
    return os.path.join(data_dir, f"{split}.docids")


def read_docids(path: str, split: str, expected_count: int) -> np.ndarray:
    """Return one integer document code per sentence (codes are consecutive per document).

    Raises :class:`DocumentIdError` naming the file, the line and the fix when the file is
    missing, is not UTF-8, has a blank line, has a different number of lines than the split has
    sentences, or when a document's sentences are not contiguous.
    """
    if not os.path.exists(path):
        raise DocumentIdError(
            f"context_translation: missing document-id file {path} for split '{split}' "
            f"({expected_count} sentences). " + PREPARE_HINT.format(split=split)
        )
    try:
        ids: List[str] = read_utf8_lines(path)
    except TextEncodingError as err:
        raise DocumentIdError(f"context_translation: {err}") from None
    if len(ids) != expected_count:
        raise DocumentIdError(
            f"context_translation: {path} has {len(ids)} lines but split '{split}' has "
            f"{expected_count} sentences; line i of the docids must give the document of "
            f"source sentence i. Regenerate it from the same text you binarized. "
            + PREPARE_HINT.format(split=split)
        )
    codes = np.empty(len(ids), dtype=np.int64)
    seen = {}
    previous = None
    for line_no, doc in enumerate(ids, start=1):
        doc = doc.strip()
        if not doc:
            raise DocumentIdError(f"context_translation: {path}:{line_no} is blank; every line needs a document id")
        if doc != previous:
            if doc in seen:
                raise DocumentIdError(
                    f"context_translation: {path}:{line_no}: document {shown(doc)} continues after "
                    f"document {shown(previous)} started at line {seen[previous]} (first seen at line "
                    f"{seen[doc]}); the sentences of a document must be contiguous and in order"
                    + (" (the ids are shown escaped: they hold characters that do not print, such as a "
                       "zero-width space)" if not (doc.isprintable() and previous.isprintable()) else "")
                )
            seen[doc] = line_no
            previous = doc
        codes[line_no - 1] = len(seen) - 1
    return codes


def shown(doc: str) -> str:
    """A document id as a message shows it: quoted, characters that do not print (zero-width
    spaces, control characters) escaped so that two ids that look alike can be told apart."""
    return repr(doc) if doc.isprintable() else ascii(doc)


def document_positions(codes: np.ndarray) -> np.ndarray:
    """Index of each sentence within its document (0 for document-initial sentences)."""
    if len(codes) == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.concatenate([[True], codes[1:] != codes[:-1]])
    start_index = np.maximum.accumulate(np.where(starts, np.arange(len(codes)), 0))
    return np.arange(len(codes)) - start_index
