"""fairseq's background batch thread does not abort the interpreter's exit once the plugin's fixes
are installed (as a task of the plugin installs them).

The script runs fairseq's ``BufferedIterator`` (fairseq-train's ``--data-buffer-size``) over
batches that keep its thread inside torch operations, and exits while the thread works: without
the plugin the process aborts ("terminate called without an active exception"), with it the
thread is ended first and the exit status is 0.
"""
import subprocess
import sys
import textwrap

EXIT_WHILE_COLLATING = textwrap.dedent("""
    import sys, time, torch
    from fairseq.data import iterators
    if sys.argv[1] == "plugin":
        from fairseq_ctx.core.fixes import install_fixes
        install_fixes()  # what building one of the plugin's tasks does

    class Batches:
        def __len__(self):
            return 10 ** 6

        def __iter__(self):
            rows = [torch.randn(64, 50) for _ in range(64)]
            while True:
                yield torch.stack(rows).sum()

    batches = iterators.BufferedIterator(10 ** 6, Batches())
    next(batches)
    time.sleep(0.2)
    print("exiting", flush=True)
""")


def exit_status(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", EXIT_WHILE_COLLATING, mode], capture_output=True, text=True,
                          timeout=120)


def test_exit_while_fairseq_collates_batches_is_clean_with_the_plugin():
    bare, plugin = exit_status("bare"), exit_status("plugin")
    assert "exiting" in bare.stdout and bare.returncode != 0, (
        "without the plugin this script is expected to abort at exit; if it no longer does, the "
        f"hook may be unnecessary: rc {bare.returncode}, {bare.stderr[-300:]}")
    assert "terminate called" in bare.stderr
    assert plugin.returncode == 0, plugin.stderr[-2000:]
    assert "exiting" in plugin.stdout and "terminate called" not in plugin.stderr
