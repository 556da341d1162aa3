"""A contrastive test set in DiscEvalMT's ``anaphora.json`` layout (Bawden et al. (2018)) for
the ``target`` setting of the generated corpus (synthetic_corpus).

Every block is a synonym episode: ``src`` = [a sentence naming a noun of ``SYNONYMS``, the
pronoun sentence "it ..."], and one contrastive pair per synonym: the previous translation
with that synonym, the current translation with the pronoun that agrees with it (correct)
and with the pronoun of the other synonym (incorrect). Both pairs share the source and its
context and differ only in the previous target sentence, so a model that does not read the
target context gives both pairs the same preference and scores exactly 50%.
"""
import json
import os
from typing import Dict, List

from fairseq_ctx.context.demo.synthetic_corpus import PRONOUN, SYNONYM_GENDERS, DocumentGenerator

TARGET_CONTRASTIVE_SEED_OFFSET = 8  # corpus splits use 0..2, the plain contrastive set 7
DISCEVALMT_TYPE = {"m": "m.sg", "f": "f.sg"}


def with_pronoun(sentence: str, gender: str) -> str:
    """``sentence`` (a pronoun sentence of the generator) with its first word replaced by the
    pronoun of ``gender``."""
    return " ".join([PRONOUN[gender], *sentence.split()[1:]])


def anaphora_blocks(num_blocks: int, seed: int) -> Dict[str, Dict]:
    """``num_blocks`` numbered blocks ("1", "2", ...) in the layout of DiscEvalMT's anaphora.json."""
    generator = DocumentGenerator(seed * 1000 + TARGET_CONTRASTIVE_SEED_OFFSET, setting="target")
    blocks = {}
    for number in range(1, num_blocks + 1):
        previous_source, translations = generator.synonym_intro()
        source, target, _ = generator.pronoun(generator.rng.choice(SYNONYM_GENDERS))
        pairs: List[Dict] = []
        for gender in SYNONYM_GENDERS:
            other = next(g for g in SYNONYM_GENDERS if g != gender)
            previous = translations[gender]
            pairs.append({
                "correct": [previous, with_pronoun(target, gender)],
                "incorrect": [previous, with_pronoun(target, other)],
                "type": DISCEVALMT_TYPE[gender],
            })
        blocks[str(number)] = {"src": [previous_source, source], "trg": pairs}
    return blocks


def write_target_anaphora(path: str, num_blocks: int = 200, seed: int = 1) -> int:
    """Write the blocks to ``path`` (read with ``fairseq-ctx-contrastive --format discevalmt``);
    returns the number of contrastive pairs (two per block)."""
    blocks = anaphora_blocks(num_blocks, seed)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(blocks, handle, indent=1, ensure_ascii=False)
        handle.write("\n")
    return 2 * len(blocks)
