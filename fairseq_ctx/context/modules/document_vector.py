"""The "+ document vector" context slot of HCE/HMCE (Yun 2022, Table 3.3)."""
from typing import Tuple

import torch
from torch import Tensor, nn


class DocumentVector(nn.Module):
    """A learned summary of the document so far, used as one more context slot.

    The thesis names the slot (Table 3.3) without defining it; this is our definition. For
    sentence i whose document started k sentences earlier, with P = the previous
    min(k, span) sentences of the document (the N context sentences and further back):

        m_i = mean_{j ∈ P} mean_{t} E[x_{j,t}]        (bag of the shared token embeddings E,
                                                       each sentence weighted equally, pads
                                                       excluded, averaged in float32)
        d_i = W_2 · ReLU(W_1 · m_i + b_1) + b_2 + p_doc

    where p_doc is a learned slot embedding that tells the upper level this slot is the
    document summary rather than sentence c_n. The slot is masked when P is empty (document
    start). It only looks back, so it works when translating a document as a stream.
    """

    def __init__(self, embed_dim: int, span: int, padding_idx: int):
        super().__init__()
        if span < 1:
            raise ValueError(f"--document-vector-span must be >= 1, got {span}")
        self.span = span
        self.padding_idx = padding_idx
        self.summary = nn.Sequential(nn.Linear(embed_dim, embed_dim), nn.ReLU(), nn.Linear(embed_dim, embed_dim))
        self.slot_embedding = nn.Parameter(torch.zeros(embed_dim))
        nn.init.normal_(self.slot_embedding, mean=0.0, std=embed_dim ** -0.5)

    def forward(self, embed_tokens: nn.Embedding, sentences: Tensor, document_index: Tensor) -> Tuple[Tensor, Tensor]:
        """sentences: (U, L) token rows; document_index: (B, M) rows of ``sentences`` (-1 empty).
        Returns the document slot (B, C) and its mask (B,), True where P is empty."""
        tokens = sentences.ne(self.padding_idx)
        sentence_means = (embed_tokens(sentences).float() * tokens.unsqueeze(-1)).sum(1) / tokens.sum(1, keepdim=True).clamp(min=1)
        present = document_index.ge(0)
        if sentence_means.size(0) == 0:
            sentence_means = sentence_means.new_zeros(1, sentence_means.size(1))
        gathered = sentence_means[document_index.clamp(min=0)] * present.unsqueeze(-1)
        mean = gathered.sum(1) / present.sum(1, keepdim=True).clamp(min=1)
        weight = self.summary[0].weight
        return self.summary(mean.to(weight.dtype)) + self.slot_embedding, ~present.any(dim=1)
