"""A generated multilingual parallel corpus of topic-labelled documents (demo data for the models of Li (2021) ch. 4).

Every language realises the same semantic frames (subject, adjective, verb, object, adverb)
with its own vocabulary (seeded random syllable words, disjoint between languages) and its
own word order (SVO, SOV, VSO, OSV, ...; adjective before or after the noun; an object
marker in some languages). Two languages play the thesis' pivot role (targets of every
training pair). A document has one of four topics; most of its nouns and verbs come from
that topic's lexicon, so the topic is recoverable from a good document embedding.

Files per split: ``{split}.{lang}`` (one sentence per line, aligned across languages),
``{split}.doc.{lang}`` (one document per line), ``{split}.doc.labels`` (topic per document).
"""
import os
import random
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

TOPICS = ["animals", "food", "travel", "music"]
NOUNS_PER_TOPIC = 10
VERBS_PER_TOPIC = 5
N_ADJECTIVES = 8
N_ADVERBS = 5
TOPIC_PURITY = 0.8


@dataclass(frozen=True)
class LanguageSpec:
    name: str
    order: str  # permutation of "SVO"
    adjective_after_noun: bool
    object_marker: bool
    consonants: str
    vowels: str


LANGUAGES: Tuple[LanguageSpec, ...] = (
    LanguageSpec("pa", "SVO", False, False, "ptkmnsl", "aeiou"),
    LanguageSpec("pb", "SVO", True, False, "bdgrfvz", "aeiouy"),
    LanguageSpec("xa", "SOV", False, True, "ptkshr", "aiu"),
    LanguageSpec("xb", "VSO", True, False, "mnlwjd", "eoa"),
    LanguageSpec("xc", "OSV", True, True, "kgtdzn", "iouae"),
)
PIVOTS = ("pa", "pb")


@dataclass
class MultilingualSizes:
    train_docs: int = 600
    valid_docs: int = 40
    test_docs: int = 200


Frame = Tuple[int, int, int, int, int]  # subject noun, adjective (-1: none), verb, object noun, adverb (-1)


class Lexicon:
    """Language-specific word for every concept id; words never collide across languages."""

    def __init__(self, spec: LanguageSpec, rng: random.Random, taken: set):
        self.spec = spec
        n_nouns, n_verbs = len(TOPICS) * NOUNS_PER_TOPIC, len(TOPICS) * VERBS_PER_TOPIC
        self.nouns = [self._word(rng, taken) for _ in range(n_nouns)]
        self.verbs = [self._word(rng, taken) for _ in range(n_verbs)]
        self.adjectives = [self._word(rng, taken) for _ in range(N_ADJECTIVES)]
        self.adverbs = [self._word(rng, taken) for _ in range(N_ADVERBS)]
        self.determiner = self._word(rng, taken, syllables=1)
        self.marker = self._word(rng, taken, syllables=1)

    def _word(self, rng: random.Random, taken: set, syllables: int = 0) -> str:
        while True:
            count = syllables or rng.randint(2, 3)
            word = "".join(rng.choice(self.spec.consonants) + rng.choice(self.spec.vowels) for _ in range(count))
            if word not in taken:
                taken.add(word)
                return word

    def noun_phrase(self, noun: int, adjective: int, is_object: bool) -> List[str]:
        words = [self.nouns[noun]]
        if adjective >= 0:
            adj = self.adjectives[adjective]
            words = words + [adj] if self.spec.adjective_after_noun else [adj] + words
        words = [self.determiner] + words
        if is_object and self.spec.object_marker:
            words.append(self.marker)
        return words

    def realise(self, frame: Frame) -> str:
        subject, adjective, verb, obj, adverb = frame
        parts = {
            "S": self.noun_phrase(subject, adjective, False),
            "V": [self.verbs[verb]],
            "O": self.noun_phrase(obj, -1, True),
        }
        words = [w for role in self.spec.order for w in parts[role]]
        if adverb >= 0:
            words.append(self.adverbs[adverb])
        return " ".join(words + ["."])


def build_lexicons(languages: Sequence[LanguageSpec] = LANGUAGES, seed: int = 1) -> Dict[str, Lexicon]:
    rng = random.Random(seed * 7919)
    taken: set = set()
    return {spec.name: Lexicon(spec, rng, taken) for spec in languages}


def sample_frame(rng: random.Random, topic: int) -> Frame:
    def content(per_topic: int) -> int:
        chosen = topic if rng.random() < TOPIC_PURITY else rng.randrange(len(TOPICS))
        return chosen * per_topic + rng.randrange(per_topic)

    adjective = rng.randrange(N_ADJECTIVES) if rng.random() < 0.5 else -1
    adverb = rng.randrange(N_ADVERBS) if rng.random() < 0.4 else -1
    return content(NOUNS_PER_TOPIC), adjective, content(VERBS_PER_TOPIC), content(NOUNS_PER_TOPIC), adverb


def write_multilingual_corpus(out_dir: str, sizes: MultilingualSizes, seed: int = 1) -> Dict[str, int]:
    """Write the corpus; returns the number of sentences per split. Deterministic in ``seed``."""
    os.makedirs(out_dir, exist_ok=True)
    lexicons = build_lexicons(seed=seed)
    counts = {}
    for offset, (split, n_docs) in enumerate(
        [("train", sizes.train_docs), ("valid", sizes.valid_docs), ("test", sizes.test_docs)]
    ):
        rng = random.Random(seed * 1000 + offset)
        documents = []
        for _ in range(n_docs):
            topic = rng.randrange(len(TOPICS))
            frames = [sample_frame(rng, topic) for _ in range(rng.randint(3, 5))]
            documents.append((topic, frames))
        for name, lexicon in lexicons.items():
            sentences = [lexicon.realise(f) for _, frames in documents for f in frames]
            _write_lines(os.path.join(out_dir, f"{split}.{name}"), sentences)
            docs = [" ".join(lexicon.realise(f) for f in frames) for _, frames in documents]
            _write_lines(os.path.join(out_dir, f"{split}.doc.{name}"), docs)
        _write_lines(os.path.join(out_dir, f"{split}.doc.labels"), [TOPICS[t] for t, _ in documents])
        counts[split] = sum(len(frames) for _, frames in documents)
    return counts


def _write_lines(path: str, lines: Sequence[str]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in lines))
