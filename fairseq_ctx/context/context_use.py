"""The line every decoding path logs once about the context each sentence is translated with:
the source context size, the target context size and where the previous target sentences come
from (the model's own translations, or given ones), and the documents.

    fairseq-generate: source context 2 previous sentences, target context 1 previous sentence (the model's own translations); split test: 6 documents, 44 sentences
"""
from typing import Optional

OWN_TRANSLATIONS = "the model's own translations"
REFERENCES = "the reference translations"


def _sentences(count: int) -> str:
    return f"{count} previous sentence{'' if count == 1 else 's'}"


def describe_context(path: str, source: int, target: int, target_from: Optional[str], documents: str) -> str:
    """``path``: the decoding path (e.g. ``fairseq-generate``); ``source``/``target``: the context
    sizes; ``target_from``: where the previous target sentences come from; ``documents``: what
    the path knows of its documents."""
    if source == 0 and target == 0:
        context = "no context (sentence level: --context-size 0, --target-context-size 0)"
    else:
        context = f"source context {_sentences(source) if source else '0'}, target context "
        context += f"{_sentences(target)} ({target_from})" if target else "0"
    return f"{path}: {context}; {documents}"
