"""T-MDE_P's pyramid of learnable queries and layer aggregation (Li 2021, eq. 4.8–4.17)."""
from typing import List, Optional, Sequence

import torch
import torch.nn.functional as F
from fairseq import utils
from fairseq.modules import FairseqDropout, LayerNorm, MultiheadAttention
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase
from torch import Tensor, nn


def attend_with_layer(layer: TransformerEncoderLayerBase, query: Tensor, memory: Tensor,
                      memory_padding_mask: Optional[Tensor]) -> Tensor:
    """One encoder layer (its own weights: attention, FFN, norms) applied with queries that are
    not its keys: MH(query, memory, memory) then FFN, residuals and (pre/post) layer norms as
    the layer does for self-attention. query: (Q, B, C); memory: (T, B, C)."""
    attn = layer.self_attn
    residual = query
    if layer.normalize_before:
        query, memory = layer.self_attn_layer_norm(query), layer.self_attn_layer_norm(memory)
    x, _ = F.multi_head_attention_forward(
        query, memory, memory, attn.embed_dim, attn.num_heads,
        in_proj_weight=None,
        in_proj_bias=torch.cat((attn.q_proj.bias, attn.k_proj.bias, attn.v_proj.bias)),
        bias_k=None, bias_v=None, add_zero_attn=False,
        dropout_p=attn.dropout_module.p, out_proj_weight=attn.out_proj.weight, out_proj_bias=attn.out_proj.bias,
        training=attn.training, key_padding_mask=memory_padding_mask, need_weights=False,
        use_separate_proj_weight=True, q_proj_weight=attn.q_proj.weight, k_proj_weight=attn.k_proj.weight,
        v_proj_weight=attn.v_proj.weight,
    )
    x = layer.residual_connection(layer.dropout_module(x), residual)
    if not layer.normalize_before:
        x = layer.self_attn_layer_norm(x)
    residual = x
    if layer.normalize_before:
        x = layer.final_layer_norm(x)
    x = layer.activation_dropout_module(layer.activation_fn(layer.fc1(x)))
    x = layer.residual_connection(layer.dropout_module(layer.fc2(x)), residual)
    if not layer.normalize_before:
        x = layer.final_layer_norm(x)
    return x


class PyramidQueryPooling(nn.Module):
    """Sentence embedding of T-MDE_P.

    Eq. 4.8–4.13: learnable queries Z (``query_sizes[0]`` of them) attend to the output of
    encoder layer s = L − len(query_sizes) + 1 with that layer's weights; each following
    level keeps the first ``query_sizes[i]`` results as queries over the previous level and
    uses the next layer's weights (32 → 16 → 8 for a 6-layer encoder: layers 4, 5, 6).
    The FFN outputs Z_y are passed on (the thesis writes Z_x; the FFN output is the layer's
    output). Eq. 4.14–4.17: P = FFN(MH(H^L[0], D_c, D_c)), D_c = [H^L[0] … H^1[0]; Z_y^L].
    """

    def __init__(self, embed_dim: int, num_heads: int, ffn_dim: int, query_sizes: Sequence[int],
                 dropout: float = 0.0, activation_fn: str = "relu"):
        super().__init__()
        if not query_sizes or any(b > a for a, b in zip(query_sizes, query_sizes[1:])) or min(query_sizes) < 1:
            raise ValueError(f"--pyramid-queries must be non-increasing positive sizes, got {list(query_sizes)}")
        self.query_sizes = list(query_sizes)
        self.queries = nn.Parameter(torch.randn(query_sizes[0], embed_dim) * embed_dim ** -0.5)
        self.attn = MultiheadAttention(embed_dim, num_heads, dropout=dropout, encoder_decoder_attention=True)
        self.query_norm = LayerNorm(embed_dim)
        self.memory_norm = LayerNorm(embed_dim)
        self.ffn_norm = LayerNorm(embed_dim)
        self.fc1 = nn.Linear(embed_dim, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, embed_dim)
        self.activation_fn = utils.get_activation_fn(activation_fn)
        self.dropout = FairseqDropout(dropout, module_name=self.__class__.__name__)

    def first_layer(self, num_layers: int) -> int:
        """1-based index of the layer whose output the queries read first (eq. 4.8)."""
        first = num_layers - len(self.query_sizes) + 1
        if first < 1:
            raise ValueError(f"--pyramid-queries has {len(self.query_sizes)} levels but the encoder only "
                             f"{num_layers} layers; use at most {num_layers} sizes")
        return first

    def forward(self, layer_outputs: List[Tensor], last: Tensor, padding_mask: Optional[Tensor],
                layers: Sequence[TransformerEncoderLayerBase]) -> Tensor:
        """layer_outputs: H^1..H^L, each (T, B, C); last: H^L after the final norm (T, B, C);
        padding_mask: (B, T) or None. Returns P: (B, C)."""
        first = self.first_layer(len(layers))
        batch = last.size(1)
        z = self.queries.to(last.dtype).unsqueeze(1).expand(-1, batch, -1)
        memory, mask = layer_outputs[first - 1], padding_mask
        for level, size in enumerate(self.query_sizes):
            z = attend_with_layer(layers[first - 1 + level], z[:size], memory, mask)
            memory, mask = z, None
        heads = [last[0]] + [h[0] for h in reversed(layer_outputs[:-1])]
        d_c = torch.cat([torch.stack(heads, dim=0), z], dim=0)
        query = last[:1]
        x, _ = self.attn(query=self.query_norm(query), key=self.memory_norm(d_c), value=self.memory_norm(d_c),
                         need_weights=False)
        x = query + self.dropout(x)
        x = x + self.dropout(self.fc2(self.activation_fn(self.fc1(self.ffn_norm(x)))))
        return x[0]
