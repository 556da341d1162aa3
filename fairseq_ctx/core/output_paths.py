"""No tool writes over one of its inputs: every output path is compared with every input as a
file (``os.path.samefile``: symbolic links, hard links and relative spellings of one file are the
same file), and the corpus generators refuse a directory that already holds files unless
``--overwrite`` is given. Every output must also be writable where it is named (an existing,
writable directory; not a directory itself), so that no result is lost after the work is done.
Checked right after argument parsing, before any model is loaded."""
import fnmatch
import os
import stat
import tempfile
from typing import Iterable, List, Mapping, Optional, Sequence, Tuple, Union

PathSpec = Union[None, str, Sequence[Optional[str]]]


class OutputPathError(ValueError):
    """An output path that names one of the tool's inputs (or another output), or a generator's
    output directory that already holds files."""


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file: ``os.path.samefile`` when both exist (links, relative
    paths), else the fully resolved paths are compared."""
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def _flatten(paths: Mapping[str, PathSpec]) -> List[Tuple[str, str]]:
    flat = []
    for label, value in paths.items():
        values = [value] if value is None or isinstance(value, (str, os.PathLike)) else list(value)
        flat.extend((label, os.fspath(path)) for path in values if path)
    return flat


def check_outputs(outputs: Mapping[str, PathSpec], inputs: Mapping[str, PathSpec]) -> None:
    """Raise :class:`OutputPathError` when an output (label → path or paths) is the same file as an
    input or as another output. Labels are the options as the user typed them (``--json``)."""
    written = _flatten(outputs)
    read = _flatten(inputs)
    for out_label, out_path in written:
        for in_label, in_path in read:
            if same_file(out_path, in_path):
                raise OutputPathError(
                    f"{out_label} {out_path} is one of the inputs: the same file as {in_label} {in_path}; writing it "
                    f"would destroy the input. Choose another output path"
                )
    for number, (label_a, path_a) in enumerate(written):
        for label_b, path_b in written[number + 1:]:
            if same_file(path_a, path_b):
                raise OutputPathError(
                    f"{label_a} {path_a} and {label_b} {path_b} are the same file; give each output its own path"
                )


def check_writable(outputs: Mapping[str, PathSpec], creates_directories: bool = False) -> None:
    """Raise :class:`OutputPathError` when an output names a directory, or lies in a directory that
    does not exist (unless the tool ``creates_directories``: then its nearest existing parent) or in
    which no file can be created (tried, so that a read-only file system or a root-owned directory is
    found before any long work, not when the result is written)."""
    for label, path in _flatten(outputs):
        if os.path.isdir(path):
            raise OutputPathError(f"{label} {path} is a directory; give the name of the file to write")
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            if not creates_directories:
                raise OutputPathError(f"{label} {path}: the directory {directory} does not exist; create it first "
                                      f"(mkdir -p {directory}) or choose another path")
            while not os.path.isdir(directory) and os.path.dirname(directory) != directory:
                directory = os.path.dirname(directory)
        problem = creation_problem(directory)
        if problem:
            raise OutputPathError(f"{label} {path}: no file can be written in {directory} ({problem}); choose another "
                                  f"path")


def creation_problem(directory: str) -> Optional[str]:
    """Why no file can be created in ``directory`` (None when one can): a probe file is created and
    removed, since ``os.access`` says yes to root on a directory it cannot write (read-only mounts)."""
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".write-probe-"):
            return None
    except OSError as err:
        return err.strerror or str(err)


def data_files(directory: Optional[str], patterns: Iterable[str]) -> List[str]:
    """The files of a directory matching one of the shell ``patterns``; an absent directory gives none."""
    if not directory or not os.path.isdir(directory):
        return []
    patterns = list(patterns)
    return sorted(os.path.join(directory, name) for name in os.listdir(directory)
                  if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns))


def split_files(directory: Optional[str], *splits: str) -> List[str]:
    """What a task reads from a data directory for ``splits``: the dictionaries and each split's
    binarized text, document ids, feature files and their row maps."""
    patterns = ["dict.*.txt"]
    for split in splits:
        patterns += [f"{split}.*.bin", f"{split}.*.idx", f"{split}.docids", f"{split}.*.npy", f"{split}.*.ids"]
    return data_files(directory, patterns)


def check_output_dir(directory: str, overwrite: bool) -> None:
    """A generator's output directory must be new or empty, unless ``overwrite``."""
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise OutputPathError(f"output directory {directory} exists and is not a directory; choose a new directory")
    entries = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    if entries and not overwrite:
        shown = ", ".join(entries[:3]) + (f" and {len(entries) - 3} more" if len(entries) > 3 else "")
        raise OutputPathError(
            f"output directory {directory} is not empty (it holds {shown}); the generated files "
            f"would replace or mix with them. Choose a new or empty directory, or pass --overwrite to write "
            f"into it anyway"
        )


def stdout_is(path: str) -> bool:
    """Whether standard output is redirected into ``path`` (e.g. ``tool --input a.txt >> a.txt``)."""
    try:
        out = os.fstat(1)
        target = os.stat(path)
    except OSError:
        return False
    return (out.st_dev, out.st_ino) == (target.st_dev, target.st_ino)


def stdout_is_stdin() -> bool:
    """Whether standard input and standard output are one regular file (``tool < a.txt 1<> a.txt``,
    ``tool < a.txt >> a.txt``); a terminal or pipe on both ends is not."""
    try:
        out, into = os.fstat(1), os.fstat(0)
    except OSError:
        return False
    return stat.S_ISREG(out.st_mode) and (out.st_dev, out.st_ino) == (into.st_dev, into.st_ino)

