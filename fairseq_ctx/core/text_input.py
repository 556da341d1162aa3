"""The one reader of the package's text inputs: line by line as UTF-8, with an error that names the
file, the line and the byte offset of the first byte that is not UTF-8 (instead of a
UnicodeDecodeError traceback). A UTF-8 byte-order mark at the start of a file is dropped (it is
not text: kept, it would become part of the first word, document id or label); ``\r\n`` is read
as ``\n``; a carriage return inside a line and a NUL byte are refused naming the file and line
(Python's text mode would split the line at a lone ``\r``, fairseq-preprocess splits there too,
and the two files of a pair would no longer align)."""
from typing import BinaryIO, Iterator, List


BYTE_ORDER_MARK = "\ufeff"


class TextEncodingError(ValueError):
    """A text input holds bytes that are not UTF-8."""


def utf8_lines(handle: BinaryIO, name: str) -> Iterator[str]:
    """Decode a binary stream line by line (``\\r\\n`` read as ``\\n``, as text mode does; a
    byte-order mark at its start dropped), raising :class:`TextEncodingError` at the first line
    that is not UTF-8 or holds a lone carriage return or a NUL byte."""
    offset = 0
    for line_no, raw in enumerate(handle, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise TextEncodingError(
                f"{name}:{line_no}: not valid UTF-8 (byte 0x{raw[err.start]:02x} at byte offset {offset + err.start} "
                f"of the file, byte {err.start + 1} of the line); convert the text to UTF-8 (e.g. "
                f"iconv -f LATIN1 -t UTF-8, for Latin-1 text) and write it to a new file"
            ) from None
        offset += len(raw)
        if line_no == 1 and line.startswith(BYTE_ORDER_MARK):
            line = line[1:]
        line = line[:-2] + "\n" if line.endswith("\r\n") else line
        if "\r" in line:
            raise TextEncodingError(
                f"{name}:{line_no}: a carriage return (\\r) inside the line, where other tools would end it; remove "
                f"it (e.g. tr -d '\\r' < FILE > NEW) or replace it with a space, and write a new file")
        if "\x00" in line:
            raise TextEncodingError(f"{name}:{line_no}: a NUL byte (\\0) in the line: this is not a text file, or "
                                    f"it is UTF-16 (convert with iconv -f UTF-16 -t UTF-8)")
        yield line


def read_utf8_lines(path: str) -> List[str]:
    """All lines of a UTF-8 text file, without their line ends."""
    with open(path, "rb") as handle:
        return [line.rstrip("\n") for line in utf8_lines(handle, path)]


def check_utf8(path: str) -> None:
    """Read a whole file once, raising :class:`TextEncodingError` at its first line that is not UTF-8."""
    with open(path, "rb") as handle:
        for _ in utf8_lines(handle, path):
            pass
