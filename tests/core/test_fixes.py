"""Every change the plugin makes to fairseq's behaviour is one listed fix (fairseq_ctx.core.fixes):
registering the plugin and importing every tool installs none of them; building one of the
plugin's tasks installs them (for stock tasks only on request); each can be uninstalled and
installed again alone; FAIRSEQ_CTX_FIXES_OFF keeps fixes out by name; switched off, fairseq's stock
behaviour is seen, switched on, the fix's."""
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from typing import List

import pytest

from tests.helpers import TINY_MODEL, USER_DIR
from devtools.in_process_tools import call_tool
from fairseq_ctx.core.fixes import BY_NAME, FIXES, OFF_ENV, STOCK_TASKS_ENV, install_fixes, listing


@contextlib.contextmanager
def switched_off(name: str):
    """The fix ``name`` off, as FAIRSEQ_CTX_FIXES_OFF=name does (a task built inside installs the others)."""
    install_fixes()
    previous = os.environ.get(OFF_ENV)
    os.environ[OFF_ENV] = name
    BY_NAME[name].uninstall()
    try:
        yield
    finally:
        if previous is None:
            del os.environ[OFF_ENV]
        else:
            os.environ[OFF_ENV] = previous
        BY_NAME[name].install()


@pytest.mark.parametrize("name", [fix.name for fix in FIXES])
def test_each_fix_is_uninstalled_and_installed_alone(name):
    install_fixes()  # as a plugin task of this process does
    before = {fix.name: fix.active() for fix in FIXES}
    assert before[name] is (name != "interactive-utf8-reader" or "fairseq_cli.interactive" in sys.modules)
    with switched_off(name):
        assert {fix.name: fix.active() for fix in FIXES} == {**before, name: False}
    assert {fix.name: fix.active() for fix in FIXES} == before


REGISTER_PROBE = """
import importlib, json, pkgutil, sys
import torch.serialization
import fairseq, fairseq.checkpoint_utils as cu, fairseq.trainer as tr, fairseq_cli.interactive as fi

def targets():
    return {"load_checkpoint": cu.load_checkpoint, "load_checkpoint_to_cpu": cu.load_checkpoint_to_cpu,
            "load_model_ensemble_and_task": cu.load_model_ensemble_and_task, "PathManager": cu.PathManager,
            "Trainer.__init__": tr.Trainer.__init__, "Trainer._build_optimizer": tr.Trainer._build_optimizer,
            "Trainer.train_step": tr.Trainer.train_step, "buffered_read": fi.buffered_read}

stock, safe, hook, finders = targets(), len(torch.serialization.get_safe_globals()), sys.excepthook, list(sys.meta_path)
import fairseq_ctx, fairseq_ctx.cli  # registers the plugin, as --user-dir does
for module in pkgutil.iter_modules(fairseq_ctx.cli.__path__):
    importlib.import_module("fairseq_ctx.cli." + module.name)
from fairseq import options, tasks
from fairseq_ctx.core.fixes import FIXES

def seen():
    now = targets()
    return {"registered": "hmce" in __import__("fairseq.models", fromlist=["x"]).ARCH_MODEL_REGISTRY,
            "active": {f.name: f.active() for f in FIXES},
            "changed": sorted(k for k in stock if now[k] is not stock[k]),
            "safe_globals_added": len(torch.serialization.get_safe_globals()) - safe,
            "excepthook": sys.excepthook is hook, "meta_path": sys.meta_path == finders}

registered = seen()
if len(sys.argv) > 1:  # build a task: sys.argv[1] the data directory, sys.argv[2] the task
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [sys.argv[1], "--task", sys.argv[2], "--arch", "transformer"])
    tasks.setup_task(args)
print(json.dumps({"registered": registered, "task_built": seen()}))
"""


def register_in_fresh_process(environment: dict, *task: str) -> dict:
    env = {**os.environ, **environment}
    for name in (OFF_ENV, STOCK_TASKS_ENV):
        if name not in environment:
            env.pop(name, None)
    result = subprocess.run([sys.executable, "-c", REGISTER_PROBE, *task], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_registering_the_plugin_and_importing_every_tool_change_nothing():
    """As --user-dir does: fairseq's functions, torch's allow-list, sys.excepthook and sys.meta_path
    stay as they were, and no fix is active."""
    seen = register_in_fresh_process({})["registered"]
    assert seen["registered"] and not any(seen["active"].values())
    assert seen["changed"] == [] and seen["safe_globals_added"] == 0
    assert seen["excepthook"] and seen["meta_path"]


def test_a_stock_task_gets_no_fix_a_plugin_task_every_fix(tiny_data):
    stock_task = register_in_fresh_process({}, str(tiny_data), "translation")["task_built"]
    assert stock_task["changed"] == [] and not any(stock_task["active"].values())
    plugin_task = register_in_fresh_process({}, str(tiny_data), "context_translation")["task_built"]
    assert all(plugin_task["active"].values())  # the probe imported fairseq-interactive: its reader too
    assert plugin_task["changed"] == ["PathManager", "Trainer.__init__", "Trainer._build_optimizer",
                                      "Trainer.train_step", "buffered_read", "load_checkpoint",
                                      "load_checkpoint_to_cpu", "load_model_ensemble_and_task"]


def test_stock_tasks_get_the_fixes_on_request_and_a_fix_named_off_is_never_installed():
    requested = register_in_fresh_process({STOCK_TASKS_ENV: "1", OFF_ENV: "resume-rules"})["registered"]
    assert requested["active"] == {fix.name: fix.name != "resume-rules" for fix in FIXES}
    assert "load_checkpoint" not in requested["changed"] and "load_checkpoint_to_cpu" in requested["changed"]
    everything_off = register_in_fresh_process({STOCK_TASKS_ENV: "1", OFF_ENV: "all"})["registered"]
    assert everything_off["changed"] == [] and everything_off["safe_globals_added"] == 0


def test_an_unknown_fix_name_is_refused_naming_the_fixes():
    result = subprocess.run([sys.executable, "-c", "import fairseq, fairseq_ctx"], capture_output=True, text=True,
                            env={**os.environ, OFF_ENV: "resume-rule"})
    assert result.returncode != 0
    assert f"{OFF_ENV}: no fix named resume-rule; the fixes are atomic-checkpoint-writes," in result.stderr


def test_the_listing_names_every_fix_its_state_and_the_switch():
    text = listing()
    for fix in FIXES:
        assert f"| `{fix.name}` | `{fix.target}` | {fix.change} | {fix.reason} |" in text
    assert f"{OFF_ENV}=NAME[,NAME...] (or all)" in text
    docs = (os.path.join(os.path.dirname(__file__), "..", "..", "docs", "fixes.md"))
    with open(docs, encoding="utf-8") as handle:
        page = handle.read()
    assert all(f"| `{fix.name}` | `{fix.target}` | {fix.change} | {fix.reason} |" in page for fix in FIXES)


def spoken(name: str) -> str:
    """How a message a fix adds to fairseq ends: the fix and its switch."""
    return f" [fairseq-ctx fix {name}; FAIRSEQ_CTX_FIXES_OFF={name} switches it off]"


def train(data, save_dir, *extra):
    call_tool("fairseq-train", [str(data), "--user-dir", USER_DIR, "--task", "context_translation", "--context-size",
                                "0", "--arch", "transformer", *TINY_MODEL, "--max-tokens", "300", "--seed", "1",
                                "--cpu", "--num-workers", "0", "--disable-validation", "--no-epoch-checkpoints",
                                "--log-format", "none", "--save-dir", str(save_dir), *extra])


def test_non_finite_step_message_off_is_fairseqs_own_ending(tiny_data, tmp_path):
    diverging = ["--optimizer", "sgd", "--lr", "1e30", "--max-update", "20"]
    with switched_off("non-finite-step-message"), pytest.raises(StopIteration):
        train(tiny_data, tmp_path / "stock", *diverging)
    with pytest.raises(FloatingPointError, match=r"^update 2: the loss or the gradients are not finite") as fixed:
        train(tiny_data, tmp_path / "fixed", *diverging)
    assert str(fixed.value).endswith(spoken("non-finite-step-message"))


def test_resume_rules_off_train_from_scratch_past_a_missing_restore_file(tiny_data, tmp_path):
    from fairseq_ctx.core.checkpoint_loading import CheckpointError

    missing = ["--optimizer", "adam", "--lr", "1e-3", "--max-update", "1", "--restore-file", str(tmp_path / "no.pt")]
    with switched_off("resume-rules"):
        train(tiny_data, tmp_path / "stock", *missing)  # stock fairseq: trains from scratch without a word
    assert (tmp_path / "stock" / "checkpoint_last.pt").is_file()
    with pytest.raises(CheckpointError, match="--restore-file: checkpoint .* does not exist"):
        train(tiny_data, tmp_path / "fixed", *missing)


def test_cpu_mixed_precision_off_trains_amp_in_float32(tiny_data):
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.trainer import Trainer

    import torch

    argv = [str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation", "--arch", "hmce", *TINY_MODEL,
            "--cpu", "--amp", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "300"]

    def autocast_dtype():
        cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), argv))
        task = tasks.setup_task(cfg.task)
        Trainer(cfg, task, task.build_model(cfg.model), task.build_criterion(cfg.criterion))
        return task.autocast_dtype

    with switched_off("cpu-mixed-precision"):
        assert autocast_dtype() is None  # stock fairseq: --amp on the CPU trains in float32
    assert autocast_dtype() == torch.bfloat16


def copy_killed_half_way(monkeypatch):
    """Every copy in this process writes half of its source, then fails (a kill or a full disk mid-copy)."""
    import shutil

    def half(source, destination):
        with open(source, "rb") as reader, open(destination, "wb") as writer:
            copy_half(reader, writer)

    def copy_half(reader, writer, length=0):
        data = reader.read()
        writer.write(data[:len(data) // 2])
        raise OSError("killed mid-copy")

    monkeypatch.setattr(shutil, "copyfile", half)
    monkeypatch.setattr(shutil, "copyfileobj", copy_half)


def test_atomic_checkpoint_writes_off_a_copy_killed_mid_way_truncates_the_last_checkpoint(tmp_path, monkeypatch):
    from fairseq import checkpoint_utils

    new, last = tmp_path / "checkpoint_3_300.pt", tmp_path / "checkpoint_last.pt"
    new.write_bytes(b"n" * 1000)
    copy_killed_half_way(monkeypatch)

    def copy_over_the_last_checkpoint() -> bytes:
        last.write_bytes(b"o" * 1000)
        with pytest.raises(OSError, match="killed mid-copy"):
            checkpoint_utils.PathManager.copy(str(new), str(last), overwrite=True)
        return last.read_bytes()

    with switched_off("atomic-checkpoint-writes"):
        assert copy_over_the_last_checkpoint() == b"n" * 500  # stock: the old file is gone, half the new one there
    install_fixes()
    assert copy_over_the_last_checkpoint() == b"o" * 1000


def test_checked_checkpoint_reads_off_a_truncated_checkpoint_fails_inside_torch(tmp_path):
    from fairseq import checkpoint_utils

    from fairseq_ctx.core.checkpoint_loading import CheckpointError

    train(*tiny_train_args(tmp_path))
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes((tmp_path / "run" / "checkpoint_last.pt").read_bytes()[:5000])
    with switched_off("checked-checkpoint-reads"):
        with pytest.raises(Exception) as stock:
            checkpoint_utils.load_checkpoint_to_cpu(str(truncated))
    assert not isinstance(stock.value, CheckpointError) and str(truncated) not in str(stock.value)
    install_fixes()
    with pytest.raises(CheckpointError, match=re.escape(str(truncated))):
        checkpoint_utils.load_checkpoint_to_cpu(str(truncated))


def tiny_train_args(tmp_path):
    from tests.helpers import CorpusSizes, make_data_bin

    data = make_data_bin(tmp_path / "data", CorpusSizes(train=8, valid=2, test=2))
    return (data, tmp_path / "run", "--optimizer", "adam", "--lr", "1e-3", "--max-update", "1")


def test_checkpoint_settings_off_loads_a_checkpoint_into_reordered_dictionaries(tmp_path):
    from fairseq import checkpoint_utils

    from fairseq_ctx.core.checkpoint_loading import CheckpointError

    data, run, *rest = tiny_train_args(tmp_path)
    train(data, run, *rest)
    swapped = tmp_path / "swapped"
    shutil.copytree(data, swapped)
    for dictionary in swapped.glob("dict.*.txt"):
        lines = dictionary.read_text(encoding="utf-8").splitlines(keepends=True)
        lines[0], lines[1] = lines[1], lines[0]
        dictionary.write_text("".join(lines), encoding="utf-8")
    checkpoint = str(run / "checkpoint_last.pt")
    with switched_off("checkpoint-settings"):
        models, _, task = checkpoint_utils.load_model_ensemble_and_task([checkpoint], {"data": str(swapped)})
    assert models and task.source_dictionary.symbols[4] != task.source_dictionary.symbols[5]  # loaded, silently
    install_fixes()
    with pytest.raises(CheckpointError, match="dictionary read from .* is not the one .* was trained with"):
        checkpoint_utils.load_model_ensemble_and_task([checkpoint], {"data": str(swapped)})


def test_one_training_per_save_dir_off_a_second_training_writes_into_a_held_save_dir(tmp_path):
    import fcntl

    from fairseq_ctx.core.fixes.one_training_per_save_dir import SaveDirInUseError, release_save_dir

    data, run, *rest = tiny_train_args(tmp_path)
    run.mkdir()
    held = os.open(run, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as another training's process holds it
    try:
        with switched_off("one-training-per-save-dir"):
            train(data, run, *rest)
        assert (run / "checkpoint_last.pt").is_file()  # stock: written beside the other training's files
        (run / "checkpoint_last.pt").unlink()
        with pytest.raises(SaveDirInUseError, match=f"--save-dir {run} is in use by another training") as fixed:
            train(data, run, *rest)
        assert str(fixed.value).endswith(spoken("one-training-per-save-dir"))
        assert not (run / "checkpoint_last.pt").exists()
    finally:
        os.close(held)
        release_save_dir()


def test_interactive_utf8_reader_off_stops_at_a_bare_unicode_decode_error(tmp_path):
    import fairseq_cli.interactive as interactive

    source = tmp_path / "in.txt"
    source.write_bytes(b"a good line\nbad \xff byte\n")
    with switched_off("interactive-utf8-reader"):
        with pytest.raises(UnicodeDecodeError):
            list(interactive.buffered_read(str(source), 10))
    install_fixes()
    with pytest.raises(Exception, match=rf"^{re.escape(str(source))}:2: not valid UTF-8") as fixed:
        list(interactive.buffered_read(str(source), 10))
    assert not isinstance(fixed.value, UnicodeDecodeError)
    assert str(fixed.value).endswith(spoken("interactive-utf8-reader"))


BACKGROUND_PROBE = """
import atexit, os, sys, threading, time
from fairseq.data.iterators import BufferedIterator
import fairseq_ctx
fairseq_ctx.register()
class Endless:  # batches that never run out, collated slowly
    def __len__(self):
        return 10 ** 9
    def __iter__(self):
        while True:
            time.sleep(0.001)
            yield 0
batches = BufferedIterator(2, Endless())
next(batches)
def report():  # registered first, so run last of the exit functions
    print("ALIVE", any(t.is_alive() for t in threading.enumerate() if type(t).__name__ == "BackgroundConsumer"))
    sys.stdout.flush()
atexit.register(report)
from fairseq_ctx.core.fixes import install_fixes
install_fixes()
"""


def test_background_batch_exit_off_leaves_the_batch_thread_running_at_exit():
    def alive_at_exit(environment: dict) -> str:
        env = {**os.environ, **environment}
        result = subprocess.run([sys.executable, "-c", BACKGROUND_PROBE], capture_output=True, text=True, env=env,
                                timeout=120)
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout.split()[-1]

    assert alive_at_exit({OFF_ENV: "background-batch-exit"}) == "True"
    assert alive_at_exit({OFF_ENV: ""}) == "False"


def test_checkpoint_allow_list_off_weights_only_loading_refuses_a_fairseq_checkpoint(tmp_path):
    import argparse
    import pickle

    import torch

    path = tmp_path / "namespace.pt"
    torch.save({"args": argparse.Namespace(arch="transformer"), "model": {}}, path)
    with switched_off("checkpoint-allow-list"):
        with pytest.raises(pickle.UnpicklingError, match="Namespace"):
            torch.load(path, weights_only=True)
    install_fixes()
    assert torch.load(path, weights_only=True)["args"].arch == "transformer"


TIMES = [(re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \| "), ""),  # the logger's time stamp
         (re.compile(r"\b(wps|ups|wall|train_wall|gb_free)([= ])[\d.]+"), r"\1\2T"),
         (re.compile(r"[\d.]+ seconds"), "T seconds"),
         (re.compile(r"\buser_dir(': |=)('[^']*'|None)"), r"user_dir\1U")]


def without_times(line: str) -> str:
    for pattern, replacement in TIMES:
        line = pattern.sub(replacement, line)
    return line


def stock_translation_run(tiny_data, save_dir, updates: int, user_dir: bool, environment=None):
    """fairseq-train --task translation to ``updates``: its exit status and log lines without times
    (fairseq logs to stdout), --save-dir and --user-dir."""
    from tests.helpers import tool

    env = {k: v for k, v in os.environ.items() if k not in (OFF_ENV, STOCK_TASKS_ENV)}
    result = subprocess.run(
        [tool("fairseq-train"), str(tiny_data), *(["--user-dir", USER_DIR] if user_dir else []), "--task",
         "translation", "--arch", "transformer", *TINY_MODEL, "--optimizer", "adam", "--lr", "1e-3", "--max-tokens",
         "300", "--max-update", str(updates), "--seed", "1", "--cpu", "--num-workers", "0", "--log-format", "simple",
         "--log-interval", "1", "--save-dir", str(save_dir)],
        capture_output=True, text=True, env={**env, **(environment or {})})
    return result.returncode, [without_times(line).replace(str(save_dir), "SAVE_DIR")
                               for line in (result.stdout + result.stderr).splitlines()]


def test_a_stock_task_under_user_dir_trains_logs_and_resumes_exactly_as_stock_fairseq(tiny_data, tmp_path):
    """The same log and weights; and the same failed resume: stock fairseq 0.12 cannot read its own
    checkpoint under torch >= 2.6 (weights-only loading), with or without --user-dir, unless the
    fixes are asked for stock tasks."""
    import torch

    from fairseq_ctx.core.fixes.checkpoint_allow_list import fairseq_checkpoint_globals

    runs = {name: tmp_path / name for name in ("stock", "plugin", "requested")}
    first = {name: stock_translation_run(tiny_data, runs[name], 3, name != "stock") for name in runs}
    assert first["stock"][0] == 0 and [line for line in first["stock"][1] if "num_updates=3" in line]
    assert first["plugin"] == first["stock"]
    with torch.serialization.safe_globals(fairseq_checkpoint_globals()):
        a, b = (torch.load(runs[run] / "checkpoint_last.pt", weights_only=True) for run in ("stock", "plugin"))
    assert a["model"].keys() == b["model"].keys() and all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    resumed = {name: stock_translation_run(tiny_data, runs[name], 5, name != "stock") for name in ("stock", "plugin")}
    assert resumed["stock"][0] != 0 and "Weights only load failed" in "\n".join(resumed["stock"][1])
    assert resumed["plugin"] == resumed["stock"]
    status, lines = stock_translation_run(tiny_data, runs["requested"], 5, True, {STOCK_TASKS_ENV: "1"})
    assert status == 0 and [line for line in lines if "num_updates=5" in line]
