"""Load the one dictionary every language of a multilingual_embedding data directory shares."""
import os
from typing import Sequence

from fairseq.data import Dictionary


class SharedDictionaryError(ValueError):
    """The data directory has no usable shared dictionary."""


def load_shared_dictionary(data_path: str, langs: Sequence[str]) -> Dictionary:
    """``dict.txt`` when present; otherwise every ``dict.{lang}.txt``, which must be identical."""
    joint = os.path.join(data_path, "dict.txt")
    if os.path.exists(joint):
        return Dictionary.load(joint)
    paths = [os.path.join(data_path, f"dict.{lang}.txt") for lang in langs]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise SharedDictionaryError(
            f"multilingual_embedding: no dict.txt and missing {', '.join(missing)}; binarize every pair "
            f"with the same dictionary: fairseq-preprocess ... --srcdict DICT --tgtdict DICT"
        )
    reference = Dictionary.load(paths[0])
    for path in paths[1:]:
        other = Dictionary.load(path)
        if other.symbols != reference.symbols:
            first = next((i for i, (a, b) in enumerate(zip(reference.symbols, other.symbols)) if a != b),
                         min(len(reference), len(other)))
            raise SharedDictionaryError(
                f"multilingual_embedding: {path} differs from {paths[0]} ({len(other)} vs {len(reference)} "
                f"symbols, first difference at entry {first}); all languages must share one dictionary: build "
                f"it once (fairseq-preprocess --only-source on the text of all languages) and binarize every "
                f"pair with --srcdict DICT --tgtdict DICT"
            )
    return reference
