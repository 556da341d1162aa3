"""Every change the plugin makes to fairseq's behaviour is one listed fix (fairseq_ctx.core.fixes):
registering the plugin and importing every tool installs none of them; building one of the
plugin's tasks installs them (for stock tasks only on request); each can be uninstalled and
installed again alone; FAIRSEQ_CTX_FIXES_OFF keeps fixes out by name; switched off, fairseq's stock
behaviour is seen, switched on, the fix's."""
import contextlib
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import TINY_MODEL, USER_DIR
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


def train(data, save_dir, *extra):
    call_tool("fairseq-train", [str(data), "--user-dir", USER_DIR, "--task", "context_translation", "--context-size",
                                "0", "--arch", "transformer", *TINY_MODEL, "--max-tokens", "300", "--seed", "1",
                                "--cpu", "--num-workers", "0", "--disable-validation", "--no-epoch-checkpoints",
                                "--log-format", "none", "--save-dir", str(save_dir), *extra])


def test_non_finite_step_message_off_is_fairseqs_own_ending(tiny_data, tmp_path):
    diverging = ["--optimizer", "sgd", "--lr", "1e30", "--max-update", "20"]
    with switched_off("non-finite-step-message"), pytest.raises(StopIteration):
        train(tiny_data, tmp_path / "stock", *diverging)
    with pytest.raises(FloatingPointError, match=r"^update 2: the loss or the gradients are not finite"):
        train(tiny_data, tmp_path / "fixed", *diverging)


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
