"""Errors that say what to do, before the expensive work: text that is not UTF-8, an output in a
directory that does not exist, --max-tokens below a sentence with its context (fairseq-train,
-generate, -interactive), decoder and batch sizes of zero or below, a --spm file that is no
sentencepiece model, a directory given as embedding input, a closed pipe, and analyze-heads on a
checkpoint of a task it cannot read."""
import re
import subprocess
from pathlib import Path

import pytest

from devtools.in_process_tools import call_tool
from tests.helpers import EMBEDDING_PAIRS, TINY_MODEL, USER_DIR, tool
from tests.embedding_helpers import TINY_TRANSFORMER
from fairseq_ctx.cli import analyze_heads, contrastive, embed, score, subset_bleu, translate_doc
from fairseq_ctx.context import hub
from fairseq_ctx.core.generation_options import GenerationOptionError
from fairseq_ctx.core.language_pair_wrapper import BatchLimitError

TRAIN = ["--optimizer", "adam", "--lr", "1e-3", "--max-update", "1", "--cpu", "--seed", "1", "--no-epoch-checkpoints",
         "--disable-validation", "--log-format", "none", "--no-save-optimizer-state"]
UTF8_FIX = "convert the text to UTF-8 (e.g. iconv -f LATIN1 -t UTF-8, for Latin-1 text) and write it to a new file"


@pytest.fixture(scope="module")
def checkpoints(tiny_data, multilingual_data, tmp_path_factory) -> dict:
    """ctx_concat (which counts its context sentences in --max-tokens) and tmde, one update each."""
    work = tmp_path_factory.mktemp("messages")
    runs = {
        "ctx_concat": [str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation", "--arch", "ctx_concat",
                       *TINY_MODEL, "--max-tokens", "500"],
        "tmde": [str(multilingual_data), "--user-dir", USER_DIR, "--task", "multilingual_embedding", "--lang-pairs",
                 EMBEDDING_PAIRS, "--arch", "tmde", *TINY_TRANSFORMER, "--criterion", "distance_constraint",
                 "--max-tokens", "500"],
    }
    for name, command in runs.items():
        call_tool("fairseq-train", [*command, *TRAIN, "--save-dir", str(work / name)])
    return {name: work / name / "checkpoint_last.pt" for name in runs}


def latin1(path: Path, lines) -> str:
    path.write_bytes("".join(line + "\n" for line in lines).encode("latin-1"))
    return str(path)


def exit_text(error, capsys) -> str:
    return str(error.value.code) + capsys.readouterr().err


def test_text_that_is_not_utf8_names_file_line_and_byte(tmp_path, capsys):
    """contrastive, embed, score and subset-bleu stop before loading anything (the checkpoints
    named here do not exist)."""
    bad = latin1(tmp_path / "bad.txt", ["a b", "caf\u00e9 au lait"])
    expected = f"{bad}:2: not valid UTF-8 (byte 0xe9 at byte offset 7 of the file, byte 4 of the line); {UTF8_FIX}"
    good = str(tmp_path / "good.txt")
    Path(good).write_text("a b\nc d\n", encoding="utf-8")
    calls = [
        lambda: contrastive.main([str(tmp_path / "none.pt"), "--source", good, "--reference", bad,
                                  "--contrastive", good]),
        lambda: embed.main([str(tmp_path / "none.pt"), "--lang", "xa", "--input", bad, "--output",
                            str(tmp_path / "e.npy")]),
        lambda: score.main(["--hyp", good, "--ref", bad, "--no-comet"]),
        lambda: score.main([bad, "--no-comet"]),
        lambda: subset_bleu.main([good, "--helpful", bad, "--unhelpful", good]),
    ]
    Path(good).write_text("H-0\t-0.1\ta b\nT-0\ta b\nH-1\t-0.1\tc d\nT-1\tc d\n", encoding="utf-8")
    for call in calls:
        with pytest.raises(SystemExit) as error:
            call()
        assert error.value.code not in (0, None)
        assert expected in exit_text(error, capsys)
    assert not (tmp_path / "e.npy").exists()


def test_an_output_in_a_missing_directory_is_refused_before_scoring(tmp_path, capsys):
    hyp = tmp_path / "hyp"
    hyp.write_text("a b\n", encoding="utf-8")
    missing = tmp_path / "results" / "score.json"
    with pytest.raises(SystemExit) as error:
        score.main(["--hyp", str(hyp), "--ref", str(hyp), "--no-comet", "--json", str(missing)])
    captured = capsys.readouterr()
    assert error.value.code == 2 and captured.out == ""
    assert (f"error: --json {missing}: the directory {missing.parent} does not exist; create it first (mkdir -p "
            f"{missing.parent}) or choose another path") in captured.err
    with pytest.raises(SystemExit):
        score.main(["--hyp", str(hyp), "--ref", str(hyp), "--no-comet", "--json", str(tmp_path)])
    assert f"--json {tmp_path} is a directory; give the name of the file to write" in capsys.readouterr().err


MAX_TOKENS = (r"--max-tokens 6 is too small: (\d+) (?:example does|examples do) not fit in a batch of its own, the "
              r"largest {what} with (\d+) tokens \((\d+) source tokens \+ (\d+) tokens of its context.*\)\. Raise "
              r"--max-tokens to at least \2, or lower --context-size / --target-context-size / --max-context-tokens")


def test_max_tokens_below_a_sentence_with_its_context(tiny_data, checkpoints, tmp_path):
    """Stock fairseq stops with an assertion about an index; the message names the sentence and
    the tokens it needs, counting its context."""
    with pytest.raises(BatchLimitError, match=MAX_TOKENS.format(what=r"sentence \d+ of split 'train' \(line \d+ of "
                                                                      r"its text\)")):
        call_tool("fairseq-train", [str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation",
                                         "--arch", "ctx_concat", *TINY_MODEL, "--max-tokens", "6", *TRAIN,
                                         "--save-dir", str(tmp_path / "run")])
    assert not list((tmp_path / "run").glob("*.pt"))
    in_test = MAX_TOKENS.format(what=r"sentence \d+ of split 'test' \(line \d+ of its text\)")
    with pytest.raises(BatchLimitError, match=in_test):
        call_tool("fairseq-generate", [str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation",
                                            "--path", str(checkpoints["ctx_concat"]), "--gen-subset", "test", "--cpu",
                                            "--max-tokens", "6"])
    result = subprocess.run([tool("fairseq-interactive"), str(tiny_data), "--user-dir", USER_DIR, "--task",
                             "context_translation", "--path", str(checkpoints["ctx_concat"]), "--cpu", "--max-tokens",
                             "6"], input="the cat sleeps .\nit is very quiet here today .\n".encode(),
                            capture_output=True)
    assert result.returncode != 0
    assert re.search(MAX_TOKENS.format(what=r"input line 2"), result.stderr.decode()), result.stderr.decode()[-2000:]


def test_interactive_input_that_is_not_utf8_names_the_line(tiny_data, checkpoints):
    result = subprocess.run([tool("fairseq-interactive"), str(tiny_data), "--user-dir", USER_DIR, "--task",
                             "context_translation", "--path", str(checkpoints["ctx_concat"]), "--cpu"],
                            input="the cat sleeps .\ncaf\u00e9 .\n".encode("latin-1"), capture_output=True)
    assert result.returncode != 0
    assert (f"<stdin>:2: not valid UTF-8 (byte 0xe9 at byte offset 20 of the file, byte 4 of the line); {UTF8_FIX}"
            in result.stderr.decode())


def test_decoder_and_batch_sizes_that_cannot_decode_are_refused(tiny_data, checkpoints, tmp_path, capsys):
    decode = [str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation", "--path",
              str(checkpoints["ctx_concat"]), "--gen-subset", "test", "--cpu"]
    cases = {("--beam", "0"): "--beam 0 must be at least 1 (1 is greedy search)",
             ("--beam", "2", "--nbest", "3"): "--nbest 3 must be between 1 and --beam 2",
             ("--max-len-a", "0", "--max-len-b", "0"): "--max-len-a 0 with --max-len-b 0 allows no output token",
             ("--max-len-b", "-1"): "--max-len-a 0.0 and --max-len-b -1 must not be negative",
             ("--min-len", "-1"): "--min-len -1 must not be negative"}
    for options, message in cases.items():
        with pytest.raises(GenerationOptionError, match=re.escape(message)):
            call_tool("fairseq-generate", [*decode, *options])
    with pytest.raises(BatchLimitError, match=re.escape("--batch-size 0 must be at least 1")):
        call_tool("fairseq-generate", [*decode, "--batch-size", "0"])
    with pytest.raises(GenerationOptionError, match=re.escape("--beam 0 must be at least 1")):
        hub.load(str(checkpoints["ctx_concat"]), beam=0)
    text = tmp_path / "input.txt"
    text.write_text("the cat sleeps .\n", encoding="utf-8")
    for options, message in {("--beam", "0"): "--beam 0 must be at least 1",
                             ("--batch-size", "0"): "--batch-size must be at least 1, got 0",
                             ("--max-len-b", "-2"): "must not be negative"}.items():
        with pytest.raises(SystemExit) as error:  # a usage error: no model is loaded for it
            translate_doc.main([str(tmp_path / "none.pt"), "--input", str(text), *options])
        assert error.value.code == 2 and message in capsys.readouterr().err
    with pytest.raises(SystemExit) as error:
        embed.main([str(tmp_path / "none.pt"), "--lang", "xa", "--input", str(text), "--output",
                    str(tmp_path / "e.npy"), "--max-tokens", "0"])
    assert error.value.code == 2 and "--max-tokens must be at least 1, got 0" in capsys.readouterr().err


def test_spm_that_is_not_a_sentencepiece_model_and_embed_input_that_is_no_file(tmp_path, capsys):
    text = tmp_path / "input.txt"
    text.write_text("the cat sleeps .\n", encoding="utf-8")
    with pytest.raises(SystemExit) as error:
        translate_doc.main([str(tmp_path / "none.pt"), "--input", str(text), "--spm", str(text)])
    err = capsys.readouterr().err
    assert error.value.code == 2
    assert (f"sentencepiece model {text} is not a sentencepiece model (" in err
            and "pass the .model file written by spm_train (--spm), not its .vocab or a text file" in err)
    for given, what in ((tmp_path, "is a directory"), (tmp_path / "gone.txt", "does not exist")):
        with pytest.raises(SystemExit) as error:
            embed.main([str(tmp_path / "none.pt"), "--lang", "xa", "--input", str(given), "--output",
                        str(tmp_path / "e.npy")])
        assert error.value.code == 2
        assert f"--input {given} {what}; give a text file, one sentence or document per line" in capsys.readouterr().err


def test_a_closed_pipe_ends_a_tool_quietly(tiny_data, checkpoints, tmp_path):
    """``fairseq-ctx-translate-doc ... | head -1``: no BrokenPipeError traceback, no second error at exit."""
    text = tmp_path / "input.txt"
    text.write_text("".join("the cat sleeps .\n" for _ in range(200)), encoding="utf-8")
    process = subprocess.Popen([tool("fairseq-ctx-translate-doc"), str(checkpoints["ctx_concat"]), "--data",
                                str(tiny_data), "--input", str(text), "--beam", "1", "--batch-size", "8", "--cpu"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.readline()
    process.stdout.close()
    stderr = process.stderr.read().decode()
    process.wait()
    assert "BrokenPipeError" not in stderr and "Traceback" not in stderr and "Exception ignored" not in stderr
    assert process.returncode == 1


def test_analyze_heads_refuses_a_checkpoint_of_a_task_it_cannot_read(tiny_data, checkpoints, tmp_path):
    with pytest.raises(SystemExit, match=re.escape(
            f"fairseq-ctx-analyze-heads: checkpoint {checkpoints['tmde']} is a --task multilingual_embedding model "
            f"(--arch tmde), but this needs a checkpoint trained with --task context_translation or "
            f"multimodal_translation or translation; pass a checkpoint of such a model")):
        analyze_heads.main([str(tiny_data), "--path", str(checkpoints["tmde"]), "--output-dir", str(tmp_path / "h")])
    assert not (tmp_path / "h").exists()
    with pytest.raises(SystemExit, match=re.escape("fairseq-ctx-analyze-heads --compare-path: checkpoint ")):
        analyze_heads.main([str(tiny_data), "--path", str(checkpoints["ctx_concat"]), "--compare-path",
                            str(checkpoints["tmde"]), "--output-dir", str(tmp_path / "h")])


def test_translate_doc_to_a_full_disk_names_standard_output_and_what_it_holds(tiny_data, checkpoints, tmp_path):
    """``> /dev/full`` (every write fails with ENOSPC): one line naming the failure, no traceback."""
    text = tmp_path / "input.txt"
    text.write_text("the cat sleeps .\nit is black .\n", encoding="utf-8")
    with open("/dev/full", "w") as full:
        result = subprocess.run([tool("fairseq-ctx-translate-doc"), str(checkpoints["ctx_concat"]), "--data",
                                 str(tiny_data), "--input", str(text), "--beam", "1", "--cpu"],
                                stdout=full, stderr=subprocess.PIPE, text=True)
    assert result.returncode == 1
    assert ("fairseq-ctx-translate-doc: error: standard output could not be written after 0 translated lines (No "
            "space left on device, errno 28): what it received is incomplete;") in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr


def test_analyze_heads_into_a_directory_where_nothing_can_be_written_is_refused_before_loading(tiny_data,
                                                                                              checkpoints, capsys):
    """/sys refuses new files even to root (for whom os.access says yes to any directory)."""
    with pytest.raises(SystemExit):
        analyze_heads.main([str(checkpoints["ctx_concat"]), "--data", str(tiny_data), "--output-dir",
                            "/sys/fairseq-ctx-heads"])
    assert ("--output-dir /sys/fairseq-ctx-heads/heads.csv: no file can be written in /sys (Permission denied)"
            in capsys.readouterr().err)


def test_make_contrastive_without_context_is_refused(tmp_path, capsys):
    from fairseq_ctx.cli import make_contrastive

    with pytest.raises(SystemExit):
        make_contrastive.main([str(tmp_path / "set"), "--context-size", "-1"])
    assert "--context-size must be at least 1, got -1" in capsys.readouterr().err
    assert not (tmp_path / "set").exists()


def test_an_npz_archive_under_an_npy_name_is_named_as_one(tmp_path):
    import numpy as np

    from fairseq_ctx.embedding.embedding_file import EmbeddingFileError, read_embeddings
    from fairseq_ctx.multisource.data.feature_file import FeatureInputError, open_features

    archive = tmp_path / "features.npy"
    with open(archive, "wb") as handle:
        np.savez(handle, rows=np.zeros((3, 4), dtype=np.float32))
    for read, error in ((read_embeddings, EmbeddingFileError), (open_features, FeatureInputError)):
        with pytest.raises(error, match=re.escape(f"{archive} is a .npz archive (arrays: rows)")):
            read(str(archive))


def test_document_ids_that_differ_in_invisible_characters_are_shown_escaped(tmp_path):
    from fairseq_ctx.context.data.docids import DocumentIdError, read_docids

    docids = tmp_path / "train.docids"
    docids.write_text("talk1\ntalk1\u200b\ntalk1\n", encoding="utf-8")
    with pytest.raises(DocumentIdError, match=re.escape(
            f"{docids}:3: document 'talk1' continues after document 'talk1\\u200b' started at line 2 (first seen at "
            f"line 1)")) as error:
        read_docids(str(docids), "train", 3)
    assert "zero-width space" in str(error.value)


def test_translate_document_names_what_is_not_a_list_of_sentences(tiny_data, checkpoints):
    translator = hub.load(str(checkpoints["ctx_concat"]), data=str(tiny_data), cpu=True)
    with pytest.raises(TypeError, match="^translate_document takes a document as a list of sentences .strings., got "
                                        "NoneType$"):
        translator.translate_document(None)
    with pytest.raises(TypeError, match="^sentence 1 of the document is int, not a string"):
        translator.translate_document(["the cat sleeps .", 7])


def test_an_empty_voita_set_says_it_holds_no_groups(tmp_path):
    from fairseq_ctx.context.contrastive.voita import ContrastiveInputError, read_voita

    empty, other = tmp_path / "deixis_dev.json", tmp_path / "lex_cohesion_dev.json"
    empty.write_text("[]", encoding="utf-8")
    other.write_text('{"src": "a"}', encoding="utf-8")
    with pytest.raises(ContrastiveInputError, match=re.escape(f"{empty}: the JSON list holds no groups")):
        read_voita(str(empty))
    with pytest.raises(ContrastiveInputError, match=re.escape("found a JSON object")):
        read_voita(str(other))


def test_an_interactive_line_longer_than_the_model_reads_is_named_by_its_line(tiny_data, checkpoints):
    words = " ".join(["the"] * 1500)
    result = subprocess.run([tool("fairseq-interactive"), str(tiny_data), "--user-dir", USER_DIR, "--task",
                             "context_translation", "--path", str(checkpoints["ctx_concat"]), "--cpu"],
                            input=f"the cat sleeps .\n{words}\n", capture_output=True, text=True)
    assert result.returncode != 0
    assert "fairseq-interactive: input line 2 is 1501 tokens with its context, where the model reads at most 1024" \
        in result.stderr, result.stderr[-2000:]
    assert "split that sentence into shorter ones" in result.stderr and "Size of sample #" not in result.stderr
