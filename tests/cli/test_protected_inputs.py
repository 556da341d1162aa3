"""No tool writes over one of its inputs: an output option naming an input (through a symbolic
link, a hard link or another relative spelling) is refused before anything is loaded, and the
corpus generators refuse a directory that already holds files unless --overwrite is given."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fairseq_ctx.cli import (
    adversarial,
    analyze_heads,
    attention_plot,
    contrastive,
    cxmi,
    doc_classify,
    embed,
    make_contrastive,
    make_corpus,
    make_multilingual_corpus,
    make_multimodal_corpus,
    plot_embeddings,
    prepare_docs,
    score,
    subset_bleu,
    xsim,
)
from fairseq_ctx.context.data.prepare_docs import prepare
from fairseq_ctx.core.output_paths import OutputPathError, check_output_dir, check_outputs, same_file, split_files


def refused(main, argv, capsys) -> str:
    """Run a tool's main, expect a usage error (status 2), return its stderr."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    return capsys.readouterr().err


def test_same_file_sees_links_and_relative_paths(tmp_path, monkeypatch):
    original = tmp_path / "a.txt"
    original.write_text("x\n")
    (tmp_path / "soft.txt").symlink_to(original)
    os.link(original, tmp_path / "hard.txt")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    for alias in ("../a.txt", str(tmp_path / "soft.txt"), str(tmp_path / "hard.txt"), "../sub/../a.txt"):
        assert same_file(alias, str(original)), alias
    assert not same_file("../other.txt", str(original))
    assert same_file("../missing.txt", str(tmp_path / "missing.txt"))  # neither exists: resolved paths compared
    (tmp_path / "b.txt").write_text("x\n")  # equal content, another file
    assert not same_file("../b.txt", str(original))


def test_check_outputs_names_both_options_and_paths(tmp_path):
    source = tmp_path / "src.txt"
    source.write_text("x\n")
    (tmp_path / "link.json").symlink_to(source)
    with pytest.raises(OutputPathError) as error:
        check_outputs({"--json": str(tmp_path / "link.json")}, {"--source": [str(source)], "--key": None})
    assert str(error.value) == (f"--json {tmp_path / 'link.json'} is one of the inputs: the same file as --source "
                                f"{source}; writing it would destroy the input. Choose another output path")
    with pytest.raises(OutputPathError, match=r"--per-sentence .*out\.tsv and --json .*out\.tsv are the same file"):
        check_outputs({"--per-sentence": str(tmp_path / "out.tsv"), "--json": str(tmp_path / "out.tsv")}, {})
    check_outputs({"--json": str(tmp_path / "new.json")}, {"--source": str(source)})


def test_split_files_are_what_a_task_reads_not_earlier_outputs(tmp_path):
    names = ["dict.en.txt", "test.en-de.en.bin", "test.en-de.en.idx", "test.docids", "test.img.npy", "test.img.ids",
             "train.en-de.en.bin", "test.json", "test.results.tsv", "notes.txt"]
    for name in names:
        (tmp_path / name).write_text("x")
    assert split_files(str(tmp_path), "test") == [str(tmp_path / n) for n in sorted(names[:6])]
    assert split_files(str(tmp_path / "missing"), "test") == []


def test_prepare_docs_refuses_an_out_prefix_equal_to_the_input_prefix(tmp_path, monkeypatch, capsys):
    raw = tmp_path / "raw"
    raw.mkdir()
    text = "a b .\nc .\n\nd .\n"
    (raw / "train.en").write_text(text)
    (raw / "train.de").write_text(text)
    (tmp_path / "alias").symlink_to(raw)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        prepare_docs.main(["--src-docs", "raw/train.en", "--tgt-docs", "raw/train.de", "--out-prefix", "alias/train",
                           "--src-lang", "en", "--tgt-lang", "de"])
    assert str(stop.value) == ("fairseq-ctx-prepare-docs: --out-prefix + --src-lang alias/train.en is one of the inputs: "
                               "the same file as --src-docs raw/train.en; writing it would destroy the input. Choose "
                               "another output path")
    assert (raw / "train.en").read_text() == text and (raw / "train.de").read_text() == text
    assert not (raw / "train.docids").exists()
    with pytest.raises(OutputPathError, match=r"--out-prefix \+ --src-lang .*p\.en and --out-prefix \+ --tgt-lang"):
        prepare("raw/train.en", "raw/train.de", "out/p", "en", "en", "doc")
    assert prepare("raw/train.en", "raw/train.de", "out/p", "en", "de", "doc") == 3
    assert (tmp_path / "out/p.docids").read_text() == "doc0\ndoc0\ndoc1\n"


@pytest.fixture
def files(tmp_path) -> Path:
    """Small input files of every kind the tools read, plus links to some of them."""
    for name in ("src.txt", "ref.txt", "wrong.txt", "key.txt", "generate.out", "helpful.ids", "unhelpful.ids",
                 "labels.txt"):
        (tmp_path / name).write_text(f"content of {name}\n")
    np.save(tmp_path / "a.npy", np.eye(3, dtype=np.float32))
    np.save(tmp_path / "b.npy", np.eye(3, dtype=np.float32))
    data = tmp_path / "data"
    data.mkdir()
    for name in ("dict.en.txt", "test.docids", "test.en-de.en.bin", "train.labels", "train.xa.npy"):
        (data / name).write_text(f"content of {name}\n")
    (tmp_path / "model.png").write_text("a checkpoint\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "heads.json").write_text("a checkpoint\n")
    return tmp_path


def _cases(d: Path):
    """(tool main, argv, the input the output option points at) for every tool with an output option."""
    hard = d / "hard_src.txt"
    os.link(d / "src.txt", hard)
    (d / "soft_key.txt").symlink_to(d / "key.txt")
    return [
        (contrastive.main, ["unused.pt", "--source", "src.txt", "--reference", "ref.txt", "--contrastive", "wrong.txt",
                            "--json", str(hard)], "--source src.txt"),
        (contrastive.main, ["unused.pt", "--source", "src.txt", "--reference", "ref.txt", "--contrastive", "wrong.txt",
                            "--json", "./data/../wrong.txt"], "--contrastive wrong.txt"),
        (cxmi.main, ["unused.pt", "--data", "data", "--per-sentence", "data/test.docids"], "--data data/test.docids"),
        (cxmi.main, ["unused.pt", "--data", "data", "--json", "data/dict.en.txt"], "--data data/dict.en.txt"),
        (xsim.main, ["a.npy", "b.npy", "--json", "./b.npy"], "tgt b.npy"),
        (score.main, ["generate.out", "--context-key", "soft_key.txt", "--json", "key.txt"], "--context-key soft_key.txt"),
        (subset_bleu.main, ["generate.out", "--helpful", "helpful.ids", "--unhelpful", "unhelpful.ids", "--json",
                            "unhelpful.ids"], "--unhelpful unhelpful.ids"),
        (doc_classify.main, ["--embeddings", "data", "--langs", "xa", "--json", "data/train.labels"],
         "--embeddings data/train.labels"),
        (adversarial.main, ["data", "--path", "unused.pt", "--key", "key.txt", "--json", "soft_key.txt"], "--key key.txt"),
        (adversarial.main, ["data", "--path", "unused.pt", "--json", "data/test.en-de.en.bin"],
         "--data data/test.en-de.en.bin"),
        (attention_plot.main, ["data", "--path", "model.png", "--out", "model"], "checkpoint model.png"),
        (analyze_heads.main, ["data", "--path", "out/heads.json", "--output-dir", "out"], "checkpoint out/heads.json"),
        (embed.main, ["--path", "unused.pt", "--lang", "xa", "--input", "src.txt", "--output", str(hard)],
         "--input src.txt"),
        (plot_embeddings.main, ["--input", "A=a.npy", "--labels", "labels.txt", "--output", "labels.txt"],
         "--labels labels.txt"),
    ]


def test_every_tool_refuses_an_output_that_is_one_of_its_inputs(files, monkeypatch, capsys):
    monkeypatch.chdir(files)
    before = {p: p.read_bytes() for p in files.rglob("*") if p.is_file()}
    cases = _cases(files)
    for main, argv, named_input in cases:
        message = refused(main, argv, capsys)
        assert f"is one of the inputs: the same file as {named_input}; writing it would destroy the input" in message, (
            argv, message)
    assert {p: p.read_bytes() for p in before} == before
    assert not (files / "unused.pt").exists() and not any((files / "out").glob("*.csv"))


def test_cxmi_refuses_two_outputs_on_one_file(files, monkeypatch, capsys):
    monkeypatch.chdir(files)
    message = refused(cxmi.main, ["unused.pt", "--per-sentence", "r.tsv", "--json", "./r.tsv"], capsys)
    assert "--per-sentence r.tsv and --json ./r.tsv are the same file; give each output its own path" in message


def test_translate_doc_refuses_stdout_redirected_into_its_input(tmp_path):
    text = tmp_path / "talk.en"
    text.write_text("a sentence .\n")
    with open(text, "a") as stdout:
        result = subprocess.run([sys.executable, "-m", "fairseq_ctx.cli.translate_doc", "unused.pt", "--input", str(text)],
                                stdout=stdout, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    assert result.returncode == 2
    assert f"standard output is redirected into the input {text}" in result.stderr
    assert text.read_text() == "a sentence .\n"



@pytest.mark.parametrize("mode", ["r+", "a"])  # `< f 1<> f` and `< f >> f`
def test_translate_doc_refuses_stdin_and_stdout_on_one_file(tmp_path, mode):
    text = tmp_path / "talk.en"
    text.write_text("a sentence .\n")
    with open(text, "r") as stdin, open(text, mode) as stdout:
        result = subprocess.run([sys.executable, "-m", "fairseq_ctx.cli.translate_doc", "unused.pt"], stdin=stdin,
                                stdout=stdout, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    assert result.returncode == 2
    assert "standard output is redirected into the file standard input reads" in result.stderr
    assert text.read_text() == "a sentence .\n"


GENERATORS = [
    (make_corpus.main, ["--train-docs", "2", "--valid-docs", "1", "--test-docs", "1"], "train.en"),
    (make_multilingual_corpus.main, ["--train-docs", "2", "--valid-docs", "1", "--test-docs", "1"], "train.pa"),
    (make_multimodal_corpus.main, ["--train", "4", "--valid", "2", "--test", "2", "--regions", "2", "--feature-dim", "4"],
     "train.img.npy"),
    (make_contrastive.main, ["--docs", "2"], "contrastive.src.en"),
]


@pytest.mark.parametrize("main,sizes,written", GENERATORS, ids=[m.__module__.rsplit(".", 1)[1] for m, _, _ in GENERATORS])
def test_generators_refuse_a_non_empty_directory_unless_overwrite(tmp_path, capsys, main, sizes, written):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    message = refused(main, [str(out), *sizes], capsys)
    assert f"output directory {out} is not empty (it holds notes.txt)" in message and "--overwrite" in message
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    main([str(out), *sizes, "--overwrite"])
    assert (out / written).exists() and (out / "notes.txt").read_text() == "mine\n"
    main([str(tmp_path / "new"), *sizes])  # a new directory needs no --overwrite
    assert (tmp_path / "new" / written).exists()


def test_output_dir_check_accepts_empty_and_refuses_a_file(tmp_path):
    check_output_dir(str(tmp_path), overwrite=False)
    (tmp_path / "f").write_text("x")
    with pytest.raises(OutputPathError, match=r"exists and is not a directory"):
        check_output_dir(str(tmp_path / "f"), overwrite=True)
