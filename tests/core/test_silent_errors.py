"""Inputs that used to give silently wrong results now give a clear error or a counted warning:
sentence-level checkpoints of another dictionary, feature files of different shapes across
splits, one-sentence batches of distance_constraint, blank class labels, non-UTF-8 text."""
import io
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from fairseq import metrics
from fairseq.data import Dictionary

from devtools.in_process_tools import call_tool
from tests.helpers import TINY_MODEL, USER_DIR, build, build_multimodal
from fairseq_ctx.cli import doc_classify, prepare_docs, translate_doc
from fairseq_ctx.context.data.docids import DocumentIdError, read_docids
from fairseq_ctx.context.sentence_init_rows import MIN_OVERLAP
from fairseq_ctx.core.checkpoint_loading import CheckpointError
from fairseq_ctx.core.checkpoint_loading import dictionary_fingerprint
from fairseq_ctx.core.text_input import TextEncodingError, utf8_lines
from fairseq_ctx.embedding.distance_constraint import DistanceConstraintCriterion
from fairseq_ctx.multisource.data.feature_file import FeatureInputError

EMBEDDINGS = ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "decoder.output_projection.weight")


@pytest.fixture(scope="module")
def sentence_checkpoint(tiny_data, tmp_path_factory) -> Path:
    """A sentence-level transformer (--context-size 0) after one update of stock fairseq-train."""
    save = tmp_path_factory.mktemp("sentence")
    call_tool("fairseq-train", [
        str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation", "--context-size", "0",
        "--arch", "transformer", *TINY_MODEL, "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "500",
        "--max-update", "1", "--cpu", "--seed", "1", "--no-epoch-checkpoints", "--disable-validation",
        "--log-format", "none", "--no-save-optimizer-state", "--save-dir", str(save),
    ])
    return save / "checkpoint_last.pt"


def _with_dictionary(checkpoint: Path, data: Path, target: Path, symbols_of) -> dict:
    """Copy the checkpoint into ``target`` with its dictionary rewritten by ``symbols_of`` (old file
    lines → new file lines) and its embedding rows moved so that each symbol keeps its vector."""
    target.mkdir()
    old_lines = (data / "dict.en.txt").read_text().splitlines()
    new_lines = symbols_of(old_lines)
    for lang in ("en", "de"):
        (target / f"dict.{lang}.txt").write_text("".join(line + "\n" for line in new_lines))
    state = torch.load(checkpoint, weights_only=True)
    old = {line.split()[0]: 4 + i for i, line in enumerate(old_lines)}
    for name in EMBEDDINGS:
        rows = state["model"][name]
        added = rows.size(0) - 4 - len(old_lines)  # symbols the task adds after the file's (<boc>)
        moved = torch.zeros(4 + len(new_lines) + added, rows.size(1))
        moved[:4], moved[4 + len(new_lines):] = rows[:4], rows[4 + len(old_lines):]
        for i, line in enumerate(new_lines):
            if line.split()[0] in old:
                moved[4 + i] = rows[old[line.split()[0]]]
        state["model"][name] = moved
    rewritten = Dictionary.load(str(target / "dict.en.txt"))
    rewritten.add_symbol("<boc>")  # the joined dictionary as the task extends it
    fingerprint = dictionary_fingerprint(rewritten)
    state["extra_state"]["ContextTranslationTask"]["dictionaries"] = {"source": fingerprint, "target": fingerprint}
    torch.save(state, target / "checkpoint.pt")
    return state["model"]


def test_sentence_checkpoint_rows_are_copied_by_symbol(tiny_data, sentence_checkpoint, tmp_path):
    original = torch.load(sentence_checkpoint, weights_only=True)["model"]
    # the same symbols in reverse order: copied by index, every row would land on another word
    _with_dictionary(sentence_checkpoint, tiny_data, tmp_path / "reversed", lambda lines: lines[::-1])
    task, model, _ = build(tiny_data, "hmce", ["--pretrained-sentence-checkpoint", str(tmp_path / "reversed/checkpoint.pt")])
    own = model.state_dict()
    for name in EMBEDDINGS:
        assert torch.equal(own[name], original[name]), name
    report = model.sentence_checkpoint_report
    size = len(task.source_dictionary)
    assert report["rows"]["encoder.embed_tokens.weight"] == (size, size, size)
    assert set(EMBEDDINGS) <= set(report["loaded"])


def test_sentence_checkpoint_missing_some_symbols_initialises_their_rows(tiny_data, sentence_checkpoint, tmp_path):
    original = torch.load(sentence_checkpoint, weights_only=True)["model"]
    # the checkpoint's dictionary lacks the first 3 words but knows 2 others: 3 rows stay fresh
    _with_dictionary(sentence_checkpoint, tiny_data, tmp_path / "other",
                     lambda lines: ["zzunseen1 1", "zzunseen2 1", *lines[3:]])
    torch.manual_seed(1)
    fresh_task, fresh_model, _ = build(tiny_data, "hmce")
    task, model, _ = build(tiny_data, "hmce", ["--pretrained-sentence-checkpoint", str(tmp_path / "other/checkpoint.pt")])
    embed = model.state_dict()["encoder.embed_tokens.weight"]
    size = len(task.source_dictionary)
    assert model.sentence_checkpoint_report["rows"]["encoder.embed_tokens.weight"] == (size - 3, size, size - 1)
    assert "encoder.embed_tokens.weight" in model.sentence_checkpoint_report["partial"]
    assert torch.equal(embed[7:], original["encoder.embed_tokens.weight"][7:])
    assert torch.equal(embed[:4], original["encoder.embed_tokens.weight"][:4])
    assert torch.equal(embed[4:7], fresh_model.state_dict()["encoder.embed_tokens.weight"][4:7])


def test_sentence_checkpoint_of_a_mostly_other_dictionary_is_refused(tiny_data, sentence_checkpoint, tmp_path):
    _with_dictionary(sentence_checkpoint, tiny_data, tmp_path / "foreign",
                     lambda lines: [f"foreign{i} 1" for i in range(len(lines) - 2)] + lines[-2:])
    path = tmp_path / "foreign/checkpoint.pt"
    size = len(Dictionary.load(str(tiny_data / "dict.en.txt"))) + 1  # + <boc>
    with pytest.raises(CheckpointError) as error:
        build(tiny_data, "hmce", ["--pretrained-sentence-checkpoint", str(path)])
    overlap = 4 + 2 + 1  # special symbols, the two kept words, <boc>
    assert str(error.value) == (
        f"--pretrained-sentence-checkpoint: {path} was trained with another source dictionary: "
        f"{tmp_path / 'foreign/dict.en.txt'} has {size} symbols, this model's has {size}, and only {overlap} "
        f"({100 * overlap / size:.1f}%) of this model's symbols are in both (at least {100 * MIN_OVERLAP:.0f}% needed). "
        f"Train the sentence-level model on the same binarized data, or binarize this data with its dictionaries "
        f"(fairseq-preprocess --srcdict --tgtdict)")


def test_sentence_checkpoint_without_its_dictionaries_is_refused(tiny_data, sentence_checkpoint, tmp_path):
    state = torch.load(sentence_checkpoint, weights_only=True)
    state["cfg"]["task"]["data"] = state["extra_state"]["ContextTranslationTask"]["data"] = str(tmp_path / "gone")
    path = tmp_path / "moved.pt"
    torch.save(state, path)
    with pytest.raises(CheckpointError) as error:
        build(tiny_data, "hmce", ["--pretrained-sentence-checkpoint", str(path)])
    assert str(error.value) == (
        f"--pretrained-sentence-checkpoint: cannot find the dictionaries of {path} (dict.en.txt and dict.de.txt, "
        f"looked in {tmp_path} and {tmp_path / 'gone'}); its embedding rows are copied by symbol, so copy the "
        f"dict.*.txt files of the data it was trained on next to the checkpoint")
    (tmp_path / "dict.en.txt").write_text("a 1\n")
    (tmp_path / "dict.de.txt").write_text("a 1\n")
    del state["extra_state"]["ContextTranslationTask"]["dictionaries"]  # as trained before the fingerprints
    torch.save(state, path)
    rows = state["model"]["encoder.embed_tokens.weight"].size(0)
    with pytest.raises(CheckpointError, match=rf"moved\.pt has {rows} source embedding rows but its dictionary "
                                              rf".*dict\.en\.txt gives only 6 symbols; put the dict\.\*\.txt"):
        build(tiny_data, "hmce", ["--pretrained-sentence-checkpoint", str(path)])


def test_feature_files_of_another_shape_in_valid_are_an_error_naming_both(multimodal_data, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(multimodal_data, data)
    train_shape = np.load(data / "train.img.npy", mmap_mode="r").shape
    valid = np.load(data / "valid.img.npy")
    np.save(data / "valid.img.npy", valid[:, 0])  # (n, d): would be read as one region
    task, _, _ = build_multimodal(data)
    with pytest.raises(FeatureInputError) as error:
        task.load_dataset("valid")
    assert str(error.value) == (
        f"feature file {data / 'valid.img.npy'} has shape {valid[:, 0].shape} but {data / 'train.img.npy'} has shape "
        f"{train_shape}; every split of an input needs the same row shape, (d) or (regions, d): extract all splits "
        f"the same way")


def test_feature_file_with_other_regions_than_the_model_is_an_error(multimodal_data, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(multimodal_data, data)
    task, _, _ = build_multimodal(data)
    (data / "train.img.npy").unlink()  # as with a decoding directory that holds the test split only
    test = np.load(data / "test.img.npy")
    np.save(data / "test.img.npy", test[:, 0])
    with pytest.raises(FeatureInputError, match=r"test\.img\.npy has 1 regions per row but the model/checkpoint was "
                                                r"trained with 3; extract the features of every split the same way"):
        task.load_dataset("test")


class OneSentenceModel(torch.nn.Module):
    """Uniform logits; sentence embeddings (0, 0) and (0, 1): d_p = 1 under the all-pairs normaliser."""

    def forward(self, src_tokens, src_lengths, prev_output_tokens):
        logits = torch.zeros(*prev_output_tokens.shape, 4, requires_grad=True)
        return logits, {"sentence_embedding": torch.zeros(src_tokens.size(0), 2, requires_grad=True)}

    def embed(self, src_tokens, src_lengths):
        return torch.tensor([[0.0, 1.0]]).expand(src_tokens.size(0), 2)

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        return torch.log_softmax(net_output[0], dim=-1)

    def get_targets(self, sample, net_output):
        return sample["target"]


def _sample(batch_size: int) -> dict:
    tokens = torch.tensor([[2, 3]] * batch_size)
    lengths = torch.tensor([2] * batch_size)
    return {"net_input": {"src_tokens": tokens, "src_lengths": lengths, "prev_output_tokens": tokens},
            "target": tokens, "ntokens": 2 * batch_size, "target_input": {"src_tokens": tokens, "src_lengths": lengths}}


def test_distance_constraint_warns_once_and_counts_batches_without_negatives(caplog):
    criterion = DistanceConstraintCriterion(task=None, sentence_avg=False, label_smoothing=0.0, distance_epsilon=0.0)
    criterion.padding_idx = 1
    with caplog.at_level(logging.WARNING, logger="fairseq_ctx.embedding.distance_constraint"):
        logs = [criterion(OneSentenceModel(), _sample(b))[2] for b in (1, 3, 1)]
    assert [log["batches_without_negatives"] for log in logs] == [1, 0, 1]
    assert logs[0]["d_p"].item() == pytest.approx(1.0) and logs[0]["delta"] == 0.0
    warnings = [r.getMessage() for r in caplog.records if "no negatives" in r.getMessage()]
    assert len(warnings) == 1 and "batches_without_negatives" in warnings[0]
    with metrics.aggregate() as aggregated:
        DistanceConstraintCriterion.reduce_metrics(logs)
    assert aggregated.get_smoothed_values()["batches_without_negatives"] == 2


def test_blank_class_label_is_an_error_naming_file_and_line(tmp_path, capsys):
    np.save(tmp_path / "train.xa.npy", np.eye(3, dtype=np.float32))
    np.save(tmp_path / "test.xa.npy", np.eye(3, dtype=np.float32))
    (tmp_path / "train.labels").write_text("sport\n\nnews\n")
    (tmp_path / "test.labels").write_text("sport\nnews\nnews\n")
    with pytest.raises(SystemExit) as stop:
        doc_classify.main(["--embeddings", str(tmp_path), "--langs", "xa", "--epochs", "1"])
    assert stop.value.code == 2
    assert capsys.readouterr().err == (
        f"fairseq-ctx-doc-classify: error: doc-classify: {tmp_path / 'train.labels'}:2 is blank; every line needs the "
        f"class label of its document (a blank label would become a class of its own)\n")


def test_docids_that_are_not_utf8_name_file_line_and_offset(tmp_path):
    path = tmp_path / "train.docids"
    path.write_bytes(b"talk1\ntalk1\nd\xe9bat\n")
    with pytest.raises(DocumentIdError) as error:
        read_docids(str(path), "train", 3)
    assert str(error.value) == (
        f"context_translation: {path}:3: not valid UTF-8 (byte 0xe9 at byte offset 13 of the file, byte 2 of the "
        f"line); convert the text to UTF-8 (e.g. iconv -f LATIN1 -t UTF-8, for Latin-1 text) and write it to a new file")


def test_translate_doc_input_that_is_not_utf8_is_refused_before_loading(tmp_path, capsys):
    text = tmp_path / "talk.en"
    text.write_bytes("first sentence .\n\nsecond caf\u00e9 .\n".encode("utf-8") + b"third caf\xe9 .\n")
    with pytest.raises(SystemExit) as stop:
        translate_doc.main([str(tmp_path / "unused.pt"), "--input", str(text)])
    assert stop.value.code == 2
    assert capsys.readouterr().err.startswith(
        f"fairseq-ctx-translate-doc: error: {text}:4: not valid UTF-8 (byte 0xe9 at byte offset 42")


def test_prepare_docs_input_that_is_not_utf8_names_file_and_line(tmp_path):
    (tmp_path / "docs.en").write_bytes(b"one .\n\ntw\xf6 .\n")
    (tmp_path / "docs.de").write_bytes(b"eins .\n\nzwei .\n")
    with pytest.raises(SystemExit) as stop:
        prepare_docs.main(["--src-docs", str(tmp_path / "docs.en"), "--tgt-docs", str(tmp_path / "docs.de"),
                           "--out-prefix", str(tmp_path / "out/train"), "--src-lang", "en", "--tgt-lang", "de"])
    assert str(stop.value).startswith(f"fairseq-ctx-prepare-docs: {tmp_path / 'docs.en'}:3: not valid UTF-8 (byte 0xf6 "
                                      f"at byte offset 9 of the file, byte 3 of the line)")
    assert not (tmp_path / "out").exists()


def test_utf8_lines_streams_until_the_bad_line():
    stream = io.BytesIO(b"ok\r\nalso ok\n\xff\n")
    lines = utf8_lines(stream, "<stdin>")
    assert [next(lines), next(lines)] == ["ok\n", "also ok\n"]
    with pytest.raises(TextEncodingError, match=r"^<stdin>:3: not valid UTF-8 \(byte 0xff at byte offset 12 "):
        next(lines)
