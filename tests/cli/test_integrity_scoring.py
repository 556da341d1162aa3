"""Every scorer checks that its input is complete and well-formed before computing a number:
a cut-off fairseq-generate output, empty references, empty sources or candidates of contrastive
sets, typed JSON fields given as booleans, overlapping or repeated subset ids and feature files
without features are refused with the file, the count and the fix (or, for a cut-off output
under --allow-partial, scored with a warning giving the counts)."""
import json
import re
import shutil

import numpy as np
import pytest

from tests.helpers import build_multimodal
from fairseq_ctx.cli import contrastive as contrastive_cli
from fairseq_ctx.cli import score as score_cli
from fairseq_ctx.context.contrastive.example import ContrastiveInputError
from fairseq_ctx.context.contrastive.formats import read_set
from fairseq_ctx.context.subset_bleu import subset_bleu
from fairseq_ctx.multisource.data.feature_file import FeatureInputError

WORDS = ["cat", "dog", "house", "tree", "car", "bird", "sun", "river"]


def sentence(i: int) -> str:
    return " ".join(WORDS[(i + k) % len(WORDS)] for k in range(3 + i % 5))


def generate_lines(ids) -> list:
    """fairseq-generate's lines for sentences ``ids`` (hypothesis = reference but for sentence 3)."""
    lines = []
    for i in ids:
        hypothesis = sentence(i) if i != 3 else "nothing like it"
        lines += [f"S-{i}\t{sentence(i)}", f"T-{i}\t{sentence(i)}", f"H-{i}\t-0.3\t{hypothesis}",
                  f"D-{i}\t-0.3\t{hypothesis}", f"P-{i}\t-0.1 -0.2"]
    return lines


def write(path, lines) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


@pytest.fixture
def outputs(tmp_path):
    """A whole output of 51 sentences in fairseq-generate's length order with its last line, and
    the same cut after 20 sentences (an interrupted run, or ``head``)."""
    order = sorted(range(51), key=lambda i: (len(sentence(i).split()), i))
    whole = generate_lines(order) + [
        "2024-05-01 10:00:00 | INFO | fairseq_cli.generate | Translated 51 sentences (1,234 tokens) in 1.0s"]
    return write(tmp_path / "whole.out", whole), write(tmp_path / "cut.out", generate_lines(order[:20]))


def test_a_cut_off_generate_output_is_refused_with_the_counts(outputs, capsys, tmp_path):
    whole, cut = outputs
    score_cli.main([whole, "--no-comet"])
    assert "BLEU" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:
        score_cli.main([cut, "--no-comet"])
    message = str(stop.value.code)
    assert message.startswith(f"fairseq-ctx-score: {cut} has hypotheses for 20 of the ")
    assert re.search(r"of the (\d+) sentences of its split \((\d+) missing, first: sentence \d+\): the output is cut "
                     r"off .*pass --allow-partial to score the 20 sentences present", message), message
    expected, missing = map(int, re.search(r"of the (\d+) sentences of its split \((\d+) missing", message).groups())
    assert expected - missing == 20 and expected > 40
    capsys.readouterr()
    score_cli.main([cut, "--no-comet", "--allow-partial", "--json", str(tmp_path / "partial.json")])
    captured = capsys.readouterr()
    assert captured.err.startswith(f"fairseq-ctx-score: warning: {cut} has hypotheses for 20 of the {expected} ")
    assert "scoring the 20 sentences present (--allow-partial)" in captured.err and "BLEU" in captured.out
    result = json.loads((tmp_path / "partial.json").read_text())
    assert result["sentences"] == 20 and "20 of the" in result["partial"]


def test_generate_output_with_fewer_hypotheses_than_it_translated_is_refused(tmp_path):
    """Ids 0..19 with no gap, but its last line says 51 were translated."""
    lines = generate_lines(range(20)) + ["Translated 51 sentences (1,234 tokens) in 1.0s"]
    with pytest.raises(SystemExit, match=r"has hypotheses for 20 of the 51 sentences of its split \(31 missing, "
                                         r"first: sentence 20\)"):
        score_cli.main([write(tmp_path / "short.out", lines), "--no-comet"])


def test_empty_references_are_refused(tmp_path):
    lines = generate_lines(range(4))
    lines[lines.index(f"T-2\t{sentence(2)}")] = "T-2\t"
    with pytest.raises(SystemExit, match=re.escape(
            "empty.out: 1 of its 4 references are empty (first: sentence 2); an empty reference cannot be matched by "
            "any translation")):
        score_cli.main([write(tmp_path / "empty.out", lines), "--no-comet"])
    # plain files: blank in the reference only is an error; blank in both is a document boundary
    with pytest.raises(SystemExit, match=r"--ref .*refs: line 2 is blank but line 2 of --hyp .*hyps is not \(1 such "
                                         r"lines\); a document boundary is a line blank in both files"):
        score_cli.main(["--hyp", write(tmp_path / "hyps", ["a b", "c d", "e f"]),
                        "--ref", write(tmp_path / "refs", ["a b", "", "e f"]), "--no-comet"])


def test_document_files_are_scored_on_their_sentences_with_document_bleu(tmp_path, capsys):
    """fairseq-ctx-translate-doc's output and its reference: a blank line between documents on both
    sides. The sentence scores are those of the sentences alone; d-BLEU is BLEU over the documents
    joined into one segment each, as sacreBLEU gives it, with the signature."""
    import sacrebleu

    hyps = ["the cat sat on the mat", "it was red", "", "a dog ran far away", "", "birds fly south now", "x"]
    refs = ["the cat sat on the mat", "it was blue", "", "a dog ran very far", "", "birds fly south in winter", "y z"]
    score_cli.main(["--hyp", write(tmp_path / "doc.hyp", hyps), "--ref", write(tmp_path / "doc.ref", refs),
                    "--no-comet", "--json", str(tmp_path / "scores.json")])
    out = capsys.readouterr().out
    sentences = [(h, r) for h, r in zip(hyps, refs) if r]
    expected = sacrebleu.corpus_bleu([h for h, _ in sentences], [[r for _, r in sentences]])
    documents = [(" ".join(h), " ".join(r)) for h, r in (((hyps[0], hyps[1]), (refs[0], refs[1])),
                                                          ((hyps[3],), (refs[3],)), ((hyps[5], hyps[6]), (refs[5], refs[6])))]
    d_bleu = sacrebleu.corpus_bleu([h for h, _ in documents], [[r for _, r in documents]])
    result = json.loads((tmp_path / "scores.json").read_text())
    assert result["sentences"] == 5 and result["bleu"] == pytest.approx(expected.score)
    assert result["documents"] == 3 and result["d_bleu"] == pytest.approx(d_bleu.score)
    assert "d-BLEU (3 documents, each one segment): BLEU|nrefs:1|" in out and result["d_bleu_signature"] in out


def test_subset_bleu_refuses_overlapping_and_repeated_ids(tmp_path):
    output = write(tmp_path / "gen.out", generate_lines(range(6)))
    helpful = write(tmp_path / "helpful", ["0", "1", "2"])
    with pytest.raises(ValueError, match=re.escape(
            f"2 sentence ids are in both --helpful {helpful} and --unhelpful {tmp_path / 'overlap'} (first: 1); the "
            f"context of a sentence either helps or does not: give disjoint sets")):
        subset_bleu(output, helpful, write(tmp_path / "overlap", ["1", "2", "5"]))
    with pytest.raises(ValueError, match=re.escape(
            f"{tmp_path / 'repeated'}:3: sentence id 4 is listed again (first at line 1)")):
        subset_bleu(output, helpful, write(tmp_path / "repeated", ["4", "5", "4"]))
    result = subset_bleu(output, helpful, write(tmp_path / "rest", ["3", "4", "5"]))
    assert result["helpful_sentences"] == result["unhelpful_sentences"] == 3


def plain_set(directory, source, reference, contrastive):
    files = {"src": source, "ref": reference, "con": contrastive}
    paths = {name: write(directory / name, lines) for name, lines in files.items()}
    return dict(source=paths["src"], reference=paths["ref"], contrastive=[paths["con"]])


def test_contrastive_sets_with_empty_sentences_are_refused_in_every_format(tmp_path):
    """An empty correct candidate scores the log-probability of </s> alone and can win: one of
    them moved an accuracy from 0.500 to 0.625. The message names the file the empty line is in."""
    files = plain_set(tmp_path, ["a b", "c d", "e f"], ["x y", "", "z w"], ["y x", "w w", "w z"])
    with pytest.raises(ContrastiveInputError, match=re.escape(
            f"{files['reference']}:2: the correct translation is empty; 1 of the 3 examples have an empty source or "
            f"candidate. Every example needs a non-empty source sentence and non-empty candidate translations: fix or "
            f"remove those entries")):
        read_set("plain", **files)
    with pytest.raises(SystemExit, match=r"fairseq-ctx-contrastive: .*ref:2: the correct translation is empty"):
        contrastive_cli.main([str(tmp_path / "no-checkpoint.pt"), "--source", files["source"], "--reference",
                              files["reference"], "--contrastive", *files["contrastive"]])
    blocks = {"1": {"src": ["the dog sleeps .", ""], "trg": [
        {"correct": ["der hund schlaeft .", "er wartet ."], "incorrect": ["der hund schlaeft .", "sie wartet ."],
         "type": "m.sg"}]}}
    anaphora = tmp_path / "anaphora.json"
    anaphora.write_text(json.dumps(blocks), encoding="utf-8")
    with pytest.raises(ContrastiveInputError, match=re.escape(
            f"{anaphora}: block 1, trg 1: the source sentence is empty; 1 of the 1 examples")):
        read_set("discevalmt", [str(anaphora)])
    prefix = tmp_path / "highlighted.test"
    for suffix, line in {"en": "it sleeps .", "fr": "", "context.en": "the cat", "context.fr": "le chat"}.items():
        write(tmp_path / f"highlighted.test.{suffix}", ["it waits .", line])
    (tmp_path / "highlighted.test.fr").write_text("<p>il</p> attend .\n\n", encoding="utf-8")
    examples, skipped = read_set("scat", [str(prefix)])
    assert len(examples) == 1 and skipped == [f"{prefix}.fr:2"]  # no marked pronoun: skipped and reported
    write(tmp_path / "highlighted.test.en", ["it waits .", ""])
    (tmp_path / "highlighted.test.fr").write_text("<p>il</p> attend .\n<p>elle</p> dort .\n", encoding="utf-8")
    with pytest.raises(ContrastiveInputError, match=re.escape(f"{prefix}.en:2: the source sentence is empty")):
        read_set("scat", [str(prefix)])


def test_typed_json_fields_refuse_booleans(tmp_path):
    """JSON ``true`` is a Python int (1): Voita's true_ind and ContraPro's ante distance must be integers."""
    voita = tmp_path / "deixis_test.json"
    voita.write_text(json.dumps([{"src": "a _eos b", "dst": ["x _eos y", "x _eos z"], "true_ind": True}]))
    with pytest.raises(ContrastiveInputError, match=re.escape(
            f"{voita}: group 1: 'true_ind' must index one of its 2 candidates, got True")):
        read_set("voita", [str(voita)])
    contrapro = tmp_path / "contrapro.json"
    contrapro.write_text(json.dumps([{"src pronoun": "it", "ref pronoun": "er", "ante distance": False,
                                      "errors": [{"contrastive": "sie"}]}]))
    with pytest.raises(ContrastiveInputError, match=re.escape(
            f"{contrapro}: entry 1: 'ante distance' must be an integer, got False")):
        read_set("contrapro", [str(contrapro)])


@pytest.mark.parametrize("shape, what", [((240, 0, 8), "regions"), ((240, 3, 0), "feature dimension"),
                                         ((240, 0), "feature dimension")])
def test_feature_files_without_features_are_refused(multimodal_data, tmp_path, shape, what):
    data = tmp_path / "data"
    shutil.copytree(multimodal_data, data)
    np.save(data / "train.img.npy", np.zeros(shape, dtype=np.float32))
    with pytest.raises(FeatureInputError, match=re.escape(
            f"feature file {data / 'train.img.npy'} has shape {shape}: its rows have 0 {what}, so they hold no "
            f"features; extract the features again")):
        build_multimodal(data)


def test_context_accuracy_needs_the_whole_split_and_a_key_line_per_sentence(outputs, tmp_path):
    """The --context-key scorer (and fairseq-ctx-adversarial, through the same reader) refuses a
    cut-off output, and an answer key whose lines are not the split's sentences."""
    whole, cut = outputs
    key = write(tmp_path / "key", [""] * 51)
    with pytest.raises(SystemExit, match=re.escape(f"fairseq-ctx-score: {cut} has hypotheses for 20 of the ")):
        score_cli.main([cut, "--context-key", key])
    short = write(tmp_path / "short.key", [""] * 50)
    with pytest.raises(SystemExit, match=re.escape(
            f"fairseq-ctx-score: {whole} has 51 hypotheses but {short} has 50 lines; the answer key needs one line per "
            f"sentence of the split (empty for a sentence that does not depend on context)")):
        score_cli.main([whole, "--context-key", short])
    score_cli.main([whole, "--context-key", key])


def test_sentence_ids_score_only_the_sentences_of_a_one_line_context_split(tmp_path, capsys):
    """prepare-docs --src-context puts each sentence after its context line and writes the 0-based
    line of each sentence to PREFIX.sentence_ids; fairseq-generate translates every line. Scored
    with --sentence-ids, only the sentences count, and the count is stated."""
    import sacrebleu

    lines = generate_lines(range(6))
    ids = write(tmp_path / "test.sentence_ids", ["1", "3", "5"])
    score_cli.main([write(tmp_path / "gen.out", lines), "--sentence-ids", ids, "--no-comet",
                    "--json", str(tmp_path / "scores.json")])
    assert "scoring 3 of the 6 translated sentences (--sentence-ids" in capsys.readouterr().out
    hyps = {int(l.split("\t")[0][2:]): l.split("\t")[2] for l in lines if l.startswith("D-")}
    refs = {int(l.split("\t")[0][2:]): l.split("\t")[1] for l in lines if l.startswith("T-")}
    expected = sacrebleu.corpus_bleu([hyps[i] for i in (1, 3, 5)], [[refs[i] for i in (1, 3, 5)]])
    result = json.loads((tmp_path / "scores.json").read_text())
    assert result["sentences"] == 3 and result["bleu"] == pytest.approx(expected.score)
    for bad, message in ((["1", "6"], r"line 2: '6' is not a sentence id of the 6 translated sentences \(0-based"),
                         (["2", "2"], "names a sentence twice")):
        with pytest.raises(SystemExit, match=message):
            score_cli.main([write(tmp_path / "gen.out", lines), "--sentence-ids", write(tmp_path / "bad", bad),
                            "--no-comet"])
