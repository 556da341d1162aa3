"""The generated context corpus: in every setting a pronoun agrees with the most recent subject
noun; the hard setting puts it 3-4 sentences back behind object nouns of other genders; the
target setting makes it agree with the synonym the previous translation picked at random, and
its DiscEvalMT-layout set pairs the two previous translations of one source."""
from collections import Counter

import pytest

from fairseq_ctx.context.contrastive.discevalmt import read_discevalmt
from fairseq_ctx.context.demo.synthetic_corpus import PRONOUN, SYNONYMS, CorpusSizes, DocumentGenerator, write_corpus
from fairseq_ctx.context.demo.target_contrastive_set import write_target_anaphora
from fairseq_ctx.core.demo_vocabulary import NOUNS

TARGET_GENDER = {tgt: gender for gender, pairs in NOUNS.items() for _, tgt in pairs}
SUBJECT_ARTICLES = {"der", "die", "das"}


def antecedent_distances(setting: str, documents: int = 300):
    generator = DocumentGenerator(11, setting=setting)
    distances, distractors_of_other_gender = Counter(), 0
    for _ in range(documents):
        last_subject, since, objects = None, 0, []
        for source, target, key in generator.document():
            words = target.split()
            since += 1
            if key:
                expected = key.split("|")[0]
                assert source.startswith("it ") and words[0] == expected
                assert PRONOUN[last_subject] == expected
                distances[since] += 1
                distractors_of_other_gender += all(TARGET_GENDER[o] != last_subject for o in objects) and bool(objects)
            elif words[0] in SUBJECT_ARTICLES:
                last_subject = TARGET_GENDER[next(w for w in words[1:] if w in TARGET_GENDER)]
                since, objects = 0, []
            elif " saw the " in source:
                objects.append(words[-2])
    return distances, distractors_of_other_gender


def test_standard_setting_has_antecedents_one_or_two_back():
    distances, _ = antecedent_distances("standard")
    assert set(distances) == {1, 2}


def test_hard_setting_adds_distant_antecedents_behind_distractors():
    distances, distracted = antecedent_distances("hard")
    assert set(distances) == {1, 2, 3, 4}
    distant = distances[3] + distances[4]
    assert distant > 0.5 * sum(distances.values())
    assert distracted == distant


def test_unknown_setting_is_refused():
    with pytest.raises(ValueError, match="unknown corpus setting 'harder'; choose one of standard, hard, target"):
        DocumentGenerator(1, setting="harder")


SYNONYM_GENDER = {word: gender for _, m, f in SYNONYMS for word, gender in ((m, "m"), (f, "f"))}


def test_target_setting_pronoun_agrees_with_the_synonym_the_previous_translation_picked():
    generator = DocumentGenerator(5, setting="target")
    picked, by_source = Counter(), {}
    for _ in range(600):
        document = generator.document()
        for (prev_src, prev_tgt, _), (source, target, key) in zip(document, document[1:]):
            if not key:
                continue
            gender = next(SYNONYM_GENDER[w] for w in prev_tgt.split() if w in SYNONYM_GENDER)
            assert source.startswith("it ") and key.split("|")[0] == target.split()[0] == PRONOUN[gender]
            picked[gender] += 1
            by_source.setdefault(prev_src, set()).add(gender)
    assert sum(picked.values()) > 1500
    assert abs(picked["m"] / sum(picked.values()) - 0.5) < 0.05  # the source cannot tell: chance is 1/2
    assert sum(len(g) == 2 for g in by_source.values()) > 0.3 * len(by_source)  # one source, both genders


def test_target_setting_is_deterministic_with_a_seed(tmp_path):
    for run in ("a", "b"):
        write_corpus(str(tmp_path / run), CorpusSizes(5, 1, 1), seed=4, setting="target")
        write_target_anaphora(str(tmp_path / run / "anaphora.json"), 10, seed=4)
    for name in ("train.en", "train.de", "test.ctxkey", "anaphora.json"):
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()


def test_target_anaphora_set_blocks_differ_only_in_the_previous_translation(tmp_path):
    path = tmp_path / "anaphora.json"
    assert write_target_anaphora(str(path), 50, seed=2) == 100
    examples = read_discevalmt(str(path))
    assert len(examples) == 100
    for first, second in zip(examples[::2], examples[1::2]):
        assert first.group == second.group and first.source == second.source
        assert first.source_context == second.source_context and len(first.source_context) == 1
        assert {first.labels["type"], second.labels["type"]} == {"m.sg", "f.sg"}
        # the same two current sentences, the roles swapped by the previous translation
        assert first.correct.target == second.contrastive[0].target
        assert second.correct.target == first.contrastive[0].target
        for example in (first, second):
            previous = example.correct.target_context
            assert previous == example.contrastive[0].target_context and len(previous) == 1
            gender = next(SYNONYM_GENDER[w] for w in previous[0].split() if w in SYNONYM_GENDER)
            assert example.correct.target.split()[0] == PRONOUN[gender]
        assert first.correct.target_context != second.correct.target_context


def test_make_corpus_target_setting_writes_the_anaphora_set(tmp_path, capsys):
    from fairseq_ctx.cli import make_corpus

    make_corpus.main([str(tmp_path / "raw"), "--setting", "target", "--train-docs", "3", "--valid-docs", "1",
                      "--test-docs", "1", "--contrastive-blocks", "7", "--seed", "2"])
    assert "14 contrastive pairs written to" in capsys.readouterr().out
    assert len(read_discevalmt(str(tmp_path / "raw" / "anaphora.json"))) == 14
    assert (tmp_path / "raw" / "train.ctxkey").read_text().count("|") > 0
