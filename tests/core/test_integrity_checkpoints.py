"""Checkpoint integrity wherever a checkpoint is read: a checkpoint whose weights have overwritten
bytes (torch loads it silently) is refused with an error naming the file and the option by every
reading path, the stock fairseq tools through the plugin's hooks included; the newest complete
checkpoint is chosen by the updates stored in it, not by file time; a finished training command
run again trains and writes nothing."""
import logging
import os
import re
import struct
import zipfile
from pathlib import Path

import pytest
import torch
from fairseq import checkpoint_utils

from devtools.in_process_tools import call_tool
from tests.helpers import EMBEDDING_PAIRS, TINY_MODEL, USER_DIR, build, run_tool
from tests.embedding_helpers import TINY_TRANSFORMER
from fairseq_ctx.context import hub
from fairseq_ctx.core.checkpoint_loading import CheckpointError
from fairseq_ctx.core.fixes.checkpoint_hooks import newest_complete_checkpoint

TRAIN = ["--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "500", "--cpu", "--seed", "1",
         "--no-epoch-checkpoints", "--log-format", "none"]
TINY_MULTIMODAL = ["--encoder-embed-dim", "16", "--decoder-embed-dim", "16", "--encoder-ffn-embed-dim", "16",
                   "--decoder-ffn-embed-dim", "16", "--encoder-layers", "1", "--decoder-layers", "1",
                   "--encoder-attention-heads", "2", "--decoder-attention-heads", "2", "--share-all-embeddings"]


def hmce_command(data: Path, save_dir: Path, max_update: int = 2) -> list:
    return [str(data), "--user-dir", USER_DIR, "--task", "context_translation", "--arch", "hmce", *TINY_MODEL,
            *TRAIN, "--max-update", str(max_update), "--save-dir", str(save_dir)]


def flip_bytes_in_weights(source: Path, target: Path) -> Path:
    """A copy of ``source`` with 8 bytes inverted in the middle of its largest tensor: the zip
    archive stays well-formed and torch loads it without complaint."""
    data = bytearray(source.read_bytes())
    with zipfile.ZipFile(source) as archive:
        entry = max((i for i in archive.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    name_length, extra_length = struct.unpack("<HH", data[entry.header_offset + 26:entry.header_offset + 30])
    middle = entry.header_offset + 30 + name_length + extra_length + entry.file_size // 2
    data[middle:middle + 8] = bytes(b ^ 0xFF for b in data[middle:middle + 8])
    target.write_bytes(bytes(data))
    torch.load(target, weights_only=True)  # torch itself does not notice
    return target


@pytest.fixture(scope="module")
def flipped(tiny_data, multilingual_data, multimodal_data, tmp_path_factory) -> dict:
    """One checkpoint per task (hmce trained 2 updates with validation, tmde and a multimodal
    hierarchical_attention_decoder 1 update) and a copy of each with bytes flipped in its weights."""
    work = tmp_path_factory.mktemp("integrity")
    runs = {
        "hmce": hmce_command(tiny_data, work / "hmce"),
        "tmde": [str(multilingual_data), "--user-dir", USER_DIR, "--task", "multilingual_embedding", "--lang-pairs",
                 EMBEDDING_PAIRS, "--arch", "tmde", *TINY_TRANSFORMER, "--criterion", "distance_constraint", *TRAIN,
                 "--max-update", "1", "--disable-validation", "--no-save-optimizer-state",
                 "--save-dir", str(work / "tmde")],
        "multimodal": [str(multimodal_data), "--user-dir", USER_DIR, "--task", "multimodal_translation", "-s", "en",
                       "-t", "de", "--feature-inputs", "img", "--arch", "hierarchical_attention_decoder",
                       *TINY_MULTIMODAL, *TRAIN, "--max-update", "1", "--disable-validation",
                       "--no-save-optimizer-state", "--save-dir", str(work / "multimodal")],
    }
    paths = {"commands": runs}
    # fairseq keeps the best validation loss of a process on its save function: a run earlier in
    # this process with a lower loss would keep this one from writing checkpoint_best.pt
    if hasattr(checkpoint_utils.save_checkpoint, "best"):
        del checkpoint_utils.save_checkpoint.best
    for name, command in runs.items():
        call_tool("fairseq-train", command)
        paths[name] = work / name / "checkpoint_last.pt"
        (work / f"{name}-flipped").mkdir()
        paths[f"{name}_flipped"] = flip_bytes_in_weights(paths[name], work / f"{name}-flipped" / "checkpoint_last.pt")
    return paths


def crc_message(purpose: str, path: Path) -> str:
    return (f"{purpose}: cannot read checkpoint {path} ({path.stat().st_size} bytes; entry ")


def assert_names_damage(message: str, purpose: str, path: Path) -> None:
    assert crc_message(purpose, path) in message, message[-2000:]
    assert re.search(r"fails its CRC check: its bytes changed after the file was written\). The file is truncated "
                     r"or corrupt .*; use another checkpoint of the run \(checkpoint_last\.pt, checkpoint_best\.pt\) "
                     r"or copy the file again", message), message[-2000:]


def exit_message(error: pytest.ExceptionInfo) -> str:
    return str(error.value.code if isinstance(error.value, SystemExit) else error.value)


def plain_contrastive_set(directory: Path) -> list:
    files = {"src": "the cat sleeps .", "ref": "die katze schläft .", "con": "der katze schläft ."}
    for name, line in files.items():
        (directory / name).write_text(line + "\n", encoding="utf-8")
    return ["--source", str(directory / "src"), "--reference", str(directory / "ref"),
            "--contrastive", str(directory / "con")]


def test_every_reading_path_refuses_flipped_weights(flipped, tiny_data, multimodal_data, tmp_path, capsys):
    """Our tools, the hub, the embedder and two-stage initialisation: each stops with the
    file named and a non-zero exit (an exception, or SystemExit with a message)."""
    from fairseq_ctx.cli import adversarial, analyze_heads, attention_plot, contrastive, cxmi, embed, translate_doc

    hmce, tmde, multimodal = flipped["hmce_flipped"], flipped["tmde_flipped"], flipped["multimodal_flipped"]
    text = tmp_path / "input.txt"
    text.write_text("the cat sleeps .\n", encoding="utf-8")
    hub_purpose = "fairseq_ctx.context.hub.load"
    paths = [
        (lambda: hub.load(str(hmce)), hub_purpose, hmce),
        (lambda: contrastive.main([str(hmce), "--data", str(tiny_data), *plain_contrastive_set(tmp_path)]),
         hub_purpose, hmce),
        (lambda: cxmi.main([str(hmce), "--data", str(tiny_data)]), hub_purpose, hmce),
        (lambda: translate_doc.main([str(hmce), "--input", str(text)]), hub_purpose, hmce),
        (lambda: embed.main([str(tmde), "--lang", "xa", "--input", str(text), "--output", str(tmp_path / "e.npy")]),
         "fairseq-ctx-embed", tmde),
        (lambda: analyze_heads.main([str(tiny_data), "--path", str(hmce), "--output-dir", str(tmp_path / "h")]),
         "fairseq-ctx-analyze-heads", hmce),
        (lambda: analyze_heads.main([str(tiny_data), "--path", str(flipped["hmce"]), "--compare-path", str(hmce),
                                     "--output-dir", str(tmp_path / "h")]),
         "fairseq-ctx-analyze-heads --compare-path", hmce),
        (lambda: attention_plot.main([str(multimodal_data), "--path", str(multimodal), "--feature-inputs", "img",
                                      "--out", str(tmp_path / "attention")]), "fairseq-ctx-attention-plot", multimodal),
        (lambda: adversarial.main([str(multimodal_data), "--path", str(multimodal), "--feature-inputs", "img"]),
         "fairseq-ctx-adversarial", multimodal),
        (lambda: build(tiny_data, "hmce", ["--pretrained-sentence-checkpoint", str(hmce)]),
         "--pretrained-sentence-checkpoint", hmce),
    ]
    for call, purpose, path in paths:
        with pytest.raises((CheckpointError, SystemExit)) as error:
            call()
        if isinstance(error.value, SystemExit):
            assert error.value.code not in (0, None)
        assert_names_damage(exit_message(error) + capsys.readouterr().err, purpose, path)
    assert not any(p.name in ("e.npy", "h", "attention.png") for p in tmp_path.iterdir())


def test_stock_fairseq_tools_refuse_flipped_weights(flipped, tiny_data, tmp_path):
    """fairseq-generate / -interactive --path, fairseq-train --restore-file and
    --finetune-from-model read through the plugin's hooks; each names its own option."""
    hmce = flipped["hmce_flipped"]
    decode = [str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation", "--path", str(hmce), "--cpu"]
    for tool, args in (("fairseq-generate", [*decode, "--gen-subset", "test"]), ("fairseq-interactive", decode)):
        with pytest.raises(CheckpointError) as error:
            call_tool(tool, args)
        assert_names_damage(str(error.value), "--path", hmce)
    for option in ("--restore-file", "--finetune-from-model"):
        with pytest.raises(CheckpointError) as error:
            call_tool("fairseq-train", [*hmce_command(tiny_data, tmp_path / option.strip("-"), 3), option,
                                             str(hmce)])
        assert_names_damage(str(error.value), f"fairseq-train {option}", hmce)
        assert not (tmp_path / option.strip("-")).exists() or not any((tmp_path / option.strip("-")).glob("*.pt"))


def test_console_script_exits_non_zero_naming_the_file(flipped, tiny_data):
    result = run_tool(["fairseq-generate", str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation",
                       "--path", str(flipped["hmce_flipped"]), "--gen-subset", "test", "--cpu"], check=False)
    assert result.returncode != 0 and "H-" not in result.stdout
    assert_names_damage(result.stderr, "--path", flipped["hmce_flipped"])


def test_finetune_from_a_missing_checkpoint_names_the_option(tiny_data, tmp_path):
    missing = tmp_path / "pretrained.pt"
    with pytest.raises(CheckpointError, match=re.escape(
            f"fairseq-train --finetune-from-model: checkpoint {missing} does not exist; pass the checkpoint of the "
            f"pretrained model (e.g. its checkpoint_best.pt)")):
        call_tool("fairseq-train", [*hmce_command(tiny_data, tmp_path / "run"), "--finetune-from-model",
                                         str(missing)])


def fake_checkpoint(path: Path, updates: int, mtime: float) -> None:
    torch.save({"model": {"weight": torch.arange(64.0)}, "optimizer_history": [{"num_updates": updates}],
                "extra_state": {"train_iterator": {"epoch": 1, "iterations_in_epoch": updates}}}, path)
    os.utime(path, (mtime, mtime))


def test_newest_complete_checkpoint_is_chosen_by_stored_updates_not_file_time(tmp_path):
    """After ``cp -r`` every file has the time of the copy: here the oldest checkpoint has the
    newest time, and the damaged newest one is skipped."""
    fake_checkpoint(tmp_path / "checkpoint_1_2.pt", 2, mtime=3000)
    fake_checkpoint(tmp_path / "checkpoint_1_4.pt", 4, mtime=1000)
    fake_checkpoint(tmp_path / "checkpoint_best.pt", 3, mtime=2000)
    fake_checkpoint(tmp_path / "checkpoint_5.pt", 5, mtime=500)
    flip_bytes_in_weights(tmp_path / "checkpoint_5.pt", tmp_path / "checkpoint_1_5.pt")
    (tmp_path / "checkpoint_5.pt").unlink()
    fake_checkpoint(tmp_path / "checkpoint_last.pt", 5, mtime=4000)
    found = newest_complete_checkpoint(str(tmp_path), "", exclude=str(tmp_path / "checkpoint_last.pt"))
    assert found == str(tmp_path / "checkpoint_1_4.pt")


def test_rerunning_a_finished_training_command_trains_and_writes_nothing(flipped, caplog):
    """Stock fairseq trains one more update past --max-update and saves it over
    checkpoint_last.pt and checkpoint_best.pt; the rerun ends at once with exit status 0."""
    caplog.set_level(logging.INFO, logger="fairseq_ctx")
    save_dir = flipped["hmce"].parent
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in save_dir.glob("*.pt")}
    assert "checkpoint_best.pt" in before
    call_tool("fairseq-train", flipped["commands"]["hmce"])  # returns on exit status 0, raises on any other
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in save_dir.glob("*.pt")} == before
    assert (f"fairseq-train: {save_dir / 'checkpoint_last.pt'} is already at 2 updates, --max-update 2: training is "
            f"finished, nothing is trained or written. Raise --max-update to train further") in caplog.text
    assert torch.load(save_dir / "checkpoint_last.pt", weights_only=True)["optimizer_history"][-1]["num_updates"] == 2
