"""The fix ``interactive-utf8-reader``: text input of stock ``fairseq-interactive`` read as UTF-8
with an error that names the line and the byte (installed with the plugin's other fixes,
:mod:`fairseq_ctx.core.fixes`).

fairseq-interactive reads its input with ``fileinput`` and stops at bytes that are not UTF-8
with a bare ``UnicodeDecodeError`` naming neither the input nor the line. Its ``buffered_read``
is replaced by one with the same buffers (stripped lines, ``--buffer-size`` at a time) that
decodes line by line (:func:`~fairseq_ctx.core.text_input.utf8_lines`), so the error says
``{input}:{line}: not valid UTF-8 (byte 0x.. at byte offset ..)`` and how to convert the text.
"""
import sys
from typing import Callable, Dict, Iterator, List

from fairseq_ctx.core.fixes.attribution import spoken_by
from fairseq_ctx.core.text_input import TextEncodingError, utf8_lines

INTERACTIVE = "fairseq_cli.interactive"
_stock: Dict[str, Callable] = {}  # fairseq-interactive's own reader while ours replaces it


def buffered_read(input: str, buffer_size: int) -> Iterator[List[str]]:
    """fairseq-interactive's buffers of ``--input`` (``-``: standard input), UTF-8 checked per line."""
    handle = sys.stdin.buffer if input == "-" else open(input, "rb")
    try:
        buffer: List[str] = []
        try:
            for line in utf8_lines(handle, "<stdin>" if input == "-" else input):
                buffer.append(line.strip())
                if len(buffer) >= buffer_size:
                    yield buffer
                    buffer = []
        except TextEncodingError as error:
            raise TextEncodingError(f"{error}{spoken_by('interactive-utf8-reader')}") from None
        if buffer:
            yield buffer
    finally:
        if handle is not sys.stdin.buffer:
            handle.close()


def install() -> None:
    """Replace fairseq-interactive's reader when that tool is running (idempotent)."""
    module = sys.modules.get(INTERACTIVE)
    if module is not None and hasattr(module, "buffered_read") and module.buffered_read is not buffered_read:
        _stock[INTERACTIVE] = module.buffered_read
        module.buffered_read = buffered_read


def uninstall() -> None:
    """Give fairseq-interactive its own reader back."""
    module = sys.modules.get(INTERACTIVE)
    if module is not None and INTERACTIVE in _stock:
        module.buffered_read = _stock.pop(INTERACTIVE)


def installed() -> bool:
    module = sys.modules.get(INTERACTIVE)
    return module is not None and getattr(module, "buffered_read", None) is buffered_read
