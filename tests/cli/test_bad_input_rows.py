"""The bad-input table of docs/data-formats.md: every row names tests that exist, and the rows
whose error had no test yet get one (a blank document id, a missing per-language dictionary, a
misaligned pair, a malformed --lang-pairs)."""
import re
import shutil
from pathlib import Path

import pytest

from tests.helpers import build
from tests.embedding_helpers import build_embedding_model
from fairseq_ctx.context.data.docids import DocumentIdError
from fairseq_ctx.embedding.data.shared_dictionary import SharedDictionaryError


def test_blank_document_id_names_the_line(tiny_data, tmp_path):
    data = tmp_path / "data-bin"
    shutil.copytree(tiny_data, data)
    path = data / "train.docids"
    lines = path.read_text().splitlines()
    lines[6] = ""
    path.write_text("\n".join(lines) + "\n")
    task, _, _ = build(data, "hmce")
    with pytest.raises(DocumentIdError, match=rf"context_translation: {path}:7 is blank; every line needs a document id"):
        task.load_dataset("train")


def test_missing_language_dictionary_names_the_file(multilingual_data, tmp_path):
    data = tmp_path / "data-bin"
    shutil.copytree(multilingual_data, data, ignore=shutil.ignore_patterns("dict", "dict.pb.txt"))
    with pytest.raises(SharedDictionaryError, match=rf"no dict\.txt and missing {data / 'dict.pb.txt'}; binarize every pair"):
        build_embedding_model(data, "tmde")


def test_misaligned_pair_gives_both_counts(multilingual_data, tmp_path):
    data = tmp_path / "data-bin"
    shutil.copytree(multilingual_data, data, ignore=shutil.ignore_patterns("dict"))
    for ext in ("bin", "idx"):
        shutil.copy(data / f"test.xa-pa.pa.{ext}", data / f"valid.xa-pa.pa.{ext}")
    task, _, _ = build_embedding_model(data, "tmde")
    with pytest.raises(ValueError, match=r"valid\.xa-pa has (\d+) source and (\d+) target sentences; it must be "
                                         r"non-empty and aligned") as error:
        task.load_dataset("valid")
    source, target = re.search(r"has (\d+) source and (\d+) target", str(error.value)).groups()
    assert int(source) < int(target)  # the test split's target side is longer than the valid split


def test_malformed_lang_pairs_entry(multilingual_data):
    with pytest.raises(ValueError, match=r"bad --lang-pairs entry 'xa-pa-pb', expected SRC-TGT"):
        build_embedding_model(multilingual_data, "tmde", ["--lang-pairs", "xa-pa-pb"])


def test_multilingual_embedding_refuses_a_model_of_another_task_before_building(multilingual_data):
    with pytest.raises(ValueError, match=r"multilingual_embedding: --arch hmce is a context_translation model; train "
                                         r"and use it with --task context_translation\. If this is a checkpoint"):
        build_embedding_model(multilingual_data, "hmce", size=[])


def test_every_row_of_the_bad_input_table_names_existing_tests():
    """docs/data-formats.md: each table row ends with the test(s) that check it, and they exist."""
    root = Path(__file__).resolve().parents[2]
    rows = [line for line in (root / "docs" / "data-formats.md").read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| task ")]
    assert len(rows) >= 30
    for row in rows:
        names = re.findall(r"`(tests/[\w/]+\.py)?::(\w+)`", row.rstrip(" |").rsplit("|", 1)[1])
        assert names, f"row without a test: {row}"
        current = None
        for path, name in names:
            current = path or current
            assert current and f"def {name}(" in (root / current).read_text(), f"{current}::{name} missing: {row}"
