"""What HCE/HMCE add to read the previous target sentences (--target-context-size > 0)."""
from typing import Optional, Tuple

import torch
from torch import Tensor, nn

from fairseq_ctx.context.modules.sentence_vector_cache import SentenceVectorCache


class TargetContext(nn.Module):
    """Target-side context of HCE/HMCE: the previous ``size`` target sentences become context
    slots like the source ones (Yun 2022, eq. 3.14–3.16: the lower level encodes each sentence,
    here over the TARGET embeddings, and pools it to s_i, plus the slot-distance embedding),
    marked by a learned target-side vector; the upper level, the context attention and the gate
    (eq. 3.6–3.8, 3.17) then run over [source slots; target slots] together.

    ``embed_tokens`` is the decoder's own embedding module (with --share-all-embeddings also the
    source one). It is held by reference, not registered as a sub-module, so the checkpoint stores
    it once, under the decoder. ``cache`` holds the pooled vectors of target sentences, apart from
    the source sentences' cache: the same token ids on the two sides are different sentences.
    """

    def __init__(self, size: int, embed_dim: int, embed_tokens: nn.Embedding):
        super().__init__()
        if embed_tokens.embedding_dim != embed_dim:
            raise ValueError(
                f"--target-context-size needs the decoder's embeddings ({embed_tokens.embedding_dim}) to have the "
                f"encoder's size ({embed_dim}): set --decoder-embed-dim {embed_dim}"
            )
        self.size = size
        self.target_side = nn.Parameter(torch.empty(embed_dim))
        nn.init.normal_(self.target_side, mean=0.0, std=embed_dim ** -0.5)
        self.embedding: Tuple[nn.Embedding] = (embed_tokens,)
        self.cache: Optional[SentenceVectorCache] = SentenceVectorCache()

    @property
    def embed_tokens(self) -> nn.Embedding:
        return self.embedding[0]

    def set_cache(self, enabled: bool) -> None:
        self.cache = SentenceVectorCache() if enabled else None

    def clear_cache(self) -> None:
        if self.cache is not None:
            self.cache.clear()

    def check_slots(self, target_context_index: Optional[Tensor]) -> None:
        """A batch must not give more target slots than the model was built to read."""
        check_target_slots(target_context_index, self.size)

    def mark(self, slots: Tensor) -> Tensor:
        """(B, M, C) target slot vectors plus the target-side vector."""
        return slots + self.target_side.to(slots)


def check_target_slots(target_context_index: Optional[Tensor], size: int) -> None:
    """A model built with --target-context-size ``size`` > 0 needs ``target_context_index``
    (B, M'), M' <= ``size``: a batch without it would silently run every sentence as
    document-initial."""
    if target_context_index is None:
        raise ValueError(
            f"the model reads --target-context-size {size} previous target sentences but the batch has no "
            f"target_context_index/target_context_tokens; batch with the context_translation task (it adds them), "
            f"or pass target_context_index filled with -1 and target_context_tokens with 0 rows for no target context"
        )
    if target_context_index.size(1) > size:
        raise ValueError(
            f"the batch gives {target_context_index.size(1)} previous target sentences per example but the "
            f"model was built with --target-context-size {size}; use the task with the model's --target-context-size"
        )
