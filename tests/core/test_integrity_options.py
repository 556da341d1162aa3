"""Options the package documents do what the documentation says, or are refused with the reason:
``fairseq-generate --num-shards/--shard-id`` with our tasks, ``translate_document`` given a
string, zero or negative sizes of the decoder and of the batches."""
import re

import pytest

from devtools.in_process_tools import call_tool
from tests.helpers import TINY_MODEL, USER_DIR
from fairseq_ctx.context import hub

TRAIN = ["--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "500", "--max-update", "1", "--cpu", "--seed", "1",
         "--no-epoch-checkpoints", "--disable-validation", "--log-format", "none", "--no-save-optimizer-state"]


@pytest.fixture(scope="module")
def hmce_checkpoint(tiny_data, tmp_path_factory):
    save_dir = tmp_path_factory.mktemp("options") / "hmce"
    call_tool("fairseq-train", [str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation",
                                     "--arch", "hmce", *TINY_MODEL, *TRAIN, "--save-dir", str(save_dir)])
    return save_dir / "checkpoint_last.pt"


def decode(data, checkpoint, results, *extra) -> set:
    call_tool("fairseq-generate", [
        str(data), "--user-dir", USER_DIR, "--task", "context_translation", "--path", str(checkpoint), "--cpu",
        "--gen-subset", "test", "--beam", "1", "--max-len-b", "5", "--batch-size", "4",
        "--required-batch-size-multiple", "1", "--results-path", str(results), *extra])
    lines = (results / "generate-test.txt").read_text(encoding="utf-8").splitlines()
    return {int(line.split("\t")[0][2:]) for line in lines if line.startswith("H-")}


def test_generate_num_shards_splits_the_split(tiny_data, hmce_checkpoint, tmp_path):
    """Stock fairseq-generate passes the number of processes instead of --num-shards, so each
    "shard" decoded every sentence; now the shards are disjoint and together the whole split."""
    sentences = len((tiny_data / "test.docids").read_text().splitlines())
    shards = [decode(tiny_data, hmce_checkpoint, tmp_path / f"shard{k}", "--num-shards", "2", "--shard-id", str(k))
              for k in range(2)]
    assert shards[0] | shards[1] == set(range(sentences)) and not shards[0] & shards[1]
    assert len(shards[0]) >= sentences // 3 and len(shards[1]) >= sentences // 3
    with pytest.raises(ValueError, match=re.escape("--shard-id 2 must be one of 0..1 (--num-shards 2)")):
        decode(tiny_data, hmce_checkpoint, tmp_path / "bad", "--num-shards", "2", "--shard-id", "2")


def test_translate_document_refuses_a_bare_string(hmce_checkpoint):
    """A string is a sequence of characters: it would be translated character by character."""
    translator = hub.load(str(hmce_checkpoint), beam=1)
    with pytest.raises(TypeError, match=re.escape(
            "translate_document takes a document as a list of sentences, got a string; use "
            "translate_document([sentence]) or translate(sentence) for one sentence, or "
            "translate_stream(text.splitlines()) for blank-line separated text")):
        translator.translate_document("the cat sleeps .")
    assert len(translator.translate_document(["the cat sleeps .", "it is quiet ."])) == 2
