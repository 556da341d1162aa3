"""The fix ``atomic-checkpoint-writes``: crash-safe checkpoint files for fairseq-train.

fairseq writes a checkpoint to ``NAME.tmp`` and renames it (``torch_persistent_save``), but
without fsync, and copies it to ``checkpoint_last.pt``, ``checkpoint_best.pt`` and the epoch
files with a plain ``shutil.copyfile``: a kill or power loss during the copy leaves a truncated
``checkpoint_last.pt``, the file the next run resumes from. Importing the plugin gives fairseq's
``checkpoint_utils`` a ``PathManager`` whose ``rename`` fsyncs the written file before
``os.replace`` and whose ``copy`` writes a temporary file in the destination's directory,
fsyncs it and replaces the destination, so every checkpoint name always holds a complete file.
fairseq's save logic itself is unchanged; nothing runs per training step.
"""
import os
import shutil

from fairseq import checkpoint_utils
from fairseq.file_io import PathManager

from fairseq_ctx.core.atomic_output import fsync_path, replace_durably

COPY_CHUNK_BYTES = 16 * 1024 * 1024


def atomic_copy(source: str, destination: str) -> None:
    """Copy through ``destination + '.tmp'`` (same directory, so the rename is atomic)."""
    temporary = destination + ".tmp"
    with open(source, "rb") as reader, open(temporary, "wb") as writer:
        shutil.copyfileobj(reader, writer, COPY_CHUNK_BYTES)
        writer.flush()
        os.fsync(writer.fileno())
    os.replace(temporary, destination)
    fsync_path(os.path.dirname(os.path.abspath(destination)), directory=True)


def _is_local(*paths: str) -> bool:
    return not any(PathManager.path_requires_pathmanager(path) for path in paths)


class AtomicCheckpointPathManager(PathManager):
    """fairseq's PathManager for ``checkpoint_utils``: durable renames, atomic local copies;
    remote (iopath) paths go to fairseq's own implementation."""

    @staticmethod
    def copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
        if not _is_local(src_path, dst_path):
            return PathManager.copy(src_path, dst_path, overwrite)
        atomic_copy(src_path, dst_path)
        return True

    @staticmethod
    def rename(src: str, dst: str) -> None:
        replace_durably(src, dst)


def install() -> None:
    """Make every checkpoint file fairseq writes atomic (idempotent)."""
    checkpoint_utils.PathManager = AtomicCheckpointPathManager
