"""The cross-attention sub-layer of a multi-source Transformer decoder (Libovický 2019
§5.2, eq. 5.15–5.16, Fig. 5.4)."""
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from fairseq.modules import FairseqDropout, LayerNorm, MultiheadAttention
from torch import Tensor, nn

from fairseq_ctx.multisource.modules.factored_attention import factored_attention, factored_attention_is_cheaper

COMBINATIONS = ("serial", "parallel", "flat", "hierarchical")


class MultiInputAttention(nn.Module):
    """Cross-attention of decoder queries Q over inputs V_1..V_n, with residual and layer norm.

    - serial: x_i = LN_i(x_{i-1} + MH_i(x_{i-1}, V_i)), x_0 = Q (one sub-layer per input);
    - parallel (eq. 5.15): LN(Σ_i MH_i(Q, V_i) + Q);
    - flat (eq. 5.16): LN(MH(Q, V_1 ⊕ … ⊕ V_n) + Q), one joint softmax, shared projections;
    - hierarchical: LN(MH(Q, [MH_i(Q, V_i)]_i) + Q): per-input contexts, then a second
      attention over the n context vectors at each query position (after the head projection,
      so its head-averaged weights β are a distribution over inputs).

    Each input has its own multi-head attention (one shared by all inputs for flat), so each may
    have its own number of heads (``input_heads``), and so may the second level of the
    hierarchical strategy (``hierarchical_heads``), as in the thesis' implementation (§5.2.1:
    the hierarchy "theoretically allows utilizing a different number of heads for each input").

    With a single input every strategy is the plain Transformer cross-attention sub-layer
    (``attentions[0]`` / ``layer_norms[0]``). Each call is given ``input_sizes`` (splits the
    concatenated encoder states into the inputs), ``padded_inputs`` (which inputs may have
    padding; the others attend without a mask) and ``beam_size`` (beam copies per sentence), all
    read by the decoder from ``encoder_out``.

    Speed, all exact: while decoding, keys/values of each input are computed once per sentence
    (fairseq's beamable encoder-decoder attention) and cached in the incremental state
    (``static_kv``); without incremental state, an input with many states (image regions) is
    attended in the factored order when that is cheaper (:func:`factored_attention`).
    """

    def __init__(self, embed_dim: int, num_heads: int, kdim: int, num_inputs: int, combination: str,
                 dropout: float, attention_dropout: float, normalize_before: bool, export: bool = False,
                 input_heads: Optional[Sequence[int]] = None, hierarchical_heads: Optional[int] = None):
        super().__init__()
        if combination not in COMBINATIONS:
            raise ValueError(f"--combination must be one of {COMBINATIONS}, got '{combination}'")
        heads = list(input_heads) if input_heads else [num_heads] * num_inputs
        if len(heads) != num_inputs:
            raise ValueError(f"{len(heads)} head counts given for {num_inputs} inputs")
        if combination == "flat" and len(set(heads)) > 1:
            raise ValueError(f"flat combination attends all inputs with one attention; got head counts {heads}")
        self.combination = combination
        self.num_inputs = num_inputs
        self.normalize_before = normalize_before
        num_attentions = 1 if combination == "flat" else num_inputs
        self.attentions = nn.ModuleList(
            MultiheadAttention(embed_dim, heads[i], kdim=kdim, vdim=kdim, dropout=attention_dropout,
                               encoder_decoder_attention=True)
            for i in range(num_attentions)
        )
        num_norms = num_inputs if combination == "serial" else 1
        self.layer_norms = nn.ModuleList(LayerNorm(embed_dim, export=export) for _ in range(num_norms))
        self.input_attention = (
            MultiheadAttention(embed_dim, hierarchical_heads or num_heads, dropout=attention_dropout,
                               encoder_decoder_attention=True)
            if combination == "hierarchical" and num_inputs > 1 else None
        )
        self.dropout_module = FairseqDropout(dropout, module_name=self.__class__.__name__)

    def forward(self, x: Tensor, encoder_out: Tensor, padding_mask: Optional[Tensor],
                incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
                need_head_weights: bool = False, input_sizes: Optional[List[int]] = None,
                padded_inputs: Optional[List[bool]] = None, beam_size: int = 1,
                need_input_weights: bool = False) -> Tuple[Tensor, Optional[Tensor], Optional[Tensor]]:
        """x: (T, B, D) queries; encoder_out: (S_1+…+S_n, B, kdim) concatenated inputs;
        padding_mask: (B, S_1+…+S_n); ``input_sizes`` the S_i (default: one input),
        ``padded_inputs`` which inputs may have padding (default: all), ``beam_size`` the beam
        copies per sentence while decoding. Returns the sub-layer output, per-head attention
        weights (H, B, T, S) over the concatenated states if ``need_head_weights``, and the
        (B, T, n) weight of each input (β, attention mass or context-norm share, see
        ``fairseq-ctx-attention-plot``) if ``need_input_weights``."""
        sizes = list(input_sizes) if input_sizes else [encoder_out.size(0)]
        if len(sizes) != self.num_inputs and not (self.combination == "flat" or self.num_inputs == 1):
            raise ValueError(f"the decoder was built for {self.num_inputs} inputs but got {len(sizes)}")
        states = list(encoder_out.split(sizes, dim=0))
        masks = list(padding_mask.split(sizes, dim=1)) if padding_mask is not None else [None] * len(sizes)
        padded = list(padded_inputs) if padded_inputs else [True] * len(sizes)
        masks = [mask if may_pad else None for mask, may_pad in zip(masks, padded)]
        if self.combination == "serial":
            return self._serial(x, states, masks, incremental_state, need_head_weights, need_input_weights, beam_size)
        residual = x
        query = self.layer_norms[0](x) if self.normalize_before else x
        input_weights: Optional[Tensor] = None
        if self.combination == "flat" or len(sizes) == 1:
            context, weights = self._attend(0, query, encoder_out, padding_mask, incremental_state,
                                            need_head_weights or need_input_weights, beam_size)
            if need_input_weights and weights is not None:
                input_weights = torch.stack([w.sum(-1) for w in weights.float().mean(0).split(sizes, -1)], -1)
            if not need_head_weights:
                weights = None
        else:
            contexts, per_input = zip(*(
                self._attend(i, query, states[i], masks[i], incremental_state, need_head_weights, beam_size)
                for i in range(len(sizes))
            ))
            if self.combination == "parallel":
                context = torch.stack(contexts).sum(0)
                input_weights = self._context_shares(contexts)
            else:
                context, input_weights = self._hierarchical(query, contexts)
            weights = self._scaled(per_input, input_weights) if need_head_weights else None
        x = residual + self.dropout_module(context)
        if not self.normalize_before:
            x = self.layer_norms[0](x)
        return x, weights, (input_weights if need_input_weights else None)

    def _attend(self, index: int, query: Tensor, states: Tensor, mask: Optional[Tensor], incremental_state,
                need_weights: bool, beam_size: int) -> Tuple[Tensor, Optional[Tensor]]:
        attention = self.attentions[index]
        if incremental_state is None and factored_attention_is_cheaper(query.size(0), states.size(0), attention):
            return factored_attention(attention, query, states, mask, need_weights)
        # fairseq's beamable attention (keys/values from the first of each sentence's beam copies,
        # cache reordered per sentence) only while decoding. fairseq's MultiheadAttention reads its
        # beam size from an attribute, so it is set on every call from this call's argument.
        attention.beam_size = beam_size if incremental_state is not None else 1
        return attention(
            query=query, key=states, value=states, key_padding_mask=mask, incremental_state=incremental_state,
            static_kv=True, need_weights=need_weights, need_head_weights=need_weights,
        )

    def _serial(self, x, states, masks, incremental_state, need_head_weights: bool, need_input_weights: bool,
                beam_size: int):
        per_input, contexts = [], []
        for i, (input_states, mask) in enumerate(zip(states, masks)):
            residual = x
            query = self.layer_norms[i](x) if self.normalize_before else x
            context, weights = self._attend(i, query, input_states, mask, incremental_state, need_head_weights,
                                            beam_size)
            per_input.append(weights)
            contexts.append(context)
            x = residual + self.dropout_module(context)
            if not self.normalize_before:
                x = self.layer_norms[i](x)
        input_weights = self._context_shares(contexts)
        return (x, (self._scaled(per_input, input_weights) if need_head_weights else None),
                (input_weights if need_input_weights else None))

    def _hierarchical(self, query: Tensor, contexts) -> Tuple[Tensor, Tensor]:
        tgt_len, bsz, dim = query.shape
        stacked = torch.stack(contexts).reshape(len(contexts), tgt_len * bsz, dim)
        query = query.reshape(1, tgt_len * bsz, dim)
        if factored_attention_is_cheaper(1, len(contexts), self.input_attention):
            context, head_beta = factored_attention(self.input_attention, query, stacked, None, need_head_weights=True)
            beta = head_beta.mean(0)
        else:
            context, beta = self.input_attention(query=query, key=stacked, value=stacked, need_weights=True)
        beta = beta.reshape(tgt_len, bsz, len(contexts)).transpose(0, 1).float()
        return context.reshape(tgt_len, bsz, dim), beta

    @staticmethod
    def _context_shares(contexts) -> Tensor:
        """(B, T, n): each input's share of the summed context-vector norms (serial/parallel,
        where the per-input attention distributions each sum to one)."""
        norms = torch.stack([c.float().norm(dim=-1) for c in contexts], -1).transpose(0, 1)
        return norms / norms.sum(-1, keepdim=True).clamp_min(torch.finfo(norms.dtype).tiny)

    @staticmethod
    def _scaled(per_input, input_weights: Tensor) -> Tensor:
        """Concatenate per-input head weights (H, B, T, S_i), each scaled by its input weight;
        inputs with different head counts are first averaged over their heads (H = 1)."""
        if len({w.size(0) for w in per_input}) > 1:
            per_input = [w.mean(0, keepdim=True) for w in per_input]
        return torch.cat([w * input_weights[..., i:i + 1].to(w) for i, w in enumerate(per_input)], dim=-1)
