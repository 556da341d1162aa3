"""Bad checkpoints: an unreadable file and a checkpoint of another arch,
given to stock fairseq (generate --path, train --restore-file) and to our code (hub, tools,
--pretrained-sentence-checkpoint). Our code stops before building anything with an error naming
the file, what is wrong and the fix; for stock fairseq the test pins the error users get (the
rows of docs/data-formats.md)."""
import random
import re
from pathlib import Path

import pytest
import torch

from devtools.in_process_tools import call_tool
from tests.helpers import EMBEDDING_PAIRS, TINY_MODEL, USER_DIR, build, run_tool
from tests.embedding_helpers import TINY_TRANSFORMER
from fairseq_ctx.context import hub
from fairseq_ctx.core.checkpoint_loading import CheckpointError
from fairseq_ctx.embedding.embedder import Embedder

pytestmark = pytest.mark.heavy  # handed out first under xdist (conftest.py)

TRAIN = ["--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "500", "--max-update", "1", "--cpu", "--seed", "1",
         "--no-epoch-checkpoints", "--disable-validation", "--log-format", "none", "--no-save-optimizer-state"]


@pytest.fixture(scope="module")
def checkpoints(tiny_data, multilingual_data, tmp_path_factory) -> dict:
    """One update of hmce, of a 16-dim sentence-level transformer and of tmde, each with stock
    fairseq-train; plus a truncated copy of the hmce checkpoint."""
    work = tmp_path_factory.mktemp("bad_checkpoints")
    context = [str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation"]
    runs = {
        "hmce": [*context, "--arch", "hmce", *TINY_MODEL],
        "small_transformer": [*context, "--context-size", "0", "--arch", "transformer", *TINY_MODEL,
                              "--encoder-embed-dim", "16", "--decoder-embed-dim", "16"],
        "tmde": [str(multilingual_data), "--user-dir", USER_DIR, "--task", "multilingual_embedding", "--lang-pairs",
                 EMBEDDING_PAIRS, "--arch", "tmde", *TINY_TRANSFORMER, "--criterion", "distance_constraint"],
    }
    paths = {}
    for name, args in runs.items():
        call_tool("fairseq-train", [*args, *TRAIN, "--save-dir", str(work / name)])
        paths[name] = work / name / "checkpoint_last.pt"
    data = paths["hmce"].read_bytes()
    paths["truncated"] = work / "truncated.pt"
    paths["truncated"].write_bytes(data[: len(data) // 2])
    return paths


def generate(data: Path, checkpoint: Path):
    return run_tool(["fairseq-generate", str(data), "--user-dir", USER_DIR, "--task", "context_translation",
                     "--path", str(checkpoint), "--gen-subset", "test", "--cpu", "--beam", "1"], check=False)


@pytest.fixture(scope="module")
def damaged(checkpoints, tmp_path_factory) -> dict:
    """The truncated checkpoint, random bytes and an empty file."""
    work = tmp_path_factory.mktemp("damaged")
    paths = {"truncated": checkpoints["truncated"], "random": work / "random.pt", "empty": work / "empty.pt"}
    paths["random"].write_bytes(random.Random(0).randbytes(4096))
    paths["empty"].write_bytes(b"")
    return paths


DAMAGE = {"truncated": "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory",
          "random": "UnpicklingError: not a torch checkpoint archive", "empty": "EOFError: the file is empty"}
UNREADABLE = ("). The file is truncated or corrupt (copied incompletely, or still being written by fairseq-train); use "
              "another checkpoint of the run (checkpoint_last.pt, checkpoint_best.pt) or copy the file again")


def assert_unreadable(stderr: str, purpose: str, path: Path, kind: str) -> None:
    expected = f"{purpose}: cannot read checkpoint {path} ({path.stat().st_size} bytes; {DAMAGE[kind]}"
    assert expected + UNREADABLE in stderr, stderr[-3000:]
    assert "weights_only" not in stderr


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_generate_with_a_damaged_checkpoint_names_the_file(tiny_data, damaged, kind):
    result = generate(tiny_data, damaged[kind])
    assert result.returncode != 0
    assert_unreadable(result.stderr, "--path", damaged[kind], kind)
    assert "H-" not in result.stdout


def test_restore_file_truncated_fails_before_training(tiny_data, checkpoints, tmp_path):
    result = run_tool(["fairseq-train", str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation",
                       "--arch", "hmce", *TINY_MODEL, *TRAIN, "--save-dir", str(tmp_path),
                       "--restore-file", str(checkpoints["truncated"])], check=False)
    assert result.returncode != 0
    assert_unreadable(result.stderr, "fairseq-train --restore-file", checkpoints["truncated"], "truncated")
    assert "num_updates" not in result.stdout + result.stderr and not any(tmp_path.glob("*.pt"))


def test_restore_file_that_does_not_exist_is_an_error(tiny_data, tmp_path):
    missing = tmp_path / "nowhere.pt"
    with pytest.raises(CheckpointError, match=re.escape(
            f"fairseq-train --restore-file: checkpoint {missing} does not exist (fairseq would silently train from "
            f"scratch); pass an existing checkpoint, or leave --restore-file out to resume from "
            f"{tmp_path / 'run' / 'checkpoint_last.pt'}")):
        call_tool("fairseq-train", [str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation",
                                         "--arch", "hmce", *TINY_MODEL, *TRAIN, "--save-dir", str(tmp_path / "run"),
                                         "--restore-file", str(missing)])
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


def test_adversarial_names_a_damaged_path(multimodal_data, damaged, tmp_path):
    result = run_tool(["fairseq-ctx-adversarial", str(multimodal_data), "--path", str(damaged["random"]),
                       "--feature-inputs", "img", "--json", str(tmp_path / "adv.json")], check=False)
    assert result.returncode != 0
    assert f"fairseq-ctx-adversarial: cannot read checkpoint {damaged['random']}" in result.stderr
    assert "weights_only" not in result.stderr and not (tmp_path / "adv.json").exists()


def test_analyze_heads_names_a_damaged_compare_path(tiny_data, checkpoints, damaged, tmp_path):
    out = tmp_path / "heads"
    result = run_tool(["fairseq-ctx-analyze-heads", str(tiny_data), "--path", str(checkpoints["hmce"]),
                       "--compare-path", str(damaged["empty"]), "--output-dir", str(out)], check=False)
    assert result.returncode != 0
    assert_unreadable(result.stderr, "fairseq-ctx-analyze-heads --compare-path", damaged["empty"], "empty")
    assert not out.exists() or not list(out.iterdir())


def test_generate_with_a_checkpoint_of_another_task_names_the_arch(tiny_data, checkpoints):
    result = generate(tiny_data, checkpoints["tmde"])
    assert result.returncode != 0
    assert "--arch tmde is a multilingual_embedding model" in result.stderr
    assert "H-" not in result.stdout


def test_hub_refuses_an_unreadable_checkpoint(checkpoints):
    with pytest.raises(CheckpointError) as error:
        hub.load(str(checkpoints["truncated"]))
    message = str(error.value)
    assert str(checkpoints["truncated"]) in message and "cannot read checkpoint" in message
    assert "truncated or corrupt" in message and "checkpoint_last.pt" in message


def test_hub_refuses_a_checkpoint_of_another_task(checkpoints):
    with pytest.raises(CheckpointError, match=r"is a --task multilingual_embedding model \(--arch tmde\), but this "
                                              r"needs a checkpoint trained with --task context_translation"):
        hub.load(str(checkpoints["tmde"]))


def test_hub_refuses_a_torch_file_that_is_not_a_fairseq_checkpoint(tmp_path):
    path = tmp_path / "weights.pt"
    torch.save({"encoder.weight": torch.zeros(2)}, path)
    with pytest.raises(CheckpointError, match=r"weights\.pt is a torch file but not a fairseq checkpoint"):
        hub.load(str(path))


def test_embed_tool_refuses_unreadable_and_other_task_checkpoints(checkpoints, tmp_path):
    text = tmp_path / "input.txt"
    text.write_text("a b c\n")
    command = ["fairseq-ctx-embed", "--lang", "xa", "--input", str(text), "--output", str(tmp_path / "out.npy")]
    result = run_tool([*command, "--path", str(checkpoints["truncated"])], check=False)
    assert result.returncode != 0
    assert f"fairseq-ctx-embed: cannot read checkpoint {checkpoints['truncated']}" in result.stderr
    with pytest.raises(CheckpointError, match=r"is a --task context_translation model \(--arch hmce\)"):
        Embedder(str(checkpoints["hmce"]), "xa")
    assert not (tmp_path / "out.npy").exists()


def test_pretrained_sentence_checkpoint_unreadable(tiny_data, checkpoints):
    with pytest.raises(CheckpointError, match=r"--pretrained-sentence-checkpoint: cannot read checkpoint .*truncated\.pt"):
        build(tiny_data, "hmce", ["--pretrained-sentence-checkpoint", str(checkpoints["truncated"])])


def test_pretrained_sentence_checkpoint_with_other_dimensions(tiny_data, checkpoints):
    with pytest.raises(CheckpointError) as error:
        build(tiny_data, "hmce", ["--pretrained-sentence-checkpoint", str(checkpoints["small_transformer"])])
    message = str(error.value)
    assert str(checkpoints["small_transformer"]) in message and "tensors differ in shape" in message
    assert re.search(r"\(checkpoint vs model: encoder\.embed_tokens\.weight \(\d+, 16\) vs \(\d+, 32\)", message)
    assert "--encoder-embed-dim" in message


def test_pretrained_sentence_checkpoint_of_another_task(tiny_data, checkpoints):
    with pytest.raises(CheckpointError, match=r"is a --task multilingual_embedding model \(--arch tmde\), but this "
                                              r"needs a checkpoint trained with --task translation or context_translation"):
        build(tiny_data, "hmce", ["--pretrained-sentence-checkpoint", str(checkpoints["tmde"])])


def test_attention_plot_refuses_a_checkpoint_of_another_task(tiny_data, checkpoints, tmp_path):
    out = tmp_path / "attention"
    result = run_tool(["fairseq-ctx-attention-plot", str(tiny_data), "--path", str(checkpoints["hmce"]),
                       "--out", str(out)], check=False)
    assert result.returncode != 0
    assert "fairseq-ctx-attention-plot: " in result.stderr
    assert "is a --task context_translation model (--arch hmce)" in result.stderr
    assert "multimodal_translation" in result.stderr
    assert not list(tmp_path.iterdir())


def test_analyze_heads_refuses_an_unreadable_checkpoint(tiny_data, checkpoints, tmp_path):
    out = tmp_path / "heads"
    result = run_tool(["fairseq-ctx-analyze-heads", str(tiny_data), "--path", str(checkpoints["truncated"]),
                       "--output-dir", str(out)], check=False)
    assert result.returncode != 0
    assert f"fairseq-ctx-analyze-heads: cannot read checkpoint {checkpoints['truncated']}" in result.stderr
    assert not out.exists() or not list(out.iterdir())


def test_checkpoint_trained_with_a_relative_data_path_loads_from_another_directory(tiny_data, tmp_path, monkeypatch):
    """fairseq stores --data as given; our tasks record it absolute, so the hub finds the
    dictionaries from anywhere. Without that record (older checkpoints) it is an error saying to
    pass --data."""
    monkeypatch.chdir(tiny_data.parent)
    call_tool("fairseq-train", [tiny_data.name, "--user-dir", USER_DIR, "--task", "context_translation",
                                     "--arch", "hmce", *TINY_MODEL, *TRAIN, "--save-dir", str(tmp_path / "run")])
    checkpoint = tmp_path / "run" / "checkpoint_last.pt"
    state = torch.load(checkpoint, weights_only=True)
    assert state["cfg"]["task"]["data"] == tiny_data.name
    assert state["extra_state"]["ContextTranslationTask"]["data"] == str(tiny_data)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert len(hub.load(str(checkpoint)).task.source_dictionary) > 10

    del state["extra_state"]["ContextTranslationTask"]
    old = tmp_path / "old.pt"
    torch.save(state, old)
    with pytest.raises(CheckpointError, match=re.escape(
            f"fairseq_ctx.context.hub.load: checkpoint {old} was trained with the data directory '{tiny_data.name}', "
            f"which is not a directory from here ({elsewhere}), and the checkpoint does not record where "
            f"fairseq-train ran; pass --data DIR (the data directory with the dictionaries)")):
        hub.load(str(old))
    assert len(hub.load(str(old), data=str(tiny_data)).task.source_dictionary) > 10

    state["extra_state"]["ContextTranslationTask"] = {"data": str(tmp_path / "moved")}
    torch.save(state, old)
    with pytest.raises(CheckpointError, match=re.escape(
            f"fairseq_ctx.context.hub.load: the data directory {tmp_path / 'moved'} recorded in checkpoint {old} does "
            f"not exist; pass --data DIR (the data directory with the dictionaries)")):
        hub.load(str(old))
