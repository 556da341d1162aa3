"""The fix ``one-training-per-save-dir``: one training per save directory (installed with the
plugin's other fixes, :mod:`fairseq_ctx.core.fixes`).

Two ``fairseq-train`` runs given the same ``--save-dir`` write the same checkpoint names through
the same temporary files (``NAME.tmp``): one run's rename fails mid-save, or a checkpoint ends up
holding parts of both and fails its own CRC check, while both runs go on. With the plugin, the
first process of a training (data-parallel rank 0; the other ranks are the same training) holds an
exclusive ``flock`` on the save directory itself from the moment its trainer is built to its exit,
and a second training into that directory stops before its first step, naming the process that
holds it (read from ``/proc/locks`` where the system has it). Nothing is written into the
directory. A run that saves nothing (``--no-save``) takes no lock. A process holds one lock: the
trainings of one process run one after the other (a script or test calling fairseq-train twice),
so building a trainer releases the lock of the one before. The lock is the kernel's: it ends with
the process, so a killed run leaves nothing to clean up.
"""
import fcntl
import os
from typing import Dict

from fairseq.trainer import Trainer

from fairseq_ctx.core.fixes.attribution import spoken_by


LOCKS_TABLE = "/proc/locks"  # Linux: one line per lock, "N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE START END"
_held: Dict[str, int] = {}  # the save directory (real path) this process trains into -> its locked descriptor


class SaveDirInUseError(RuntimeError):
    """Another training holds the save directory."""


def lock_save_dir(save_dir: str) -> None:
    """Hold the training lock of ``save_dir`` for this process; raises :class:`SaveDirInUseError`
    while another process holds it."""
    os.makedirs(save_dir, exist_ok=True)
    key = os.path.realpath(save_dir)
    if key in _held:
        return
    release_save_dir()
    descriptor = os.open(save_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = lock_holder(descriptor)
        os.close(descriptor)
        raise SaveDirInUseError(
            f"--save-dir {save_dir} is in use by another training (process {holder}): two trainings in one save "
            f"directory overwrite each other's checkpoints. Give this run its own --save-dir, or wait for the other "
            f"to end" + spoken_by("one-training-per-save-dir")) from None
    _held[key] = descriptor


def lock_holder(descriptor: int) -> str:
    """The process id holding a flock on the file of ``descriptor``, or "unknown"."""
    info = os.fstat(descriptor)
    inode = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    try:
        with open(LOCKS_TABLE, encoding="ascii") as table:
            for line in table:
                fields = line.split()
                if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == inode:
                    return fields[4]
    except OSError:
        pass
    return "unknown"


def release_save_dir() -> None:
    """Release the lock this process holds, if any."""
    for descriptor in _held.values():
        os.close(descriptor)
    _held.clear()


def _init(original, trainer: Trainer, cfg, *args, **kwargs) -> None:
    if cfg.distributed_training.distributed_rank == 0 and not cfg.checkpoint.no_save:
        lock_save_dir(cfg.checkpoint.save_dir)
    original(trainer, cfg, *args, **kwargs)

