"""The base of every context encoder (HCE/HMCE, TwC, DAT, HAN, DCT) and the plumbing the baselines share."""
import copy
from typing import Dict, List, Optional, Tuple

import torch
from fairseq.models.transformer import TransformerConfig, TransformerEncoderBase
from torch import Tensor

from fairseq_ctx.context.data.context_batch import ContextInputs
from fairseq_ctx.context.modules.empty_context import context_or_placeholder


class ContextEncoderBase(TransformerEncoderBase):
    """A fairseq Transformer encoder that also reads the context of a ``context_translation``
    batch: ``forward`` takes the batch's ``net_input`` as fairseq passes it and hands its context
    entries on as one :class:`ContextInputs` to :meth:`forward_with_context`.

    The baselines implement :meth:`encode` over the source context slots; this class embeds
    tokens and packs fairseq's encoder-output dictionary, so beam search, ``reorder_encoder_out``
    and the decoder work unchanged. HCE/HMCE override :meth:`forward_with_context` as a whole."""

    def embed(self, tokens: Tensor, token_embeddings: Optional[Tensor] = None) -> Tuple[Tensor, Tensor, Tensor]:
        """(B, T) tokens → x (T, B, C) with zeros at padding, padding mask (B, T), embedding (B, T, C)."""
        padding = tokens.eq(self.padding_idx)
        x, embedding = self.forward_embedding(tokens, token_embeddings)
        x = x * (1 - padding.unsqueeze(-1).type_as(x))
        return x.transpose(0, 1), padding, embedding

    def encode(self, src_tokens: Tensor, context_tokens: Tensor, context_index: Tensor,
               token_embeddings: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        """Returns encoder states (T, B, C), their padding mask (B, T), the embedding (B, T, C)
        and the tokens (B, T) the states belong to."""
        raise NotImplementedError

    def forward(
        self,
        src_tokens: Tensor,
        src_lengths: Optional[Tensor] = None,
        return_all_hiddens: bool = False,
        token_embeddings: Optional[Tensor] = None,
        **context_entries: Tensor,
    ) -> Dict[str, List[Tensor]]:
        """``context_entries``: the :class:`ContextInputs` entries of the batch's ``net_input``."""
        return self.forward_with_context(src_tokens, src_lengths, ContextInputs(**context_entries), return_all_hiddens,
                                         token_embeddings)

    def forward_with_context(
        self,
        src_tokens: Tensor,
        src_lengths: Optional[Tensor],
        context: ContextInputs,
        return_all_hiddens: bool = False,
        token_embeddings: Optional[Tensor] = None,
    ) -> Dict[str, List[Tensor]]:
        """The encoder output of :meth:`encode` over the source context slots (a batch without them:
        every slot empty)."""
        context_tokens, context_index = context_or_placeholder(src_tokens, context.context_tokens, context.context_index,
                                                               self.dictionary.eos())
        x, padding, embedding, tokens = self.encode(src_tokens, context_tokens, context_index, token_embeddings)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        return {
            "encoder_out": [x],
            "encoder_padding_mask": [padding],
            "encoder_embedding": [embedding],
            "encoder_states": [],
            "fc_results": [],
            "src_tokens": [],
            "src_lengths": [tokens.ne(self.padding_idx).sum(dim=1, dtype=torch.int32).reshape(-1, 1)],
        }


def encoder_sized_decoder_config(cfg: TransformerConfig) -> TransformerConfig:
    """A decoder-layer config whose sizes are the encoder's, so that fairseq's
    TransformerDecoderLayerBase (self-attention, attention over other states, FFN) serves inside an
    encoder: HMCE's upper level with memory attention, DCT's context-source layers."""
    layer_cfg = copy.deepcopy(cfg)
    layer_cfg.decoder.embed_dim = cfg.encoder.embed_dim
    layer_cfg.decoder.ffn_embed_dim = cfg.encoder.ffn_embed_dim
    layer_cfg.decoder.attention_heads = cfg.encoder.attention_heads
    layer_cfg.decoder.normalize_before = cfg.encoder.normalize_before
    layer_cfg.cross_self_attention = False
    return layer_cfg
