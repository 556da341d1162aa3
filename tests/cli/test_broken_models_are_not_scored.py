"""Scores of a broken model or of an empty set are not scores: a checkpoint with a NaN weight (its
checksums valid) is refused by every tool that loads it, naming the weight, and a contrastive
set without examples is refused instead of scoring "0.0000 (0/0)"."""
import pytest
import torch

from tests.helpers import TINY_MODEL, USER_DIR
from devtools.in_process_tools import call_tool
from fairseq_ctx.cli import contrastive, cxmi
from fairseq_ctx.context.contrastive.example import ContrastiveInputError
from fairseq_ctx.context.contrastive.formats import read_set


@pytest.fixture(scope="module")
def diverged(tiny_data, tmp_path_factory):
    save_dir = tmp_path_factory.mktemp("diverged")
    call_tool("fairseq-train", [str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation", "--context-size",
                                "1", "--arch", "hmce", *TINY_MODEL, "--optimizer", "adam", "--lr", "1e-3", "--max-tokens",
                                "300", "--max-update", "2", "--criterion", "label_smoothed_cross_entropy", "--seed", "1",
                                "--cpu", "--num-workers", "0", "--disable-validation", "--no-epoch-checkpoints",
                                "--log-format", "none", "--save-dir", str(save_dir)])
    path = save_dir / "checkpoint_last.pt"
    state = torch.load(path, weights_only=True)
    name = next(key for key, value in state["model"].items() if value.is_floating_point() and value.dim() == 2)
    state["model"][name][0, 0] = float("nan")
    torch.save(state, path)
    return path, name


def test_a_checkpoint_with_a_nan_weight_is_refused_by_the_scoring_tools(tiny_data, diverged, tmp_path, capsys):
    path, name = diverged
    source, reference = tmp_path / "src", tmp_path / "ref"
    source.write_text("a b .\n")
    reference.write_text("c d .\n")
    for tool, args in ((cxmi, ["--gen-subset", "test"]),
                       (contrastive, ["--source", str(source), "--reference", str(reference),
                                      "--contrastive", str(reference)])):
        with pytest.raises(SystemExit):
            tool.main([str(path), "--data", str(tiny_data), *args])
        err = capsys.readouterr().err
        assert f"checkpoint {path} has non-finite weights ({name}: 1 of " in err, err
        assert "the training diverged before it was saved" in err


def test_a_contrastive_set_without_examples_is_refused(tmp_path):
    files = {name: tmp_path / name for name in ("src", "ref", "con")}
    for path in files.values():
        path.write_text("")
    with pytest.raises(ContrastiveInputError, match="the set has no examples"):
        read_set("plain", [], None, None, None, str(files["src"]), str(files["ref"]), [str(files["con"])], [], None)


@pytest.mark.parametrize("tool, args, message", [
    ("fairseq-ctx-make-corpus", ["--train-docs", "0"], "--train-docs must be at least 1, got 0"),
    ("fairseq-ctx-make-multimodal-corpus", ["--regions", "-1"], "--regions must be at least 1, got -1"),
    ("fairseq-ctx-make-multilingual-corpus", ["--test-docs", "0"], "--test-docs must be at least 1, got 0"),
    ("fairseq-ctx-make-contrastive", ["--docs", "0"], "--docs must be at least 1, got 0"),
    ("fairseq-ctx-doc-classify", ["--epochs", "0"], "--epochs must be at least 1, got 0"),
])
def test_sizes_below_one_are_refused_before_any_work(tool, args, message, tmp_path, capsys):
    import importlib

    entry = importlib.import_module(f"fairseq_ctx.cli.{tool[len('fairseq-ctx-'):].replace('-', '_')}").main
    where = (["--embeddings", str(tmp_path), "--langs", "en"] if tool == "fairseq-ctx-doc-classify"
             else [str(tmp_path / "out")])
    with pytest.raises(SystemExit):
        entry([*where, *args])
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_bf16_on_the_cpu_names_amp_before_fairseq_fails_inside(tiny_data, tmp_path):
    with pytest.raises(ValueError, match=r"^--bf16 on the CPU: .* use --amp instead.* \[fairseq-ctx fix "
                                          r"cpu-mixed-precision; FAIRSEQ_CTX_FIXES_OFF=cpu-mixed-precision switches "
                                          r"it off\]$"):
        call_tool("fairseq-train", [str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation",
                                    "--context-size", "0", "--arch", "transformer", *TINY_MODEL, "--optimizer", "adam",
                                    "--lr", "1e-3", "--max-tokens", "300", "--max-update", "1", "--cpu", "--bf16",
                                    "--disable-validation", "--save-dir", str(tmp_path / "ck")])


def test_a_checkpoint_whose_pickle_would_run_code_is_refused_naming_it(diverged, tmp_path):
    from fairseq_ctx.core.checkpoint_loading import CheckpointError, read_checkpoint

    state = torch.load(diverged[0], weights_only=True)
    state["extra_state"] = {"payload": RunsCode()}
    crafted = tmp_path / "crafted.pt"
    torch.save(state, crafted)
    with pytest.raises(CheckpointError, match=rf"^fairseq-ctx-test: checkpoint {crafted} holds the pickled "
                                              rf"global print, outside torch's weights-only allow-list: loading it "
                                              rf"could run code, so it is refused"):
        read_checkpoint(str(crafted), "fairseq-ctx-test")


class RunsCode:
    def __reduce__(self):
        return (print, ("ran",))


def test_a_non_finite_training_step_names_the_update_the_saved_state_and_the_fix(tiny_data, tmp_path):
    """Stock fairseq ends such a step in a bare StopIteration from its NaN detector under torch >= 2."""
    save_dir = tmp_path / "ck"
    with pytest.raises(FloatingPointError) as error:
        call_tool("fairseq-train", [str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation",
                                    "--context-size", "0", "--arch", "transformer", *TINY_MODEL, "--optimizer", "sgd",
                                    "--lr", "1e30", "--max-tokens", "300", "--max-update", "20", "--seed", "1", "--cpu",
                                    "--num-workers", "0", "--disable-validation", "--no-epoch-checkpoints",
                                    "--log-format", "none", "--save-dir", str(save_dir)])
    message = str(error.value)
    assert message.startswith("update 2: the loss or the gradients are not finite (gradients are Nan/Inf); the state "
                              f"before this step is saved in {save_dir / 'crash.pt'}. To go on: lower --lr"), message
    assert (save_dir / "crash.pt").is_file()
    assert isinstance(error.value.__cause__, StopIteration)
    assert str(error.value.__cause__.__context__) == "gradients are Nan/Inf"


@pytest.mark.parametrize("tool", ["fairseq-generate", "fairseq-validate"])
def test_stock_tools_refuse_a_checkpoint_with_a_nan_weight_naming_it(tool, tiny_data, diverged, tmp_path):
    """Stock fairseq-generate failed on 'AssertionError: 200 < 200', fairseq-validate printed
    'loss nan' with exit status 0; the weights are now refused before any model is built."""
    from fairseq_ctx.core.checkpoint_loading import CheckpointError

    path, name = diverged
    best = tmp_path / "checkpoint_best.pt"
    best.write_bytes(path.read_bytes())
    with pytest.raises(CheckpointError) as refused:
        call_tool(tool, [str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation", "--path", str(best),
                         "--cpu", *(["--gen-subset", "test", "--beam", "2"] if tool == "fairseq-generate"
                                    else ["--valid-subset", "test", "--max-tokens", "300"])])
    message = str(refused.value)
    assert message.startswith(f"--path: checkpoint {best} has non-finite weights ({name}: 1 of "), message
    assert "(an epoch checkpoint)" in message  # not the refused checkpoint_best.pt itself


def test_a_resume_from_nan_weights_is_refused_naming_the_weight(tiny_data, diverged, tmp_path):
    """A resume from NaN weights ended in "Minimum loss scale reached" or "gradients are Nan/Inf"
    without naming the loaded weights; it is refused before the first update, naming them."""
    from fairseq_ctx.core.checkpoint_loading import CheckpointError

    path, name = diverged
    save_dir = tmp_path / "ck"
    save_dir.mkdir()
    (save_dir / "checkpoint_last.pt").write_bytes(path.read_bytes())
    with pytest.raises(CheckpointError) as refused:
        call_tool("fairseq-train", [str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation",
                                    "--context-size", "1", "--arch", "hmce", *TINY_MODEL, "--optimizer", "adam", "--lr",
                                    "1e-3", "--max-tokens", "300", "--max-update", "4", "--criterion",
                                    "label_smoothed_cross_entropy", "--seed", "1", "--cpu", "--num-workers", "0",
                                    "--disable-validation", "--no-epoch-checkpoints", "--log-format", "none",
                                    "--save-dir", str(save_dir)])
    message = str(refused.value)
    assert f"{save_dir / 'checkpoint_last.pt'}" in message and f"non-finite weights ({name}: 1 of " in message, message
