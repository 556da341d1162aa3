"""Every file a tool writes appears whole or not at all: it is written to a temporary file in its
directory and renamed over its name (durably) only once complete, so a crash, a kill or a full
disk never leaves a partial file at the final name (nor destroys the file there before). A
full disk is named as such, with the file. Two runs writing the same output at once do not
silently lose one's result: the one that finishes second finds the file changed since it started,
keeps its own output beside it (``NAME.<pid>``) and says so. Otherwise the result is that of a
plain write: a new file gets the permissions the umask gives (``0o666 & ~umask``), a replaced file
keeps its own, and an output path that is a symbolic link is written through to the file it
points to (the link stays)."""
import contextlib
import errno
import json
import os
import tempfile
from typing import IO, Iterator, Optional, Tuple


def fsync_path(path: str, directory: bool = False) -> None:
    """Flush a file (any descriptor of it will do) or a directory entry to disk."""
    descriptor = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def replace_durably(written: str, destination: str) -> None:
    """fsync ``written``, rename it over ``destination`` and fsync the directory."""
    fsync_path(written)
    os.replace(written, destination)
    fsync_path(os.path.dirname(os.path.abspath(destination)), directory=True)


class OutputConflictError(OSError):
    """The output was written by someone else while this run wrote it."""


def _identity(path: str) -> Optional[Tuple[int, int, int]]:
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return None
    return status.st_ino, status.st_mtime_ns, status.st_size


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
    """A temporary path to write ``path``'s content to; renamed to ``path`` (the file a symbolic
    link there points to) when the block ends without an error, removed otherwise."""
    path = os.path.realpath(path) if os.path.islink(path) else path
    directory = os.path.dirname(os.path.abspath(path))
    before = _identity(path)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".partial", dir=directory)
    os.close(descriptor)
    os.chmod(temporary, _plain_write_mode(path))
    try:
        yield temporary
        if _identity(path) != before:
            kept = f"{path}.{os.getpid()}"
            replace_durably(temporary, kept)
            raise OutputConflictError(
                errno.EEXIST, f"{path} was written by another run while this one wrote it; this run's output is "
                              f"kept as {kept} (give each run its own output)")
        replace_durably(temporary, path)
    except OSError as error:
        if error.errno == errno.ENOSPC and path not in str(error):
            raise OSError(errno.ENOSPC, f"no space left on the device while writing {path}: nothing was written "
                                        f"there; free space or write to another disk") from error
        raise
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _plain_write_mode(path: str) -> int:
    """The permissions ``open(path, "w")`` would leave: the replaced file's, else 0o666 less the umask
    (mkstemp makes its file 0o600 whatever the umask)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def reserve_space(path: str, name: str) -> None:
    """Allocate the whole of ``path`` on disk now (a memory-mapped file is sparse: a full disk would
    surface as SIGBUS at some later row); a full disk raises ``OSError`` naming ``name``."""
    descriptor = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(descriptor, 0, os.fstat(descriptor).st_size)
    except OSError as error:
        if error.errno == errno.ENOSPC:
            raise OSError(errno.ENOSPC, f"no space left on the device for {name} ({os.fstat(descriptor).st_size} "
                                        f"bytes): nothing was written there; free space or write to another disk") \
                from error
        if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # a file system without allocation: written as it goes
            raise
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def atomic_output(path: str, binary: bool = False, newline: Optional[str] = None) -> Iterator[IO]:
    """A handle (text in UTF-8, or ``binary``) writing ``path`` atomically (:func:`atomic_path`)."""
    with atomic_path(path) as temporary:
        with open(temporary, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8", "newline": newline})) \
                as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())


def write_text(path: str, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_output(path) as handle:
        handle.write(text)


def write_json(path: str, data: object, indent: Optional[int] = 2) -> None:
    """Write ``data`` as JSON (UTF-8, non-ASCII kept) to ``path`` atomically."""
    with atomic_output(path) as handle:
        json.dump(data, handle, indent=indent, ensure_ascii=False)
        handle.write("\n")
