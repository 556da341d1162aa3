"""Tools on tiny inputs with hand-checkable answers: contrastive scoring, CXMI, subset BLEU,
document translation (API and console script), and the generated contrastive set."""
import pytest

from tests.helpers import run_tool

from fairseq_ctx.context import hub
from fairseq_ctx.context.contrastive.evaluation import evaluate
from fairseq_ctx.context.contrastive.example import ContrastiveInputError
from fairseq_ctx.context.contrastive.plain import read_contrastive_set
from fairseq_ctx.context.cxmi import cxmi
from fairseq_ctx.context.demo.contrastive_set import contrastive_examples
from fairseq_ctx.context.subset_bleu import subset_bleu

DOCS = [["the old cat sleeps .", "it is quiet .", "then we sang ."], ["the dog waits here .", "it moves again ."]]


@pytest.fixture(scope="module")
def dat(trained_baselines):
    return hub.load(str(trained_baselines["dat"][0] / "checkpoint_last.pt"), beam=1, max_len_a=0, max_len_b=20)


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


def test_contrastive_accuracy_is_100_when_the_correct_target_is_the_greedy_output(dat, tmp_path):
    sentences = [s for doc in DOCS for s in doc]
    context = [""] + sentences[:-1]
    context1 = ["", ""] + sentences[:-2]  # the model has --context-size 2: the same context as in decoding
    greedy = dat.translate_document(sentences)
    # the argument below needs outputs that ended with </s> before the length limit (20)
    keep = [i for i, g in enumerate(greedy) if 0 < len(g.split()) < 19]
    assert len(keep) >= 2, greedy
    sentences, context, context1, greedy = ([column[i] for i in keep] for column in (sentences, context, context1, greedy))
    # appending a word before </s> can only lower the score: greedy chose </s> as the argmax there
    variants = [[f"{g} {w}" for g in greedy] for w in ("der", "und")]
    categories = ["a" if i % 2 == 0 else "b" for i in range(len(keep))]
    files = dict(source=write(tmp_path / "src", sentences), reference=write(tmp_path / "ref", greedy),
                 contrastive=[write(tmp_path / f"c{i}", v) for i, v in enumerate(variants)],
                 context=[write(tmp_path / "ctx0", context), write(tmp_path / "ctx1", context1)],
                 categories=write(tmp_path / "cat", categories))
    result = evaluate(dat, read_contrastive_set(**files))
    assert result["accuracy"] == 1.0 and result["total"] == len(keep)
    assert {name: value["accuracy"] for name, value in result["breakdowns"]["category"].items()} == {"a": 1.0, "b": 1.0}
    swapped = evaluate(dat, read_contrastive_set(**{**files, "reference": files["contrastive"][0],
                                                  "contrastive": [files["reference"]]}))
    assert swapped["accuracy"] == 0.0


def test_contrastive_scoring_logs_the_context_it_read_and_warns_of_unknown_text(dat, caplog):
    """The line says what context the candidates are scored with, so 0.5 on a set whose context the
    tool never passed cannot pass for a context-blind model; text mostly out of the dictionary is named."""
    import logging

    from fairseq_ctx.context.contrastive.example import Candidate, ContrastiveExample

    def example(source: str, context, correct: str) -> ContrastiveExample:
        return ContrastiveExample(source, context, Candidate(correct), [Candidate(correct + " x")])

    logger = "fairseq_ctx.context.contrastive.evaluation"
    with caplog.at_level(logging.INFO):
        evaluate(dat, [example("it is quiet .", ["the old cat sleeps ."], "es ist still ."),
                       example("the dog waits here .", [], "der hund wartet .")])
    lines = [r for r in caplog.records if r.name == logger]
    assert [r.getMessage() for r in lines] == [
        "fairseq-ctx-contrastive: source context 2 previous sentences, target context 0; 2 examples, 1 with "
        "previous source sentences, 0 with previous target sentences"]
    caplog.clear()
    with caplog.at_level(logging.INFO):
        evaluate(dat, [example("zzq qqz .", [], "yyq qqy ."), example("qqx xxq .", [], "xxy yyx .")])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert ("fairseq-ctx-contrastive: the model reads 2 previous source sentence(s) but no example of the set gives "
            "any, so it is scored as a context-blind model would be; give the set's context (--context files of "
            "--format plain)") in warnings
    assert any(w.startswith("the contrastive set's source sentences: 66.7% of its first 6 tokens are <unk>")
               for w in warnings), warnings
    assert any(w.startswith("the contrastive set's candidates: ") for w in warnings), warnings


def test_contrastive_files_of_unequal_length_are_a_clear_error(tmp_path):
    src = write(tmp_path / "src.en", ["a", "b", "c"])
    ref = write(tmp_path / "ref.de", ["A", "B", "C"])
    bad = write(tmp_path / "wrong.de", ["X", "Y"])
    with pytest.raises(ContrastiveInputError, match=r"wrong\.de: 2 lines") as err:
        read_contrastive_set(src, ref, [bad])
    assert "src.en: 3 lines" in str(err.value)
    result = run_tool(["fairseq-ctx-contrastive", "unused.pt", "--source", src, "--reference", ref,
                       "--contrastive", bad], check=False)
    assert result.returncode != 0 and "wrong.de: 2 lines" in result.stderr


def test_cxmi_is_exactly_zero_without_context_and_nonzero_with_it(trained_baselines, dat):
    sentence_level = hub.load(str(trained_baselines["transformer"][0] / "checkpoint_last.pt"))
    zero = cxmi(sentence_level, "test")
    assert zero["cxmi"] == 0.0 and all(row[1] == 0.0 for row in zero["per_sentence"])
    with_context = cxmi(dat, "test")
    assert with_context["sentences"] == zero["sentences"] > 30
    assert with_context["cxmi"] != 0.0
    first = [row for row in with_context["per_sentence"] if row[0] == 0][0]
    assert first[1] == pytest.approx(0.0, abs=1e-4), "a document-initial sentence has no context to mask"


def test_subset_bleu_and_gap(tmp_path):
    output = tmp_path / "gen.out"
    pairs = {0: ("a b c d", "a b c d"), 1: ("a b c d", "w x y z"), 2: ("e f g h", "e f g h")}
    output.write_text("".join(f"T-{i}\t{r}\nH-{i}\t-0.1\t{h}\n" for i, (r, h) in pairs.items()))
    result = subset_bleu(str(output), write(tmp_path / "help", ["0", "2"]), write(tmp_path / "unhelp", ["1"]))
    assert result["bleu_helpful"] == pytest.approx(100.0) and result["bleu_unhelpful"] == pytest.approx(0.0)
    assert result["gap"] == pytest.approx(-100.0)
    with pytest.raises(ValueError, match=r"unhelp2:1: '7'"):
        subset_bleu(str(output), str(tmp_path / "help"), write(tmp_path / "unhelp2", ["7"]))


def test_translate_stream_keeps_boundaries_batches_across_documents_and_streams(dat):
    lines = ["", *DOCS[0], "", "", "", *DOCS[1], ""]  # leading, empty and trailing documents
    per_document = [dat.translate_document(doc) for doc in DOCS]
    consumed = []

    def reader():
        for line in lines:
            consumed.append(line)
            yield line

    stream = dat.translate_stream(reader(), batch_size=2)
    first = [next(stream), next(stream)]
    assert len(consumed) < len(lines), "output must start before the whole input is read"
    output = first + list(stream)
    assert output == ["", *per_document[0], "", "", "", *per_document[1], ""]
    assert list(dat.translate_stream(iter(["", "  ", ""]))) == ["", "", ""]
    assert dat.translate_document([]) == []
    with pytest.raises(ValueError, match="sentence 1 of the document is empty"):
        dat.translate_document(["the cat sleeps .", " "])


def test_translate_doc_console_script(trained_baselines, dat, tmp_path):
    text = "\n".join(DOCS[0]) + "\n\n\n" + "\n".join(DOCS[1]) + "\n"
    (tmp_path / "in.txt").write_text(text)
    result = run_tool(["fairseq-ctx-translate-doc", str(trained_baselines["dat"][0]), "--checkpoint-file",
                       "checkpoint_last.pt", "--input", str(tmp_path / "in.txt"), "--beam", "1",
                       "--max-len-a", "0", "--max-len-b", "20", "--batch-size", "3", "--cpu"])
    expected = [*dat.translate_document(DOCS[0]), "", "", *dat.translate_document(DOCS[1])]
    assert result.stdout.splitlines() == expected


def test_translate_doc_reads_prepare_docs_output_through_its_docids(trained_baselines, dat, tmp_path):
    """The way back from fairseq-ctx-prepare-docs: its sentence-per-line source with PREFIX.docids
    translates as the blank-line documents, one output line per input line (aligned with PREFIX.de)."""
    (tmp_path / "docs.en").write_text("\n\n".join("\n".join(doc) for doc in DOCS) + "\n")
    (tmp_path / "docs.de").write_text("\n\n".join("\n".join(doc) for doc in DOCS) + "\n")
    run_tool(["fairseq-ctx-prepare-docs", "--src-docs", str(tmp_path / "docs.en"), "--tgt-docs",
              str(tmp_path / "docs.de"), "--src-lang", "en", "--tgt-lang", "de", "--out-prefix", str(tmp_path / "test")])
    common = ["fairseq-ctx-translate-doc", str(trained_baselines["dat"][0]), "--checkpoint-file", "checkpoint_last.pt",
              "--beam", "1", "--max-len-a", "0", "--max-len-b", "20", "--batch-size", "2", "--cpu"]
    result = run_tool([*common, "--input", str(tmp_path / "test.en"), "--docids", str(tmp_path / "test.docids")])
    assert result.stdout.splitlines() == [*dat.translate_document(DOCS[0]), *dat.translate_document(DOCS[1])]
    (tmp_path / "short.docids").write_text("doc0\n")
    refused = run_tool([*common, "--input", str(tmp_path / "test.en"), "--docids", str(tmp_path / "short.docids")],
                       check=False)
    assert refused.returncode == 2
    assert f"{tmp_path / 'test.en'} has more lines than {tmp_path / 'short.docids'} (1)" in refused.stderr


def test_generated_contrastive_set_swaps_only_the_pronoun():
    examples = contrastive_examples(num_docs=20, seed=1, context_size=2)
    assert len(examples) > 20
    for example in examples:
        words = example["reference"].split()
        pronouns = {words[0], *(v.split()[0] for v in example["contrastive"])}
        assert pronouns == {"er", "sie", "es"}
        assert all(v.split()[1:] == words[1:] for v in example["contrastive"])
        assert example["source"].startswith("it ") and 1 <= len(example["context"]) <= 2
        near = example["category"] == "distance-1"
        assert example["context"][0].startswith("the ") == near
    assert {e["category"] for e in examples} == {"distance-1", "distance-2"}
