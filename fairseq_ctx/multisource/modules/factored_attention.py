"""Encoder-decoder attention over many static states in the factored (associative) order: the
per-layer attention MH(Q, V_i) over e.g. 196 image regions (Libovický 2019 §5.2)."""
from typing import Optional, Tuple

import torch
from fairseq import utils
from fairseq.modules import MultiheadAttention
from torch import Tensor


def factored_attention_is_cheaper(tgt_len: int, src_len: int, attention: MultiheadAttention) -> bool:
    """Whether :func:`factored_attention` needs fewer multiply-adds than projecting the states.

    Per sentence, fairseq projects the keys and values (2·S·kdim·D) and attends (2·T·S·D);
    the factored order maps the queries into the state space and back (2·T·D·kdim) and attends
    per head in that space (2·H·T·S·kdim): cheaper when H·T is small against S and D, e.g. a
    20-token target over 196 regions, never for a source sentence of the target's length.
    """
    kdim, embed_dim, heads = attention.kdim, attention.embed_dim, attention.num_heads
    projected = 2 * src_len * kdim * embed_dim + 2 * tgt_len * src_len * embed_dim
    factored = 2 * tgt_len * embed_dim * kdim + 2 * heads * tgt_len * src_len * kdim
    return factored < projected


def factored_attention(attention: MultiheadAttention, query: Tensor, states: Tensor,
                       key_padding_mask: Optional[Tensor], need_head_weights: bool = False
                       ) -> Tuple[Tensor, Optional[Tensor]]:
    """``attention(query, states, states, key_padding_mask, static_kv=True, need_weights=...,
    need_head_weights=...)`` of fairseq's encoder-decoder :class:`MultiheadAttention` (same
    parameters, equal up to float rounding, same dropout draws), computed per head h without
    projecting the states X:

        scores_h = (q_h W_k,h) Xᵀ + q_h · b_k,h          (q_h already scaled by d_h^-1/2)
        out_h    = (P_h X) W_v,hᵀ + (P_h 1) b_v,h         (P_h: softmax, then attention dropout)

    query: (T, B, D); states: (S, B, kdim); key_padding_mask: (B, S), True at padding. Returns
    the output (T, B, D) and, if asked, the per-head weights (H, B, T, S) before dropout.
    """
    if attention.bias_k is not None or attention.add_zero_attn:
        raise ValueError("factored_attention does not support add_bias_kv / add_zero_attn")
    tgt_len, bsz, embed_dim = query.shape
    heads, head_dim = attention.num_heads, attention.head_dim
    q = (attention.q_proj(query) * attention.scaling).view(tgt_len, bsz, heads, head_dim).permute(1, 2, 0, 3)
    keys = states.transpose(0, 1).contiguous()  # (B, S, kdim): bfloat16 bmm copies a strided operand per use
    query_keys = torch.einsum("bhtd,hdc->bhtc", q, attention.k_proj.weight.view(heads, head_dim, -1))
    scores = torch.bmm(query_keys.reshape(bsz, heads * tgt_len, -1), keys.transpose(1, 2))
    scores = scores.view(bsz, heads, tgt_len, -1)
    if attention.k_proj.bias is not None:
        scores = scores + torch.einsum("bhtd,hd->bht", q, attention.k_proj.bias.view(heads, head_dim)).unsqueeze(-1)
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask.view(bsz, 1, 1, -1).bool(), torch.finfo(scores.dtype).min)
    weights = utils.softmax(scores, dim=-1)
    probs = attention.dropout_module(weights.type_as(scores))
    mixed = torch.bmm(probs.view(bsz, heads * tgt_len, -1), keys).view(bsz, heads, tgt_len, -1)
    context = torch.einsum("bhtc,hdc->bhtd", mixed, attention.v_proj.weight.view(heads, head_dim, -1))
    if attention.v_proj.bias is not None:
        context = context + probs.sum(-1, keepdim=True) * attention.v_proj.bias.view(1, heads, 1, head_dim)
    output = attention.out_proj(context.permute(2, 0, 1, 3).reshape(tgt_len, bsz, embed_dim))
    return output, (weights.transpose(0, 1) if need_head_weights else None)
