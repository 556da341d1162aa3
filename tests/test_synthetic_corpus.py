"""The generated context corpus: in every setting a pronoun agrees with the most recent subject
noun; the hard setting puts it 3-4 sentences back behind object nouns of other genders."""
from collections import Counter

import pytest

from fairseq_ctx.context.data.synthetic_corpus import NOUNS, PRONOUN, DocumentGenerator

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
    with pytest.raises(ValueError, match="unknown corpus setting 'harder'; choose one of standard, hard"):
        DocumentGenerator(1, setting="harder")
