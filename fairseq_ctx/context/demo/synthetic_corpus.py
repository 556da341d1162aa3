"""A deterministic document-level parallel corpus in which pronouns need the previous sentences.

Source "English" and target German-like text. A document is a sequence of episodes:

- *pronoun, distance 1*: "the old cat sleeps ." / "it is quiet ." — the target pronoun
  (er / sie / es) agrees with the gender of the noun of the previous sentence;
- *pronoun, distance 2*: the same with a noun-free filler sentence in between;
- *context-free*: a transitive sentence with two nouns, or a filler sentence.

The ``hard`` setting adds long-distance episodes: the antecedent (always the subject of its
sentence) is 3 or 4 sentences back, and the sentences in between name distractor nouns of
other genders as objects ("yesterday we saw the lamp ."), so a model has to find the most
recent *subject*, not the nearest noun; it needs ``--context-size 4``.

The ``target`` setting needs the previous *target* sentence: every pronoun episode names a
source noun with two target synonyms of different genders (``SYNONYMS``: "car" → "wagen" (m)
or "karre" (f)), the reference translation picks one of them at random, and the next
sentence's pronoun agrees with the synonym that was picked: "the car waits ." → "die karre
wartet ."; "it is quiet ." → "**sie** ist leise .". The source side cannot tell er from sie
(a model reading only the source and its source context is at chance, 1/2); the previous
target sentence can (``--target-context-size 1``).

The source pronoun is always "it", so a sentence-level model can guess the target pronoun
only at chance (three genders, balanced: 1/3). Every pronoun sentence is listed in the
answer key (``{split}.ctxkey``: ``expected|alternative,alternative`` or an empty line).
"""
import os
import random
from dataclasses import dataclass
from typing import Dict, List, Tuple

from fairseq_ctx.core.demo_vocabulary import ADJECTIVES, ADVERBS, NOUNS, VERBS

NOMINATIVE = {"m": "der", "f": "die", "n": "das"}
ACCUSATIVE = {"m": "den", "f": "die", "n": "das"}
PRONOUN = {"m": "er", "f": "sie", "n": "es"}
TIMES = [("yesterday", "gestern"), ("then", "dann"), ("later", "spaeter"), ("suddenly", "ploetzlich")]
PAST_VERBS = [("laughed", "lachten"), ("sang", "sangen"), ("waited", "warteten"), ("slept", "schliefen"),
              ("danced", "tanzten")]
SUBJECTS = [("we", "wir"), ("you", "ihr")]
SAW = {"we": "sahen", "you": "saht"}
# Source nouns with a masculine and a feminine target synonym (the ``target`` setting).
SYNONYMS: List[Tuple[str, str, str]] = [
    ("car", "wagen", "karre"), ("road", "weg", "strasse"), ("cup", "becher", "tasse"),
    ("bag", "beutel", "tasche"), ("coat", "mantel", "jacke"), ("rock", "fels", "klippe"),
    ("ship", "dampfer", "faehre"), ("shop", "laden", "boutique"), ("sofa", "diwan", "couch"),
    ("pot", "topf", "kanne"), ("ball", "ball", "kugel"), ("building", "bau", "baute"),
]
SYNONYM_GENDERS = ("m", "f")
SETTINGS = ("standard", "hard", "target")

Sentence = Tuple[str, str, str]  # source, target, answer key


@dataclass
class CorpusSizes:
    train: int = 600
    valid: int = 40
    test: int = 60


class DocumentGenerator:
    """Seeded generator of documents (lists of (source, target, key) sentences)."""

    def __init__(self, seed: int, min_episodes: int = 3, max_episodes: int = 5, setting: str = "standard"):
        if setting not in SETTINGS:
            raise ValueError(f"unknown corpus setting {setting!r}; choose one of {', '.join(SETTINGS)}")
        self.rng = random.Random(seed)
        self.min_episodes = min_episodes
        self.max_episodes = max_episodes
        self.setting = setting

    def noun(self) -> Tuple[str, str, str]:
        gender = self.rng.choice("mfn")
        src, tgt = self.rng.choice(NOUNS[gender])
        return gender, src, tgt

    def intro(self) -> Tuple[Sentence, str]:
        gender, src_noun, tgt_noun = self.noun()
        adj_src, adj_tgt = self.rng.choice(ADJECTIVES)
        verb_src, verb_tgt = self.rng.choice(VERBS)
        if self.rng.random() < 0.5:
            src = f"the {adj_src} {src_noun} {verb_src} ."
            tgt = f"{NOMINATIVE[gender]} {adj_tgt} {tgt_noun} {verb_tgt} ."
        else:
            src = f"the {src_noun} {verb_src} ."
            tgt = f"{NOMINATIVE[gender]} {tgt_noun} {verb_tgt} ."
        return (src, tgt, ""), gender

    def synonym_intro(self) -> Tuple[str, Dict[str, str]]:
        """A sentence about a noun of ``SYNONYMS``: its source and its translation with each
        synonym, keyed by gender."""
        src_noun, *targets = self.rng.choice(SYNONYMS)
        adj_src, adj_tgt = self.rng.choice(ADJECTIVES)
        verb_src, verb_tgt = self.rng.choice(VERBS)
        with_adjective = self.rng.random() < 0.5
        src = f"the {adj_src} {src_noun} {verb_src} ." if with_adjective else f"the {src_noun} {verb_src} ."
        translations = {}
        for gender, tgt_noun in zip(SYNONYM_GENDERS, targets):
            words = [NOMINATIVE[gender], *([adj_tgt] if with_adjective else []), tgt_noun, verb_tgt, "."]
            translations[gender] = " ".join(words)
        return src, translations

    def pronoun(self, gender: str) -> Sentence:
        pron = PRONOUN[gender]
        key = pron + "|" + ",".join(p for g, p in PRONOUN.items() if g != gender)
        if self.rng.random() < 0.5:
            adj_src, adj_tgt = self.rng.choice(ADJECTIVES)
            return f"it is {adj_src} .", f"{pron} ist {adj_tgt} .", key
        verb_src, verb_tgt = self.rng.choice(VERBS)
        adv_src, adv_tgt = self.rng.choice(ADVERBS)
        return f"it {verb_src} {adv_src} .", f"{pron} {verb_tgt} {adv_tgt} .", key

    def filler(self) -> Sentence:
        time_src, time_tgt = self.rng.choice(TIMES)
        subj_src, subj_tgt = self.rng.choice(SUBJECTS)
        verb_src, verb_tgt = self.rng.choice(PAST_VERBS)
        return f"{time_src} {subj_src} {verb_src} .", f"{time_tgt} {verb_tgt} {subj_tgt} .", ""

    def distractor(self, antecedent_gender: str) -> Sentence:
        """A sentence naming a noun of another gender as its object: never an antecedent."""
        gender = self.rng.choice([g for g in "mfn" if g != antecedent_gender])
        src_noun, tgt_noun = self.rng.choice(NOUNS[gender])
        time_src, time_tgt = self.rng.choice(TIMES)
        subj_src, subj_tgt = self.rng.choice(SUBJECTS)
        return (f"{time_src} {subj_src} saw the {src_noun} .",
                f"{time_tgt} {SAW[subj_src]} {subj_tgt} {ACCUSATIVE[gender]} {tgt_noun} .", "")

    def transitive(self) -> Sentence:
        g1, s1, t1 = self.noun()
        g2, s2, t2 = self.noun()
        return f"the {s1} sees the {s2} .", f"{NOMINATIVE[g1]} {t1} sieht {ACCUSATIVE[g2]} {t2} .", ""

    def episode(self) -> List[Sentence]:
        if self.setting == "target":
            return self.target_episode()
        kinds, weights = ["near", "far", "transitive", "filler"], [3, 2, 1, 1]
        if self.setting == "hard":
            kinds, weights = kinds + ["distant"], [1, 1, 1, 1, 4]
        kind = self.rng.choices(kinds, weights=weights)[0]
        if kind == "transitive":
            return [self.transitive()]
        if kind == "filler":
            return [self.filler()]
        intro, gender = self.intro()
        if kind == "distant":
            middle = [self.distractor(gender) for _ in range(self.rng.randint(2, 3))]
        else:
            middle = [self.filler()] if kind == "far" else []
        return [intro, *middle, self.pronoun(gender)]

    def target_episode(self) -> List[Sentence]:
        """``target`` setting: a synonym noun translated with a synonym picked at random, then
        the pronoun that agrees with it; or a context-free sentence."""
        kind = self.rng.choices(["synonym", "transitive", "filler"], weights=[4, 1, 1])[0]
        if kind == "transitive":
            return [self.transitive()]
        if kind == "filler":
            return [self.filler()]
        src, translations = self.synonym_intro()
        gender = self.rng.choice(SYNONYM_GENDERS)
        return [(src, translations[gender], ""), self.pronoun(gender)]

    def document(self) -> List[Sentence]:
        sentences: List[Sentence] = []
        for _ in range(self.rng.randint(self.min_episodes, self.max_episodes)):
            sentences.extend(self.episode())
        return sentences


SPLIT_SEED_OFFSET = {"train": 0, "valid": 1, "test": 2}


def write_corpus(out_dir: str, sizes: CorpusSizes, seed: int = 1, src_lang: str = "en", tgt_lang: str = "de",
                 setting: str = "standard") -> Dict[str, int]:
    """Write ``{split}.{src_lang}`` / ``{split}.{tgt_lang}`` as plain-text documents separated
    by a blank line, plus the flat answer key ``{split}.ctxkey``. Returns sentences per split."""
    os.makedirs(out_dir, exist_ok=True)
    counts = {}
    for split, num_docs in (("train", sizes.train), ("valid", sizes.valid), ("test", sizes.test)):
        generator = DocumentGenerator(seed * 1000 + SPLIT_SEED_OFFSET[split], setting=setting)
        docs = [generator.document() for _ in range(num_docs)]
        paths = {name: os.path.join(out_dir, f"{split}.{name}") for name in (src_lang, tgt_lang, "ctxkey")}
        with open(paths[src_lang], "w", encoding="utf-8") as src, open(paths[tgt_lang], "w", encoding="utf-8") as tgt, \
                open(paths["ctxkey"], "w", encoding="utf-8") as key:
            for doc_no, doc in enumerate(docs):
                if doc_no:
                    src.write("\n")
                    tgt.write("\n")
                for s, t, k in doc:
                    src.write(s + "\n")
                    tgt.write(t + "\n")
                    key.write(k + "\n")
        counts[split] = sum(len(d) for d in docs)
    return counts
