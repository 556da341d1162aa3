"""Jobs of a recipe (one model of one seed each) run side by side: ``--jobs`` at a time, each in a
fresh process with ``--threads`` torch threads and its log in its own file, so the logs of
concurrent jobs never mix; with one job at a time they run in this process, logging here."""
import concurrent.futures
import contextlib
import logging
import multiprocessing
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List

logger = logging.getLogger(__name__)


@dataclass
class Job:
    """``function(argument)``; both picklable (a module-level function and plain data)."""

    name: str
    function: Callable[[object], None]
    argument: object
    log: Path


def _in_own_process(job: Job, threads: int) -> float:
    import torch

    torch.set_num_threads(threads)
    job.log.parent.mkdir(parents=True, exist_ok=True)
    start = time.time()
    with open(job.log, "a", encoding="utf-8") as stream, \
            contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
        root = logging.getLogger()
        for handler in list(root.handlers):
            root.removeHandler(handler)
        handler = logging.StreamHandler(stream)
        handler.setFormatter(logging.Formatter("%(asctime)s | %(levelname)s | %(name)s | %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        try:
            job.function(job.argument)
        except Exception:
            traceback.print_exc(file=stream)
            raise
    return time.time() - start


def run_jobs(jobs: List[Job], parallel: int, threads: int) -> Dict[str, str]:
    """Run every job, ``parallel`` at a time; returns ``{job name: error}`` of the jobs that failed
    (the others go on)."""
    failures: Dict[str, str] = {}
    if parallel <= 1 or len(jobs) <= 1:
        import torch

        torch.set_num_threads(threads)
        for job in jobs:
            start = time.time()
            try:
                job.function(job.argument)
            except Exception as err:  # one failed model does not stop the others
                logger.exception("%s failed", job.name)
                failures[job.name] = f"{type(err).__name__}: {err}"
            else:
                logger.info("%s: done in %.1f min", job.name, (time.time() - start) / 60)
        return failures
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=parallel, mp_context=context,
                                                max_tasks_per_child=1) as pool:
        futures = {pool.submit(_in_own_process, job, threads): job for job in jobs}
        for job in jobs:
            logger.info("%s: queued (log: %s)", job.name, job.log)
        for future in concurrent.futures.as_completed(futures):
            job = futures[future]
            try:
                seconds = future.result()
            except Exception as err:
                failures[job.name] = f"{type(err).__name__}: {err} (log: {job.log})"
                logger.error("%s failed: %s", job.name, failures[job.name])
            else:
                logger.info("%s: done in %.1f min (log: %s)", job.name, seconds / 60, job.log)
    return failures
