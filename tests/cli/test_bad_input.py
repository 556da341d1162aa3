"""Bad input gets a clear error before any training step, and nothing is overwritten."""
import shutil

import pytest

from tests.helpers import USER_DIR, batch_of, build, run_tool, TINY_MODEL

from fairseq_ctx.context.data.docids import DocumentIdError


@pytest.fixture
def data_copy(tiny_data, tmp_path):
    target = tmp_path / "data-bin"
    shutil.copytree(tiny_data, target)
    return target


def test_docids_with_wrong_line_count_names_file_and_both_counts(data_copy):
    path = data_copy / "train.docids"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-3]) + "\n")
    task, _, _ = build(data_copy, "hmce")
    with pytest.raises(DocumentIdError) as error:
        task.load_dataset("train")
    message = str(error.value)
    assert str(path) in message and f"{len(lines) - 3} lines" in message and f"{len(lines)} sentences" in message


def test_fairseq_train_stops_before_training_on_misaligned_docids(data_copy, tmp_path):
    path = data_copy / "valid.docids"
    path.write_text(path.read_text() + "extra-doc\n")
    save_dir = tmp_path / "checkpoints"
    result = run_tool(
        ["fairseq-train", str(data_copy), "--user-dir", USER_DIR, "--task", "context_translation",
         "--arch", "hmce", *TINY_MODEL, "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "500",
         "--max-update", "5", "--cpu", "--save-dir", str(save_dir)],
        check=False,
    )
    assert result.returncode != 0
    assert str(path) in result.stderr and "lines but split 'valid' has" in result.stderr
    assert "num_updates" not in result.stdout + result.stderr
    assert not any(save_dir.glob("*.pt"))


def test_missing_docids_names_expected_path_and_how_to_make_it(data_copy):
    (data_copy / "train.docids").unlink()
    task, _, _ = build(data_copy, "hmce")
    with pytest.raises(DocumentIdError) as error:
        task.load_dataset("train")
    message = str(error.value)
    assert str(data_copy / "train.docids") in message
    assert "fairseq-ctx-prepare-docs" in message and "cp PREFIX.docids" in message


def test_non_contiguous_document_names_the_line(data_copy):
    path = data_copy / "train.docids"
    lines = path.read_text().splitlines()
    lines[-1] = lines[0]
    path.write_text("\n".join(lines) + "\n")
    task, _, _ = build(data_copy, "hmce")
    with pytest.raises(DocumentIdError, match=rf"train.docids:{len(lines)}: document 'doc0' continues"):
        task.load_dataset("train")


def test_empty_split_is_an_error(tmp_path):
    for name, text in (("train.en", "a b\nc d\n"), ("train.de", "x y\nz w\n"), ("test.en", ""), ("test.de", "")):
        (tmp_path / name).write_text(text)
    data = tmp_path / "data-bin"
    run_tool(["fairseq-preprocess", "--source-lang", "en", "--target-lang", "de", "--trainpref", str(tmp_path / "train"),
              "--testpref", str(tmp_path / "test"), "--destdir", str(data), "--joined-dictionary"])
    task, _, _ = build(data, "hmce")
    with pytest.raises(DocumentIdError, match="split 'test' in .* has 0 sentences"):
        task.load_dataset("test")


def test_context_longer_than_position_limit_is_truncated_and_counted(tiny_data, caplog):
    limit = 6
    task, model, _ = build(tiny_data, "hmce", ["--max-source-positions", "12", "--max-context-tokens", str(limit),
                                              "--encoder-learned-pos"])
    with caplog.at_level("WARNING"):
        task.load_dataset("train")
    dataset = task.datasets["train"]
    used = {j for i in range(len(dataset)) for j in dataset[i]["context_ids"]}
    expected = sum(int(dataset.pair.src_sizes[j]) + 1 > limit for j in used)
    assert expected > 0 and dataset.truncated_contexts == expected
    assert sum("are truncated" in r.getMessage() for r in caplog.records) == 1
    sample = batch_of(task, "train", list(range(20)))
    assert sample["net_input"]["context_tokens"].size(1) == limit
    assert (sample["net_input"]["context_tokens"].ne(task.src_dict.pad()).sum(1) <= limit).all()
    loss = model(**sample["net_input"])[0].float().mean()
    loss.backward()
