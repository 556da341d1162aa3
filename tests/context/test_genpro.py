"""fairseq-ctx-generative --format genpro (Post & Junczys-Dowmunt, 2023): docmt23's GenPro TSV and
a ContraPro-layout set are read, each sentence is translated with its preceding sentences as the
document translator translates it, and a translation counts when the reference's pronoun is a token
of its Moses tokenisation, lowercased -- docmt23's ``evaluate_tsv.py`` definition, including its
blind spots (a pronoun inside a hyphenated French word is not a token)."""
import json

import pytest

from tests.context.test_contrastive_formats import write_contrapro
from tests.helpers import run_tool
from fairseq_ctx.context import hub
from fairseq_ctx.context.contrastive.contrapro import read_contrapro
from fairseq_ctx.context.contrastive.example import ContrastiveInputError
from fairseq_ctx.context.generative.genpro import (GenproExample, from_contrapro, read_genpro_tsv, score_genpro,
                                                   within_distances)

pytest.importorskip("sacremoses")


def example(pronoun: str, distance: str = "1") -> GenproExample:
    return GenproExample("it came .", ["the cat sat ."], pronoun, distance, "set.tsv:1")


@pytest.mark.parametrize("translation, pronoun, found", [
    ("Elle est venue.", "elle", True),            # case-insensitive
    ("Je crois qu'il est venu.", "il", True),      # Moses splits the elision: qu&apos; il
    ("Peuvent-elles venir ?", "elles", False),     # ... but not the hyphenated inversion
    ("Ils sont venus.", "il", False),              # whole tokens only
    ("Il est venu, elle aussi.", "elle", True),    # punctuation split off
])
def test_a_translation_counts_when_the_pronoun_is_one_of_its_moses_tokens(translation, pronoun, found):
    result = score_genpro([example(pronoun)], [translation], "fr")
    assert (result["correct"], result["total"]) == (int(found), 1)


def test_scores_by_pronoun_and_antecedent_distance():
    examples = [example("il", "0"), example("elle", "1"), example("elle", "1"), example("ils", "3")]
    result = score_genpro(examples, ["Il vient.", "Elle vient.", "Il vient.", "Elles viennent."], "fr")
    assert (result["correct"], result["total"]) == (2, 4)
    assert {p: (s["correct"], s["total"]) for p, s in result["pronouns"].items()} == \
        {"elle": (1, 2), "il": (1, 1), "ils": (0, 1)}
    assert list(result["ante_distance"]) == ["0", "1", "3"]
    assert result["ante_distance"]["1"]["accuracy"] == 0.5
    assert [e.distance for e in within_distances(examples, (1, 10))] == ["1", "1", "3"]
    with pytest.raises(ContrastiveInputError, match="no example has its antecedent distance in 5..9"):
        within_distances(examples, (5, 9))


def write_tsv(path, rows):
    path.write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def test_the_tsv_layout_keeps_the_correct_lines_and_finds_the_sentence_by_its_index(tmp_path):
    source = "the cat sat . <eos> it slept . <eos> then it woke ."
    path = write_tsv(tmp_path / "set.tsv", [
        ["2", "2", "correct", "il", source, "le chat . <eos> il dort . <eos> puis il se reveille ."],
        ["2", "2", "contrastive", "elle", source, "..."],
        ["1", "1", "correct", "il", source, "..."],
    ])
    first, second = read_genpro_tsv(path)
    assert (first.sentence, first.preceding, first.pronoun, first.distance) == \
        ("then it woke .", ["the cat sat .", "it slept ."], "il", "2")
    assert (second.sentence, second.preceding, second.origin) == ("it slept .", ["the cat sat ."], f"{path}:3")
    old = read_genpro_tsv(write_tsv(tmp_path / "old.tsv", [["2", "correct", "il", source, "..."]]))  # 5 fields
    assert (old[0].sentence, old[0].preceding) == ("then it woke .", ["the cat sat .", "it slept ."])


@pytest.mark.parametrize("row, message", [
    (["1", "correct", "il", "a <eos> b"], "2: 4 tab-separated fields, where a GenPro line has 6"),
    (["0", "1", "right", "il", "a <eos> b", "x"], "2: the third field is 'right', not correct or contrastive"),
    (["5", "1", "correct", "il", "a <eos> b", "x"], "2: the sentence index '5' is not one of the 2 sentences"),
])
def test_a_line_that_is_not_genpro_is_named(row, message, tmp_path):
    path = write_tsv(tmp_path / "set.tsv", [["1", "1", "correct", "il", "a <eos> b", "x"], row])
    with pytest.raises(ContrastiveInputError, match=f"{path}:" + message.replace("(", r"\(")):
        read_genpro_tsv(path)


def test_a_contrapro_layout_set_gives_each_entry_with_its_reference_pronoun(tmp_path):
    examples = from_contrapro(read_contrapro(write_contrapro(tmp_path)))
    assert [(e.sentence, e.preceding, e.pronoun, e.distance) for e in examples] == [
        ("it is quiet .", ["the cat sleeps ."], "sie", "1"),
        (examples[1].sentence, examples[1].preceding, "sie", "3")]
    assert len(examples[1].preceding) == 2  # json2text_and_context.pl --context 2, oldest first


DOCUMENTS = [["the old cat sleeps .", "it is quiet ."], ["the dog waits here .", "then we sang .", "it moves again ."]]


def test_the_tool_translates_each_sentence_in_its_document_and_scores_it(trained_baselines, tmp_path):
    model = hub.load(str(trained_baselines["dat"][0] / "checkpoint_last.pt"), beam=2)
    translations = [model.translate_document(document)[-1] for document in DOCUMENTS]
    found = translations[0].split()[0]  # a token the model writes, and one it does not
    rows = [[str(len(d) - 1), str(len(d) - 1), "correct", pronoun, " <eos> ".join(d), "x"]
            for d, pronoun in zip(DOCUMENTS, [found, "nichtda"])]
    path = write_tsv(tmp_path / "set.tsv", rows)
    out, scores = tmp_path / "hyp.de", tmp_path / "scores.json"
    run_tool(["fairseq-ctx-generative", str(trained_baselines["dat"][0]), "--checkpoint-file", "checkpoint_last.pt",
              "--format", "genpro", "--input", path, "--lang", "de", "--beam", "2", "--cpu", "--output", str(out),
              "--json", str(scores)])
    assert out.read_text(encoding="utf-8").splitlines() == translations
    result = json.loads(scores.read_text(encoding="utf-8"))
    assert [e["correct"] for e in result["examples"]] == [True, False]
    assert result["ante_distance"] == {"1": {"correct": 1, "total": 1, "accuracy": 1.0},
                                       "2": {"correct": 0, "total": 1, "accuracy": 0.0}}
    refused = run_tool(["fairseq-ctx-generative", str(tmp_path / "missing.pt"), "--format", "genpro", "--input", path,
                        "--lang", "de", "--distance", "5", "9"], check=False)
    assert refused.returncode == 1 and "no example has its antecedent distance in 5..9" in refused.stderr
