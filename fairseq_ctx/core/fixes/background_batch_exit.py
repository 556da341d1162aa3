"""The fix ``background-batch-exit``: a clean interpreter exit for fairseq's background batch
thread (installed with the plugin's other fixes, :mod:`fairseq_ctx.core.fixes`).

fairseq-train prepares the next ``--data-buffer-size`` batches (default 10) in a daemon thread,
``fairseq.data.iterators.BackgroundConsumer``. When training ends, that thread is usually still
collating batches with torch; a daemon thread inside a torch operation while the interpreter shuts
down aborts the process after everything was saved (``terminate called without an active
exception``, exit status 134), which breaks shell scripts that check the exit status. At exit,
before the interpreter finalizes, :func:`stop_background_batches` lets each such thread finish the
batch in hand and end: it is told that its last batch is reached (the thread's own ``max_len``
test) and its queue is emptied until it has put its end marker.
"""
import queue
import threading
import time

STOP_SECONDS = 30.0  # never hold up an exit longer than this


def _background_consumers():
    from fairseq.data.iterators import BackgroundConsumer

    return [t for t in threading.enumerate() if isinstance(t, BackgroundConsumer) and t.is_alive()]


def _empty(batches: queue.Queue) -> None:
    try:
        while True:
            batches.get_nowait()
    except queue.Empty:
        pass


def stop_background_batches(timeout: float = STOP_SECONDS) -> None:
    """End every live background batch thread of fairseq, waiting at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    for consumer in _background_consumers():
        consumer._max_len = 0  # the thread stops after the batch it is collating (count >= max_len)
        while consumer.is_alive() and time.monotonic() < deadline:
            _empty(consumer._queue)  # a full queue would block its last put
            consumer.join(0.01)

