"""Self-attentive weighted sum that turns a sequence of vectors into one vector."""
import torch
from fairseq.modules import FairseqDropout, MultiheadAttention
from torch import Tensor, nn


class AttentivePooling(nn.Module):
    """HCE's self-attentive weighted sum (Yun 2022, eq. 3.15–3.16):
    α = softmax_j(FFN(MultiHead(e, e))_j) over the non-pad tokens, s = Σ_j α_j e_j.

    The scores and their masked softmax are computed in float32 (the mask uses float32's
    minimum, never a constant that overflows in half precision); the weighted sum is
    returned in the input dtype.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        self.self_attn = MultiheadAttention(embed_dim, num_heads, dropout=dropout, self_attention=True)
        self.score = nn.Sequential(nn.Linear(embed_dim, embed_dim), nn.ReLU(), nn.Linear(embed_dim, 1))
        self.dropout = FairseqDropout(dropout, module_name=self.__class__.__name__)

    def weights(self, x: Tensor, padding_mask: Tensor) -> Tensor:
        """x: (T, B, C); padding_mask: (B, T), True at padding. Returns α (B, T) in float32,
        zero at padding. Every row must have at least one non-pad position."""
        attended, _ = self.self_attn(query=x, key=x, value=x, key_padding_mask=padding_mask, need_weights=False)
        scores = self.score(self.dropout(attended)).squeeze(-1).transpose(0, 1).float()
        scores = scores.masked_fill(padding_mask, torch.finfo(torch.float32).min)
        return torch.softmax(scores, dim=-1)

    def forward(self, x: Tensor, padding_mask: Tensor) -> Tensor:
        """x: (T, B, C); padding_mask: (B, T), True at padding. Returns s (B, C)."""
        return torch.einsum("bt,tbc->bc", self.weights(x, padding_mask).to(x.dtype), x)
