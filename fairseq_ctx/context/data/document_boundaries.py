"""Sentence-per-line text with its document ids (the ``PREFIX.docids`` that fairseq-ctx-prepare-docs
writes beside ``PREFIX.{src,tgt}``) read as the blank-line documents of document translation: a
blank line goes where the id changes, and its (blank) translation is dropped again, so the output
has one line per input line and aligns with ``PREFIX.{tgt}`` for scoring."""
from collections import deque
from typing import Deque, Iterable, Iterator

from fairseq_ctx.context.data.docids import DocumentIdError
from fairseq_ctx.core.text_input import TextEncodingError, read_utf8_lines


class DocumentIdBoundaries:
    """The document boundaries of ``docids`` (one id per input line) for :meth:`lines`, and the
    translations of the input lines alone for :meth:`translations`."""

    def __init__(self, docids: str):
        try:
            self.ids = [line.strip() for line in read_utf8_lines(docids)]
        except TextEncodingError as err:
            raise DocumentIdError(str(err)) from None
        self.path = docids
        self.inserted: Deque[bool] = deque()

    def lines(self, lines: Iterable[str], name: str) -> Iterator[str]:
        """``lines`` with a blank line wherever the document id changes."""
        previous, count = None, 0
        for count, line in enumerate(lines, start=1):
            if count > len(self.ids):
                raise DocumentIdError(f"{name} has more lines than {self.path} ({len(self.ids)}): give one document id "
                                      f"per input line")
            if not line.strip():
                raise DocumentIdError(f"{name}:{count} is blank: with --docids every line is a sentence and the "
                                      f"documents come from {self.path}")
            if previous is not None and self.ids[count - 1] != previous:
                self.inserted.append(True)
                yield "\n"
            previous = self.ids[count - 1]
            self.inserted.append(False)
            yield line
        if count != len(self.ids):
            raise DocumentIdError(f"{name} has {count} lines but {self.path} has {len(self.ids)}: give the docids "
                                  f"written with this text")

    def translations(self, outputs: Iterable[str]) -> Iterator[str]:
        """The outputs of the input lines, without those of the blank lines :meth:`lines` put in."""
        for output in outputs:
            if not self.inserted.popleft():
                yield output
