"""A generated multimodal corpus in which some source words are ambiguous and only the
auxiliary input decides their translation (demo and tests of the multi-source models, Libovický 2019 ch. 5).

Each sentence has an "image": R regions of d-dimensional features. For a sentence with an
ambiguous word ("bank" → ufer | bank, …) one random region holds the prototype vector of the
intended sense (plus noise), the others only noise; unambiguous sentences get the prototype of
a random sense. A text-only model can only guess the sense (chance: 1/2). The second source
language ("fr") names the sense with a distinct word, for the multi-source text variant.

The harder setting has several images per sentence (``images`` K > 1): the prototype of the
intended sense is in one region of one random image, and every other image shows a distractor,
the prototype of a sense of another ambiguous word, in one of its regions. The decoder has to
find, per sentence, the image that matches the word it translates.

Files per split: ``{split}.en``, ``{split}.de``, ``{split}.fr``, ``{split}.key`` (``expected|alternative``
or empty, the format of ``fairseq-ctx-score --context-key``), ``{split}.img.npy`` (n, R, d) float16,
or with K > 1 images ``{split}.img1.npy`` … ``{split}.imgK.npy``.
"""
import os
import random
from dataclasses import dataclass
from typing import Dict, List, Tuple

from fairseq_ctx.core.demo_vocabulary import ADJECTIVES, ADVERBS, NOUNS, VERBS

# source word → [(target word, second-source word), …] one per sense
AMBIGUOUS: Dict[str, List[Tuple[str, str]]] = {
    "bank": [("ufer", "rive"), ("bank", "banque")],
    "bat": [("fledermaus", "chauve-souris"), ("schlaeger", "batte")],
    "glasses": [("brille", "lunettes"), ("glaeser", "verres")],
    "letter": [("brief", "lettre"), ("buchstabe", "caractere")],
}
SENSES: List[Tuple[str, int]] = [(word, sense) for word, senses in AMBIGUOUS.items() for sense in range(len(senses))]


@dataclass
class MultimodalCorpusSizes:
    train: int = 3000
    valid: int = 200
    test: int = 400
    regions: int = 4
    feature_dim: int = 32
    ambiguous_share: float = 0.5
    noise: float = 0.5
    images: int = 1


def image_names(images: int) -> List[str]:
    """The feature input names of ``images`` images per sentence (``--feature-inputs``)."""
    return ["img"] if images == 1 else [f"img{number}" for number in range(1, images + 1)]


def _sentence(rng: random.Random, ambiguous: bool) -> Tuple[str, str, str, str, int]:
    adj_src, adj_tgt = rng.choice(ADJECTIVES)
    verb_src, verb_tgt = rng.choice(VERBS)
    adv_src, adv_tgt = rng.choice(ADVERBS)
    if ambiguous:
        sense_id = rng.randrange(len(SENSES))
        word, sense = SENSES[sense_id]
        tgt_word, fr_word = AMBIGUOUS[word][sense]
        others = [t for i, (t, _) in enumerate(AMBIGUOUS[word]) if i != sense]
        key = f"{tgt_word}|{','.join(others)}"
        src_word = word
    else:
        sense_id = rng.randrange(len(SENSES))
        src_word, tgt_word = rng.choice(NOUNS[rng.choice("mfn")])
        fr_word, key = src_word, ""
    src = f"the {adj_src} {src_word} {verb_src} {adv_src} ."
    tgt = f"{adj_tgt} {tgt_word} {verb_tgt} {adv_tgt} ."
    fr = f"le {fr_word} {adj_src} {verb_src} ."
    return src, tgt, fr, key, sense_id


def write_multimodal_corpus(out_dir: str, sizes: MultimodalCorpusSizes, seed: int = 1) -> Dict[str, int]:
    """Write the text files and ``{split}.img.npy``; returns sentences per split."""
    import numpy as np

    os.makedirs(out_dir, exist_ok=True)
    prototypes = np.random.default_rng(seed).standard_normal((len(SENSES), sizes.feature_dim)).astype(np.float32)
    counts = {}
    for offset, (split, n) in enumerate((("train", sizes.train), ("valid", sizes.valid), ("test", sizes.test))):
        rng = random.Random(seed * 1000 + offset)
        np_rng = np.random.default_rng(seed * 1000 + offset)
        rows = [_sentence(rng, rng.random() < sizes.ambiguous_share) for _ in range(n)]
        for column, ext in enumerate(("en", "de", "fr", "key")):
            with open(os.path.join(out_dir, f"{split}.{ext}"), "w", encoding="utf-8") as handle:
                handle.writelines(row[column] + "\n" for row in rows)
        shown = _image_contents([row[4] for row in rows], sizes.images, np_rng)
        for image, name in enumerate(image_names(sizes.images)):
            features = sizes.noise * np_rng.standard_normal((n, sizes.regions, sizes.feature_dim)).astype(np.float32)
            region = np_rng.integers(0, sizes.regions, size=n)
            features[np.arange(n), region] += prototypes[shown[:, image]]
            np.save(os.path.join(out_dir, f"{split}.{name}.npy"), features.astype(np.float16))
        counts[split] = n
    return counts


def _image_contents(senses: List[int], images: int, np_rng) -> "np.ndarray":
    """(n, images) the sense shown in each image: the sentence's own in one random image, in
    the others a random sense of another ambiguous word."""
    import numpy as np

    if images == 1:
        return np.asarray(senses, dtype=np.int64).reshape(-1, 1)
    words = [word for word, _ in SENSES]
    shown = np.empty((len(senses), images), dtype=np.int64)
    for row, sense in enumerate(senses):
        others = [i for i, word in enumerate(words) if word != words[sense]]
        shown[row] = np_rng.choice(others, size=images)
        shown[row, np_rng.integers(0, images)] = sense
    return shown
