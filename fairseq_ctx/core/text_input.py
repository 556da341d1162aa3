"""Reading text inputs line by line as UTF-8, with an error that names the file, the line and the
byte offset of the first byte that is not UTF-8 (instead of a UnicodeDecodeError traceback)."""
from typing import BinaryIO, Iterator, List


class TextEncodingError(ValueError):
    """A text input holds bytes that are not UTF-8."""


def utf8_lines(handle: BinaryIO, name: str) -> Iterator[str]:
    """Decode a binary stream line by line (``\\r\\n`` read as ``\\n``, as text mode does), raising
    :class:`TextEncodingError` at the first line that is not UTF-8."""
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
        yield line[:-2] + "\n" if line.endswith("\r\n") else line


def read_utf8_lines(path: str) -> List[str]:
    """All lines of a UTF-8 text file, without their line ends."""
    with open(path, "rb") as handle:
        return [line.rstrip("\n") for line in utf8_lines(handle, path)]


def check_utf8(path: str) -> None:
    """Read a whole file once, raising :class:`TextEncodingError` at its first line that is not UTF-8."""
    with open(path, "rb") as handle:
        for _ in utf8_lines(handle, path):
            pass
