"""A checkpoint means the same dictionaries wherever it is used from: fairseq stores --data as
given, so a relative one names another directory when a command runs elsewhere. Our tasks record
the absolute data directory and a fingerprint of the dictionaries; two-stage initialisation and
the hub use the recorded directory and refuse dictionaries other than the trained ones."""
import re
import shutil

import pytest
import torch
from fairseq.data import Dictionary

from devtools.in_process_tools import call_tool
from tests.helpers import TINY_MODEL, USER_DIR, build, make_data_bin
from fairseq_ctx.context import hub
from fairseq_ctx.context.demo.synthetic_corpus import CorpusSizes
from fairseq_ctx.core.checkpoint_loading import CheckpointError

TRAIN = ["--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "500", "--max-update", "1", "--cpu", "--seed", "1",
         "--no-epoch-checkpoints", "--disable-validation", "--log-format", "none", "--no-save-optimizer-state"]


@pytest.fixture(scope="module")
def relative_run(tiny_data, tmp_path_factory):
    """A sentence-level checkpoint trained as ``fairseq-train data-bin`` from the directory above
    ``tiny_data``, and another directory with a ``data-bin`` of the same name and layout but a
    corpus of another seed, whose dictionary orders the same words differently."""
    import os

    work = tmp_path_factory.mktemp("relative")
    here = os.getcwd()
    os.chdir(tiny_data.parent)
    try:
        call_tool("fairseq-train", [tiny_data.name, "--user-dir", USER_DIR, "--task", "context_translation",
                                         "--context-size", "0", "--arch", "transformer", *TINY_MODEL, *TRAIN,
                                         "--save-dir", str(work / "sentence")])
    finally:
        os.chdir(here)
    other = make_data_bin(work / "elsewhere", CorpusSizes(train=40, valid=6, test=6), seed=2)
    symbols = [Dictionary.load(str(data / "dict.en.txt")).symbols for data in (other, tiny_data)]
    assert symbols[0] != symbols[1] and sorted(symbols[0]) == sorted(symbols[1])
    return work / "sentence" / "checkpoint_last.pt", other


def test_two_stage_init_reads_the_recorded_dictionaries_not_a_relative_path_from_here(
        tiny_data, relative_run, monkeypatch):
    """Run from a directory whose ``data-bin`` is another corpus: every row is copied through the
    dictionary the sentence-level model was trained with."""
    checkpoint, other = relative_run
    monkeypatch.chdir(other.parent)
    _, model, _ = build(tiny_data, "hmce", ["--pretrained-sentence-checkpoint", str(checkpoint)])
    trained = Dictionary.load(str(tiny_data / "dict.en.txt"))
    trained.add_symbol("<boc>")
    rows = torch.load(checkpoint, weights_only=True)["model"]["encoder.embed_tokens.weight"]
    own = model.encoder.embed_tokens.weight
    for index, symbol in enumerate(model.encoder.dictionary.symbols):
        assert torch.equal(own[index], rows[trained.index(symbol)]), symbol


def test_two_stage_init_refuses_dictionaries_other_than_the_trained_ones(tiny_data, relative_run, tmp_path):
    """Dictionaries next to the checkpoint are read first; when they are not the ones it was
    trained with (here: another corpus' dictionaries), its fingerprint says so."""
    checkpoint, other = relative_run
    moved = tmp_path / "checkpoint_last.pt"
    shutil.copy(checkpoint, moved)
    for name in ("dict.en.txt", "dict.de.txt"):
        shutil.copy(other / name, tmp_path / name)
    with pytest.raises(CheckpointError, match=re.escape(
            f"--pretrained-sentence-checkpoint: the source dictionary read from {tmp_path} is not the one checkpoint "
            f"{moved} was trained with (")) as error:
        build(tiny_data, "hmce", ["--pretrained-sentence-checkpoint", str(moved)])
    assert f"Use the dictionaries of the data it was trained on ({tiny_data})" in str(error.value)


def test_hub_reads_the_recorded_directory_and_refuses_other_dictionaries(tiny_data, relative_run, monkeypatch):
    checkpoint, other = relative_run
    monkeypatch.chdir(other.parent)
    translator = hub.load(str(checkpoint))
    assert translator.task.source_dictionary.symbols[:-1] == Dictionary.load(str(tiny_data / "dict.en.txt")).symbols
    with pytest.raises(CheckpointError, match=re.escape(
            f"fairseq_ctx.context.hub.load: the source dictionary read from {other} is not the one checkpoint "
            f"{checkpoint} was trained with")):
        hub.load(str(checkpoint), data=str(other))


def test_a_relative_data_path_without_a_record_is_not_guessed(tiny_data, relative_run, tmp_path, monkeypatch):
    """A checkpoint trained before the record: its relative --data is not resolved against the
    current directory (there it names another corpus); the error says why and what to do."""
    checkpoint, other = relative_run
    state = torch.load(checkpoint, weights_only=True)
    del state["extra_state"]["ContextTranslationTask"]
    old = tmp_path / "old.pt"
    torch.save(state, old)
    monkeypatch.chdir(other.parent)
    with pytest.raises(CheckpointError, match=re.escape(
            f"--pretrained-sentence-checkpoint: cannot find the dictionaries of {old} (dict.en.txt and dict.de.txt, "
            f"looked in {tmp_path}; its data directory '{tiny_data.name}' is relative (fairseq stores --data as given) "
            f"and the checkpoint does not record where it was trained, so it could name another directory from here); "
            f"its embedding rows are copied by symbol, so copy the dict.*.txt files of the data it was trained on "
            f"next to the checkpoint")):
        build(tiny_data, "hmce", ["--pretrained-sentence-checkpoint", str(old)])


@pytest.mark.parametrize("tool", ["fairseq-generate", "fairseq-validate", "fairseq-interactive"])
def test_stock_tools_refuse_a_data_directory_whose_dictionary_orders_the_words_otherwise(
        tiny_data, relative_run, tool, tmp_path):
    """fairseq-generate / -validate / -interactive --path with the data directory of another corpus
    (same words, other order): stock fairseq decodes with it (every embedding row given to another
    word); with the plugin the task's dictionaries are checked against the checkpoint's first."""
    checkpoint, other = relative_run
    here = Dictionary.load(str(other / "dict.en.txt")).symbols
    trained = Dictionary.load(str(tiny_data / "dict.en.txt")).symbols
    index = next(i for i, (a, b) in enumerate(zip(here, trained)) if a != b)
    options = ["--gen-subset", "test", "--beam", "2"]
    if tool == "fairseq-validate":  # it reads the data directory the checkpoint names: make that the other corpus
        state = torch.load(checkpoint, weights_only=True)
        state["cfg"]["task"]["data"] = str(other)
        state["extra_state"]["ContextTranslationTask"]["data"] = str(other)
        checkpoint = tmp_path / "elsewhere.pt"
        torch.save(state, checkpoint)
        options = ["--valid-subset", "test"]
    if tool == "fairseq-interactive":
        documents = tmp_path / "documents.txt"
        documents.write_text(" ".join(here[4:7]) + "\n", encoding="utf-8")
        options = ["--input", str(documents), "--beam", "2", "--buffer-size", "4"]
    with pytest.raises(CheckpointError, match=re.escape(
            f"--path: the source dictionary read from {other} is not the one checkpoint {checkpoint} was trained "
            f"with ({len(here) + 1} symbols here, {len(trained) + 1} in training; entry {index} is {here[index]!r} here "
            f"and {trained[index]!r} in training)")):
        call_tool(tool, [str(other), "--user-dir", USER_DIR, "--task", "context_translation", "--path",
                         str(checkpoint), "--cpu", "--batch-size", "4", *options])


def test_a_resumed_training_refuses_a_data_directory_with_other_dictionaries(relative_run, tmp_path):
    checkpoint, other = relative_run
    save_dir = tmp_path / "resumed"
    shutil.copytree(checkpoint.parent, save_dir)
    with pytest.raises(CheckpointError, match=re.escape(
            f"fairseq-train (resume): the source dictionary read from {other} is not the one the resumed checkpoint "
            f"was trained with")):
        call_tool("fairseq-train", [str(other), "--user-dir", USER_DIR, "--task", "context_translation",
                                    "--context-size", "0", "--arch", "transformer", *TINY_MODEL,
                                    *TRAIN[:TRAIN.index("--max-update")], "--max-update", "2",
                                    *TRAIN[TRAIN.index("--max-update") + 2:],
                                    "--save-dir", str(save_dir)])


def test_finetuning_refuses_a_data_directory_with_other_dictionaries(relative_run, tmp_path):
    """fairseq-train --finetune-from-model copies the weights by position: on a data directory whose
    dictionary orders the same words otherwise it trained with exit status 0; now it is refused
    before any update, naming the option and the first differing entry."""
    checkpoint, other = relative_run
    save_dir = tmp_path / "finetuned"
    with pytest.raises(CheckpointError, match=re.escape(
            f"fairseq-train --finetune-from-model: the source dictionary read from {other} is not the one")):
        call_tool("fairseq-train", [str(other), "--user-dir", USER_DIR, "--task", "context_translation",
                                    "--context-size", "0", "--arch", "transformer", *TINY_MODEL,
                                    *TRAIN[:TRAIN.index("--max-update")], "--max-update", "2",
                                    *TRAIN[TRAIN.index("--max-update") + 2:],
                                    "--save-dir", str(save_dir), "--finetune-from-model", str(checkpoint)])
    assert not list(save_dir.glob("*.pt"))
