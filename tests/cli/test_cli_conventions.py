"""The command-line tools: fast ``--help`` (no torch/fairseq imported), a help text and the shown
default for every option, registration with fairseq in every import order, quiet logs, the
checkpoint convention (positional checkpoint, --data, --cpu, the --path alias), the sentencepiece
helper and the progress bar."""
import argparse
import importlib
import io
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import USER_DIR
from devtools.arch_matrix import plugin_archs
from fairseq_ctx.cli.tool_args import add_checkpoint_args, resolve_checkpoint_args, tool_parser
from fairseq_ctx.core.progress import progress
from fairseq_ctx.core.sentencepiece_codec import SentencePieceCodec
from fairseq_ctx.core.tool_loading import resolve_checkpoint

ROOT = Path(__file__).resolve().parents[2]
TOOLS = re.findall(r'"(fairseq-ctx-[a-z-]+)=(fairseq_ctx\.cli\.[a-z_]+):main"', (ROOT / "setup.py").read_text())
HELP_SECONDS = 1.0

# Runs a tool's --help in a fresh interpreter and reports which heavy libraries it imported.
HELP_PROBE = """
import runpy, sys
sys.argv = [sys.argv[1], "--help"]
try:
    runpy.run_module(sys.argv[0], run_name="__main__")
except SystemExit:
    pass
sys.stderr.write("LOADED " + repr([m for m in ("torch", "fairseq", "fairseq_cli") if m in sys.modules]) + "\\n")
"""


def run_python(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=str(ROOT))


def test_setup_lists_the_console_scripts():
    assert len(TOOLS) >= 18 and ("fairseq-ctx-embed", "fairseq_ctx.cli.embed") in TOOLS


@pytest.mark.parametrize("name,module", TOOLS, ids=[name for name, _ in TOOLS])
def test_help_is_fast_and_imports_neither_torch_nor_fairseq(name, module):
    elapsed = []
    for _ in range(3):  # further tries only matter on a machine busy with other work
        start = time.perf_counter()
        result = run_python(HELP_PROBE, module)
        elapsed.append(time.perf_counter() - start)
        if elapsed[-1] < HELP_SECONDS:
            break
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout
    assert result.stderr.strip().splitlines()[-1] == "LOADED []", result.stderr
    assert min(elapsed) < HELP_SECONDS, f"{name} --help took {min(elapsed):.2f} s"


class ParserBuilt(Exception):
    """Raised in place of parsing the command line; carries the tool's parser."""


def built_parser(module: str, monkeypatch) -> tuple:
    """The parser a tool's ``main`` builds (stopped at its first parse, nothing run), and the options
    this package added to it: those whose ``add_argument`` was called from a ``fairseq_ctx`` module.
    Options fairseq's own code adds (its generation parser, ``gen_parser_from_dataclass``) come from
    ``fairseq.*`` modules and are left to fairseq; no tool builds on them today (``--help`` imports
    no fairseq, above), ``fairseq-ctx-adversarial`` hands the options it does not know to
    fairseq-generate as text."""
    callers = {}
    add_argument = argparse._ActionsContainer.add_argument

    def recording_add_argument(self, *args, **kwargs):
        action = add_argument(self, *args, **kwargs)
        callers[action] = sys._getframe(1).f_globals.get("__name__", "")
        return action

    def stop(self, *args, **kwargs):
        raise ParserBuilt(self)

    monkeypatch.setattr(argparse._ActionsContainer, "add_argument", recording_add_argument)
    for method in ("parse_args", "parse_known_args", "parse_intermixed_args", "parse_known_intermixed_args"):
        monkeypatch.setattr(argparse.ArgumentParser, method, stop)
    with pytest.raises(ParserBuilt) as built:
        importlib.import_module(module).main([])
    parser = built.value.args[0]
    own = [action for action in parser._actions
           if callers.get(action, "").startswith("fairseq_ctx.") and not isinstance(action, argparse._HelpAction)]
    return parser, own


def option_help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The option's entry in the tool's ``--help``, with the tool's formatter, on one line."""
    formatter = parser.formatter_class(prog=parser.prog, width=100_000)  # no wrapping inside a default
    formatter.add_argument(action)
    return " ".join(formatter.format_help().split())


def expected_default(default) -> "str | None":
    """The text ``(default: ...)`` must hold; None where any text will do (an empty default)."""
    if isinstance(default, (list, tuple)):
        return " ".join(str(item) for item in default) or None
    return str(default) if default != "" else None


@pytest.mark.parametrize("name,module", TOOLS, ids=[name for name, _ in TOOLS])
def test_every_option_has_help_and_shows_its_default(name, module, monkeypatch):
    """Every option (positional arguments too, -h/--help aside) says what it means, and one with a
    default to show (not None, not a flag's False) shows it once, ``(default: VALUE)`` -- the
    formatter's, not a second one written by hand."""
    parser, own = built_parser(module, monkeypatch)
    assert own, f"{name}: no option found"
    problems = []
    for action in own:
        option = "/".join(action.option_strings) or action.dest
        if not action.help or action.help is argparse.SUPPRESS or not action.help.strip():
            problems.append(f"{option} has no help text")
        default = action.default
        if default is None or default is False or default is argparse.SUPPRESS:
            continue
        text = option_help(parser, action)
        shown = re.findall(r"\(default: (.*?)\)", text)
        expected = expected_default(default)
        if text.count("(default") != 1 or len(shown) != 1:
            problems.append(f"{option} (default {default!r}) shows {text.count('(default')} defaults: {text}")
        elif expected is not None and shown[0] != expected:
            problems.append(f"{option} shows (default: {shown[0]}), its default is {expected}")
    assert not problems, f"{name}: " + "; ".join(problems)


def test_tool_help_formatter_shows_defaults_but_not_absent_ones():
    parser = tool_parser("Usage notes.\n\n    an indented example line")
    parser.add_argument("--zero", type=float, default=0, help="zero is a default to show")
    parser.add_argument("--share", default="5%", help="a percent sign")
    parser.add_argument("--empty", default="", help="empty string")
    parser.add_argument("--files", nargs="*", default=[], help="no files")
    parser.add_argument("--flag", action="store_true", help="off unless given")
    parser.add_argument("--unset", help="not given")
    parser.add_argument("--own", default=3, help="placed by hand: %(default)s")
    text = " ".join(parser.format_help().split())
    assert "    an indented example line" in parser.format_help()  # the description keeps its layout
    for shown in ("zero is a default to show (default: 0)", "a percent sign (default: 5%)",
                  "empty string (default: '')", "no files (default: none)",
                  "off unless given --unset UNSET not given --own OWN placed by hand: 3"):
        assert shown in text, text
    assert text.endswith("placed by hand: 3"), text


REGISTRATION_REPORT = """
import argparse, torch
from fairseq.criterions import CRITERION_REGISTRY
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.tasks import TASK_REGISTRY
archs = sorted(a for a, c in ARCH_MODEL_REGISTRY.items() if c.__module__.startswith("fairseq_ctx."))
print("ARCHS", ",".join(archs))
print("TASKS", ",".join(sorted(t for t, c in TASK_REGISTRY.items() if c.__module__.startswith("fairseq_ctx."))))
print("CRITERIONS", ",".join(sorted(n for n, c in CRITERION_REGISTRY.items() if c.__module__.startswith("fairseq_ctx."))))
from fairseq.optim import OPTIMIZER_REGISTRY
print("OPTIMIZERS", ",".join(sorted(n for n, c in OPTIMIZER_REGISTRY.items() if c.__module__.startswith("fairseq_ctx."))))
print("ADAM", OPTIMIZER_REGISTRY["adam"].__module__)
print("ALLOWED", argparse.Namespace in torch.serialization.get_safe_globals())
"""
IMPORT_ORDERS = {
    "package_first_then_fairseq_then_register": """
import sys
finders = list(sys.meta_path)
import fairseq_ctx
assert "torch" not in sys.modules and "fairseq" not in sys.modules, "import fairseq_ctx must stay cheap"
assert sys.meta_path == finders, "importing the package installs no import hook"
from fairseq import tasks
assert "context_translation" not in tasks.TASK_REGISTRY, "importing fairseq after the package registers nothing"
fairseq_ctx.register()
""",
    "fairseq_first_then_user_dir_option": """
from fairseq import options
parser = options.get_training_parser()
options.parse_args_and_arch(parser, ["unused-data", "--user-dir", sys.argv[1], "--task", "context_translation",
                                     "--arch", "hmce"])
""",
    "fairseq_first_then_hydra_common_user_dir": """
from omegaconf import OmegaConf
from fairseq import utils
utils.import_user_module(OmegaConf.create({"user_dir": sys.argv[1]}))
""",
    "a_module_of_ours_that_imports_fairseq_first_then_register": """
from fairseq_ctx.core.checkpoint_loading import read_checkpoint
import fairseq_ctx
fairseq_ctx.register()
""",
}


@pytest.mark.parametrize("order", list(IMPORT_ORDERS))
def test_every_import_order_registers_everything_and_changes_nothing_else(order):
    """Registration in every import order; torch's weights-only allow-list is left as it was (the
    plugin's fixes come with its tasks: tests/core/test_fixes.py)."""
    result = run_python("import sys\n" + IMPORT_ORDERS[order] + REGISTRATION_REPORT, USER_DIR)
    assert result.returncode == 0, result.stderr[-3000:]
    report = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
    assert report["ARCHS"].split(",") == plugin_archs()
    assert report["TASKS"].split(",") == ["context_translation", "multilingual_embedding", "multimodal_translation"]
    assert set(report["CRITERIONS"].split(",")) == {"cka_alignment", "head_diversity", "distance_constraint",
                                                    "imagination", "fused_label_smoothed_cross_entropy",
                                                    "context_discounted_cross_entropy"}
    assert report["OPTIMIZERS"] == "adam_multi_tensor" and report["ADAM"] == "fairseq.optim.adam"  # adam is fairseq's
    assert report["ALLOWED"] == "False"


def test_a_tool_that_loads_fairseq_logs_no_library_info_lines(tmp_path):
    missing = tmp_path / "missing"
    (tmp_path / "in.txt").write_text("a b c\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "fairseq_ctx.cli.embed", str(missing), "--lang", "xa", "--input",
                             str(tmp_path / "in.txt"), "--output", str(tmp_path / "out.npy")],
                            capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert result.returncode == 2
    assert f"fairseq-ctx-embed: error: no checkpoint {missing}/checkpoint_best.pt" in result.stderr
    assert "tensorboardX" not in result.stderr and "INFO" not in result.stderr, result.stderr


def test_the_python_api_keeps_fairseqs_tensorboard_note_out():
    """Importing fairseq configures logging at INFO and says "Please install tensorboardX"; through
    this package (the hub) that note is dropped, fairseq's other records are not."""
    code = ("import logging; from fairseq_ctx.context import hub; "
            "logging.getLogger('fairseq.tasks.text_to_speech').info('another note')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert result.returncode == 0, result.stderr
    assert "tensorboardX" not in result.stderr and "another note" in result.stderr, result.stderr


def parser_with_alias() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tool")
    add_checkpoint_args(parser, path_alias=True)
    return parser


@pytest.mark.parametrize("argv,checkpoint,data", [
    (["ckpt_dir", "--data", "bin"], "ckpt_dir", "bin"),        # the convention
    (["bin", "--path", "model.pt"], "model.pt", "bin"),         # the old 'DATA --path CHECKPOINT' form
    (["--path", "model.pt", "--data", "bin"], "model.pt", "bin"),
    (["--path", "model.pt"], "model.pt", None),
])
def test_checkpoint_convention_and_the_path_alias(argv, checkpoint, data):
    parser = parser_with_alias()
    args = resolve_checkpoint_args(parser, parser.parse_args(argv))
    assert (args.checkpoint, args.data, args.cpu, args.checkpoint_file) == (checkpoint, data, False,
                                                                            "checkpoint_best.pt")


@pytest.mark.parametrize("argv,message", [
    ([], "the checkpoint is required"),
    (["a", "--path", "b", "--data", "c"], "give the checkpoint once"),
    (["ckpt"], "--data DIR is required"),
])
def test_checkpoint_convention_errors(argv, message, capsys):
    parser = parser_with_alias()
    with pytest.raises(SystemExit):
        resolve_checkpoint_args(parser, parser.parse_args(argv), data_required=True)
    assert message in capsys.readouterr().err


def test_resolve_checkpoint_takes_a_file_or_a_directory(tmp_path):
    (tmp_path / "checkpoint_best.pt").write_bytes(b"")
    (tmp_path / "checkpoint_last.pt").write_bytes(b"")
    assert resolve_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoint_best.pt")
    assert resolve_checkpoint(str(tmp_path), "checkpoint_last.pt") == str(tmp_path / "checkpoint_last.pt")
    assert resolve_checkpoint(str(tmp_path / "checkpoint_last.pt"), "other.pt") == str(tmp_path / "checkpoint_last.pt")
    with pytest.raises(FileNotFoundError, match=r"no checkpoint .*checkpoint_9\.pt: .* holds checkpoint_best\.pt, "
                                                r"checkpoint_last\.pt; pass --checkpoint-file checkpoint_last\.pt"):
        resolve_checkpoint(str(tmp_path), "checkpoint_9.pt")
    with pytest.raises(FileNotFoundError, match=r"nowhere is neither a checkpoint file nor a directory"):
        resolve_checkpoint(str(tmp_path / "nowhere"))


@pytest.mark.parametrize("tool", ["translate_doc", "contrastive", "cxmi"])
def test_a_run_without_checkpoint_best_says_which_checkpoints_there_are_in_one_line(tool, tmp_path, capsys):
    """fairseq-train wrote only checkpoint_last.pt and checkpoint1.pt (--disable-validation)."""
    import importlib

    for name in ("checkpoint_last.pt", "checkpoint1.pt"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "in.txt").write_text("a b .\n")
    extra = {"translate_doc": ["--input", str(tmp_path / "in.txt")],
             "contrastive": ["--source", str(tmp_path / "in.txt"), "--reference", str(tmp_path / "in.txt"),
                             "--contrastive", str(tmp_path / "in.txt")], "cxmi": []}[tool]
    with pytest.raises(SystemExit) as stop:
        importlib.import_module(f"fairseq_ctx.cli.{tool}").main([str(tmp_path), *extra])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert (f"error: no checkpoint {tmp_path}/checkpoint_best.pt: {tmp_path} holds checkpoint1.pt, checkpoint_last.pt; "
            f"pass --checkpoint-file checkpoint_last.pt") in err


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory) -> str:
    import sentencepiece

    root = tmp_path_factory.mktemp("spm")
    words = ["the", "cat", "sleeps", "house", "dog", "runs", "quietly", "garden"]
    (root / "text.txt").write_text("".join(f"{words[i % 8]} {words[(3 * i) % 8]} {words[(5 * i) % 8]}\n"
                                           for i in range(200)))
    sentencepiece.SentencePieceTrainer.train(input=str(root / "text.txt"), model_prefix=str(root / "spm"),
                                             vocab_size=25, model_type="unigram", minloglevel=2)
    return str(root / "spm.model")


def test_sentencepiece_codec_round_trip(spm_model):
    codec = SentencePieceCodec(spm_model)
    pieces = codec.encode("  the cat sleeps quietly ")
    assert pieces.split()[0].startswith("\u2581") and "  " not in pieces
    assert codec.decode(pieces) == "the cat sleeps quietly"
    with pytest.raises(FileNotFoundError, match="sentencepiece model .*nothing.model does not exist"):
        SentencePieceCodec(str(Path(spm_model).with_name("nothing.model")))


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_silent_unless_stderr_is_a_terminal(monkeypatch):
    quiet = io.StringIO()
    monkeypatch.setattr(sys, "stderr", quiet)
    assert list(progress(range(5), desc="work")) == [0, 1, 2, 3, 4]
    with progress(total=10, desc="work") as bar:
        bar.update(10)
    assert quiet.getvalue() == ""
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert list(progress(range(5), desc="work", unit="line")) == [0, 1, 2, 3, 4]
    assert "work:" in terminal.getvalue() and "0/5" in terminal.getvalue() and "line/s" in terminal.getvalue()


IMPORT_PROBE = """
import atexit, importlib, pkgutil, sys
hook = sys.excepthook
import fairseq_ctx.cli as cli
for module in pkgutil.iter_modules(cli.__path__):
    importlib.import_module("fairseq_ctx.cli." + module.name)
print(sys.excepthook is hook)
from fairseq_ctx.cli.tool_args import tool_parser
exits = atexit._ncallbacks()
tool_parser("a tool's main")
tool_parser("twice")
print(sys.excepthook is hook, getattr(sys.excepthook, "quiet_broken_pipe", False), atexit._ncallbacks() - exits)
"""


def test_importing_a_tool_changes_nothing_its_main_installs_the_closed_pipe_handling():
    """Importing every fairseq_ctx.cli module leaves sys.excepthook as it was (importing the package
    replaced it before); a tool's main (its tool_parser) installs the closed-pipe handling once."""
    result = run_python(IMPORT_PROBE)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["True", "False True 1"]
