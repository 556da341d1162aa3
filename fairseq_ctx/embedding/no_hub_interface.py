"""``from_pretrained`` of the multilingual_embedding models: they embed, they do not translate."""
from typing import NoReturn


def no_hub_interface(model_name: str) -> NoReturn:
    """fairseq's hub interface (``Model.from_pretrained(...).translate``) would decode with the
    embedding model's auxiliary decoder; the model's product is the sentence/document embedding
    (Li 2021, ch. 4), which the embedding tools compute."""
    raise NotImplementedError(
        f"{model_name} is a multilingual_embedding model (T-MDE / LASER): it embeds text, it does not translate, "
        f"so it has no fairseq hub interface. Embed text with `fairseq-ctx-embed CHECKPOINT --lang LANG --input "
        f"FILE --output FILE.npy`, or in Python with fairseq_ctx.embedding.embedder.Embedder(CHECKPOINT, LANG)"
        f".embed_lines(lines, max_tokens)"
    )
