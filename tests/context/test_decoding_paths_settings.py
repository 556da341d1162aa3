"""What a user of the decoding paths sees: fairseq-generate and fairseq-interactive take the
context sizes a checkpoint was trained with (a size given that differs is warned about or
refused); every path logs once what context it reads; input that is mostly <unk> is warned
about; translations do not depend on --batch-size, and the length limit is fairseq's in every path."""
import logging
from pathlib import Path
from typing import Dict, List

import pytest

from devtools.in_process_tools import call_tool
from tests.helpers import USER_DIR
from fairseq_ctx.context import hub
from tests.context.test_inference_paths import train

SOURCE_CONTEXT = "source context 1 previous sentence"
TARGET_CONTEXT = "target context 1 previous sentence (the model's own translations)"


@pytest.fixture(scope="module")
def checkpoints(tiny_data, tmp_path_factory) -> Dict[str, Path]:
    """hmce trained with the previous source and target sentence, and hmce with two previous source
    sentences only; 30 updates each (long, repetitive translations: a length limit matters)."""
    root = tmp_path_factory.mktemp("settings")
    target = train(tiny_data, root / "target", ["--task", "context_translation", "--context-size", "1",
                                                "--target-context-size", "1", "--arch", "hmce"], 30)
    source = train(tiny_data, root / "source", ["--task", "context_translation", "--arch", "hmce"], 30)
    return {"target": target / "checkpoint_last.pt", "source": source / "checkpoint_last.pt"}


@pytest.fixture(scope="module")
def documents(tiny_data) -> Path:
    return tiny_data.parent / "raw" / "test.en"


@pytest.fixture
def info(caplog):
    caplog.set_level(logging.INFO, logger="fairseq_ctx")
    return caplog


def hypotheses(text: str) -> Dict[int, str]:
    found = {}
    for line in text.splitlines():
        if line.startswith("H-"):
            number, _, sentence = line.split("\t")
            found[int(number[2:])] = sentence
    return found


def generate(data: Path, checkpoint: Path, tmp_path: Path, *options: str) -> Dict[int, str]:
    results = tmp_path / f"gen{len(list(tmp_path.glob('gen*')))}"
    call_tool("fairseq-generate", [
        str(data), "--user-dir", USER_DIR, "--task", "context_translation", *options, "--path", str(checkpoint),
        "--gen-subset", "test", "--beam", "2", "--batch-size", "4", "--required-batch-size-multiple", "1",
        "--results-path", str(results), "--cpu"])
    return hypotheses((results / "generate-test.txt").read_text(encoding="utf-8"))


def interactive(data: Path, checkpoint: Path, documents: Path, capsys, *options: str) -> List[str]:
    capsys.readouterr()
    call_tool("fairseq-interactive", [
        str(data), "--user-dir", USER_DIR, "--task", "context_translation", *options, "--path", str(checkpoint),
        "--beam", "2", "--buffer-size", "5", "--batch-size", "5", "--input", str(documents), "--cpu"])
    found = hypotheses(capsys.readouterr().out)
    return [found[n] for n in sorted(found)]


def translate_doc(checkpoint: Path, data: Path, documents: Path, capsys, *options: str) -> List[str]:
    from fairseq_ctx.cli import translate_doc as tool

    capsys.readouterr()
    tool.main([str(checkpoint), "--data", str(data), "--beam", "2", "--input", str(documents), "--cpu", *options])
    return capsys.readouterr().out.splitlines()


def context_lines(caplog) -> List[str]:
    return [r.getMessage() for r in caplog.records if "source context" in r.getMessage()]


def test_generate_and_interactive_take_the_trained_context_sizes(checkpoints, tiny_data, documents, tmp_path, info,
                                                                 capsys):
    """Without --context-size / --target-context-size a target-context checkpoint decodes as with
    the sizes it was trained with (it used to fail after a traceback), and says so."""
    checkpoint = checkpoints["target"]
    given = ["--context-size", "1", "--target-context-size", "1"]
    assert generate(tiny_data, checkpoint, tmp_path) == generate(tiny_data, checkpoint, tmp_path, *given)
    taken = [r.getMessage() for r in info.records if "as checkpoint" in r.getMessage()]
    assert taken == [f"context_translation: decoding with --context-size 1 and --target-context-size 1, as checkpoint "
                     f"{checkpoint} was trained (the command line left them at the default)"]
    assert interactive(tiny_data, checkpoint, documents, capsys) == \
        interactive(tiny_data, checkpoint, documents, capsys, *given)


def test_a_size_other_than_the_trained_one_is_warned_about_or_refused(checkpoints, tiny_data, tmp_path, caplog):
    generate(tiny_data, checkpoints["target"], tmp_path, "--context-size", "3", "--target-context-size", "2")
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "was trained" in r.getMessage()]
    assert len(warnings) == 2
    assert warnings[0].startswith(f"context_translation: checkpoint {checkpoints['target']} was trained with "
                                  f"--context-size 1, but --context-size 3 is given and used")
    assert "trained with --target-context-size 1, but --target-context-size 2 is given" in warnings[1]
    with pytest.raises(ValueError, match=r"was trained with --target-context-size 0 but --target-context-size 1 is "
                                         r"given; the model has no target-context parameters"):
        generate(tiny_data, checkpoints["source"], tmp_path, "--target-context-size", "1")


def test_every_decoding_path_logs_the_context_it_reads_once(checkpoints, tiny_data, documents, tmp_path, info,
                                                            capsys):
    checkpoint = checkpoints["target"]
    generate(tiny_data, checkpoint, tmp_path)
    assert context_lines(info) == [f"context_translation (decoding): {SOURCE_CONTEXT}, {TARGET_CONTEXT}; split test: "
                                   f"6 documents, {count_sentences(documents)} sentences"]
    info.clear()
    interactive(tiny_data, checkpoint, documents, capsys)
    assert context_lines(info) == [f"context_translation (fairseq-interactive): {SOURCE_CONTEXT}, {TARGET_CONTEXT}; "
                                   f"documents: the input as it comes, a blank line ends one"]
    info.clear()
    translate_doc(checkpoint, tiny_data, documents, capsys)
    hub_line = (f"DocumentTranslator: {SOURCE_CONTEXT}, {TARGET_CONTEXT}; documents: a blank line ends one "
                f"(translate_stream), one per translate_document")
    assert context_lines(info) == [hub_line]
    assert [r.getMessage() for r in info.records if r.getMessage().startswith("translated ")] == [
        f"translated 6 documents, {count_sentences(documents)} sentences of {documents}"]
    info.clear()
    translator = hub.load(str(checkpoint), data=str(tiny_data), beam=2)
    translator.translate_document(["the new man stands .", "it is small ."])
    translator.translate_document(["it is small ."])
    assert context_lines(info) == [hub_line]
    info.clear()
    sentence_level = hub.load(str(checkpoints["source"]), data=str(tiny_data), beam=2)
    sentence_level.translate("it is small .")
    assert context_lines(info) == ["DocumentTranslator: source context 2 previous sentences, target context 0; "
                                   "documents: a blank line ends one (translate_stream), one per translate_document"]


def count_sentences(documents: Path) -> int:
    return sum(1 for line in documents.read_text(encoding="utf-8").splitlines() if line.strip())


def test_mostly_unknown_input_is_named_with_its_share(checkpoints, tiny_data, documents, tmp_path, caplog, capsys):
    garbage = tmp_path / "other-script.txt"
    garbage.write_text("это другой текст .\nещё одна строка\n\nи третья .\n", encoding="utf-8")
    translate_doc(checkpoints["source"], tiny_data, garbage, capsys)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"{garbage}: 80.0% of its first 10 tokens are <unk> (not in the model's dictionary)")
    assert "--spm MODEL; spm_model= in Python" in warnings[0]
    caplog.clear()
    translate_doc(checkpoints["source"], tiny_data, documents, capsys)
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
    translator = hub.load(str(checkpoints["source"]), data=str(tiny_data), beam=1)
    list(translator.translate_stream(["xyz qqq", "www ."]))
    assert [r.getMessage()[:40] for r in caplog.records if r.levelname == "WARNING"] == [
        "the input: 75.0% of its first 4 tokens a"]


@pytest.mark.parametrize("model", ["target", "source"])
def test_translations_do_not_depend_on_batch_size_and_equal_interactive(model, checkpoints, tiny_data, documents,
                                                                        capsys):
    """fairseq's generator limits a batch by max_len_a times its longest source; with fairseq's limit
    (a = 0, b = 200) in every path, every batch size gives the same translations, which are
    fairseq-interactive's with its defaults."""
    checkpoint = checkpoints[model]
    outputs = [translate_doc(checkpoint, tiny_data, documents, capsys, "--batch-size", size) for size in ("1", "3", "32")]
    assert outputs[0] == outputs[1] == outputs[2]
    assert [line for line in outputs[0] if line] == interactive(tiny_data, checkpoint, documents, capsys)
