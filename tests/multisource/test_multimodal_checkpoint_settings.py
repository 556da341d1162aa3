"""Stock fairseq-generate on a multi-source checkpoint takes the inputs the model was trained with
(--feature-inputs, --extra-source-langs, --extra-source-dict) from the checkpoint, as the context
task takes its context sizes; inputs given otherwise than in training, and an own extra-source
dictionary other than the trained one, are refused naming the cause."""
import logging
import shutil
from pathlib import Path
from typing import List

import pytest

from tests.helpers import TINY_MODEL, USER_DIR
from devtools.in_process_tools import call_tool
from fairseq_ctx.core.checkpoint_loading import CheckpointError
from fairseq_ctx.multisource.data.feature_file import FeatureInputError

TRAINED_WITH = ["--extra-source-langs", "fr", "--extra-source-dict", "own", "--feature-inputs", "img"]


@pytest.fixture(scope="module")
def checkpoint(multimodal_data, tmp_path_factory) -> Path:
    save_dir = tmp_path_factory.mktemp("multisource_checkpoint")
    call_tool("fairseq-train", [
        str(multimodal_data), "--user-dir", USER_DIR, "--task", "multimodal_translation", "-s", "en", "-t", "de",
        "--arch", "hierarchical_attention_decoder", "--combination", "serial", *TRAINED_WITH, *TINY_MODEL,
        "--optimizer", "adam", "--lr", "5e-3", "--max-tokens", "2000", "--max-update", "6",
        "--criterion", "label_smoothed_cross_entropy", "--seed", "1", "--save-dir", str(save_dir),
        "--no-epoch-checkpoints", "--log-format", "none", "--disable-validation", "--cpu", "--num-workers", "0"])
    return save_dir / "checkpoint_last.pt"


def generate(data: Path, checkpoint: Path, out: Path, *task_args: str) -> List[str]:
    call_tool("fairseq-generate", [
        str(data), "--user-dir", USER_DIR, "--task", "multimodal_translation", "-s", "en", "-t", "de", *task_args,
        "--path", str(checkpoint), "--gen-subset", "test", "--beam", "2", "--batch-size", "8", "--cpu",
        "--results-path", str(out)])
    return sorted(line for line in (out / "generate-test.txt").read_text(encoding="utf-8").splitlines()
                  if line.startswith(("H-", "S-")))


def test_generate_takes_the_trained_inputs_from_the_checkpoint(multimodal_data, checkpoint, tmp_path, caplog):
    with_flags = generate(multimodal_data, checkpoint, tmp_path / "given", *TRAINED_WITH)
    with caplog.at_level(logging.INFO, logger="fairseq_ctx.multisource.multimodal_translation_task"):
        without = generate(multimodal_data, checkpoint, tmp_path / "taken")
    assert without == with_flags and len([line for line in without if line.startswith("H-")]) == 16
    assert ("decoding with --feature-inputs img and --extra-source-langs fr and --extra-source-dict own, as "
            f"checkpoint {checkpoint} was trained") in caplog.text


@pytest.mark.parametrize("given, trained", [(["--extra-source-langs", "cs"], "--extra-source-langs fr"),
                                            (["--feature-inputs", "other"], "--feature-inputs img")])
def test_inputs_given_otherwise_than_in_training_are_refused(multimodal_data, checkpoint, tmp_path, given, trained):
    with pytest.raises(FeatureInputError, match=f"was trained with {trained} but {given[0]} {given[1]} is given; "
                                                f".*Leave {given[0]} out"):
        generate(multimodal_data, checkpoint, tmp_path / "refused", *given)


def test_an_own_extra_source_dictionary_other_than_the_trained_one_is_refused(multimodal_data, checkpoint, tmp_path):
    swapped = tmp_path / "data-bin"
    shutil.copytree(multimodal_data, swapped)
    dictionary = swapped / "dict.fr.txt"
    lines = dictionary.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[0], lines[1] = lines[1], lines[0]
    dictionary.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"the extra source fr dictionary read from .* is not the one .* was "
                                              r"trained with .*entry 4 is"):
        generate(swapped, checkpoint, tmp_path / "out")


def test_the_tools_read_the_trained_inputs_from_the_checkpoint_too(multimodal_data, checkpoint, tmp_path):
    """fairseq-ctx-attention-plot and fairseq-ctx-adversarial without the input options: the model's
    inputs come from the checkpoint (adversarial shuffles each of them)."""
    import json

    from tests.helpers import run_tool

    out = tmp_path / "attention"
    run_tool(["fairseq-ctx-attention-plot", str(multimodal_data), "--path", str(checkpoint), "--sentences", "0,1",
              "--out", str(out)])
    assert json.loads(out.with_suffix(".json").read_text())["inputs"] == ["source", "img", "fr"]
    run_tool(["fairseq-ctx-adversarial", str(multimodal_data), "--path", str(checkpoint), "-s", "en", "-t", "de",
              "--beam", "1", "--json", str(tmp_path / "adv.json"), "--cpu", "--max-len-b", "3"])
    assert set(json.loads((tmp_path / "adv.json").read_text())) == {"original", "shuffled img", "shuffled fr"}


def test_an_attention_plot_layer_the_decoder_does_not_have_is_refused(multimodal_data, checkpoint, tmp_path):
    from tests.helpers import run_tool

    result = run_tool(["fairseq-ctx-attention-plot", str(multimodal_data), "--path", str(checkpoint), "--layer", "99",
                       "--out", str(tmp_path / "attention")], check=False)
    assert result.returncode == 2
    assert "--layer 99: the decoder has " in result.stderr and "layer(s), 0.." in result.stderr
    assert not (tmp_path / "attention.json").exists()
