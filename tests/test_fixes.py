"""Every change the plugin makes to fairseq's behaviour is one listed fix (fairseq_ctx.core.fixes):
each can be uninstalled and installed again, leaving the others as they are; FAIRSEQ_CTX_FIXES_OFF
switches fixes off by name before registration, so that fairseq keeps its own functions; switched
off, fairseq's stock behaviour is seen, switched on, the fix's."""
import contextlib
import json
import os
import subprocess
import sys

import pytest

from conftest import TINY_MODEL, USER_DIR
from devtools.in_process_tools import call_tool
from fairseq_ctx.core.fixes import BY_NAME, FIXES, OFF_ENV, listing

ALWAYS_OFF_HERE = {"interactive-utf8-reader"}  # active only in a fairseq-interactive process


@contextlib.contextmanager
def switched_off(name: str):
    BY_NAME[name].uninstall()
    try:
        yield
    finally:
        BY_NAME[name].install()


@pytest.mark.parametrize("name", [fix.name for fix in FIXES])
def test_each_fix_is_uninstalled_and_installed_alone(name):
    before = {fix.name: fix.active() for fix in FIXES}
    assert before[name] is (name not in ALWAYS_OFF_HERE)
    with switched_off(name):
        assert {fix.name: fix.active() for fix in FIXES} == {**before, name: False}
    assert {fix.name: fix.active() for fix in FIXES} == before


REGISTER_PROBE = """
import json, sys
import torch.serialization
import fairseq, fairseq.checkpoint_utils as cu, fairseq.trainer as tr, fairseq_cli.interactive as fi
stock = {"load_checkpoint": cu.load_checkpoint, "load_checkpoint_to_cpu": cu.load_checkpoint_to_cpu,
         "load_model_ensemble_and_task": cu.load_model_ensemble_and_task, "PathManager": cu.PathManager,
         "Trainer.__init__": tr.Trainer.__init__, "Trainer._build_optimizer": tr.Trainer._build_optimizer,
         "Trainer.train_step": tr.Trainer.train_step, "buffered_read": fi.buffered_read}
safe, hook, finders = len(torch.serialization.get_safe_globals()), sys.excepthook, list(sys.meta_path)
import fairseq_ctx
from fairseq_ctx.core.fixes import FIXES
now = {"load_checkpoint": cu.load_checkpoint, "load_checkpoint_to_cpu": cu.load_checkpoint_to_cpu,
       "load_model_ensemble_and_task": cu.load_model_ensemble_and_task, "PathManager": cu.PathManager,
       "Trainer.__init__": tr.Trainer.__init__, "Trainer._build_optimizer": tr.Trainer._build_optimizer,
       "Trainer.train_step": tr.Trainer.train_step, "buffered_read": fi.buffered_read}
print(json.dumps({"registered": "hmce" in __import__("fairseq.models", fromlist=["x"]).ARCH_MODEL_REGISTRY,
                  "active": {f.name: f.active() for f in FIXES},
                  "changed": sorted(k for k in stock if now[k] is not stock[k]),
                  "safe_globals_added": len(torch.serialization.get_safe_globals()) - safe,
                  "excepthook": sys.excepthook is hook, "meta_path": sys.meta_path == finders}))
"""


def register_in_fresh_process(off: str) -> dict:
    env = {**os.environ, OFF_ENV: off}
    result = subprocess.run([sys.executable, "-c", REGISTER_PROBE], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_registering_with_every_fix_off_leaves_fairseq_torch_and_python_as_they_were():
    seen = register_in_fresh_process("all")
    assert seen["registered"] and not any(seen["active"].values())
    assert seen["changed"] == [] and seen["safe_globals_added"] == 0
    assert seen["excepthook"] and seen["meta_path"]


def test_registering_with_one_fix_off_installs_every_other():
    seen = register_in_fresh_process("resume-rules")
    assert seen["active"] == {fix.name: fix.name != "resume-rules" for fix in FIXES}
    assert "load_checkpoint" not in seen["changed"] and "load_checkpoint_to_cpu" in seen["changed"]


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
    docs = (os.path.join(os.path.dirname(__file__), "..", "docs", "fixes.md"))
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
