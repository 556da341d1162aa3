"""Architectures ``hce`` and ``hmce``: Transformer with a hierarchical (memory) context encoder."""
from typing import Optional

import torch
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import TransformerConfig, base_architecture
from torch import Tensor

from fairseq_ctx.context.baselines.base import ContextTransformerModel
from fairseq_ctx.context.modules.hierarchical_context_encoder import (
    HierarchicalContextConfig,
    HierarchicalContextEncoder,
)
from fairseq_ctx.core.length_chunks import length_chunks, trim_padding


@register_model("hierarchical_context_transformer")
class HierarchicalContextTransformer(ContextTransformerModel):
    """Transformer whose encoder output is fused with HCE/HMCE context (Yun 2022, ch. 3).

    The decoder is fairseq's standard Transformer decoder (incremental decoding unchanged);
    the context enters through ``net_input["context_tokens"]`` / ``["context_index"]``.
    """

    config_class = HierarchicalContextConfig

    def __init__(self, args, encoder, decoder):
        super().__init__(args, encoder, decoder)
        self.train_length_chunks: int = getattr(args, "train_length_chunks", 3)

    def use_single_pass(self) -> None:
        """Turn length chunks off, for forward hooks that expect one call per batch."""
        self.train_length_chunks = 1

    def forward(
        self,
        src_tokens: Tensor,
        src_lengths: Tensor,
        prev_output_tokens: Tensor,
        return_all_hiddens: bool = True,
        features_only: bool = False,
        alignment_layer: Optional[int] = None,
        alignment_heads: Optional[int] = None,
        **context_inputs: Optional[Tensor],
    ):
        """In training, a batch of mixed lengths (document windows) runs as length chunks
        (``--train-length-chunks``): each chunk's encoder and decoder pass is cut to its own
        longest sentence; the logits are reassembled in batch order, zeros at padding."""
        pad = self.decoder.padding_idx
        chunks = None
        if self.training and self.train_length_chunks > 1:
            lengths = torch.maximum(src_tokens.ne(pad).sum(dim=1), prev_output_tokens.ne(pad).sum(dim=1))
            chunks = length_chunks(lengths, self.train_length_chunks)
        if chunks is None:
            return super().forward(
                src_tokens, src_lengths, prev_output_tokens, return_all_hiddens=return_all_hiddens,
                features_only=features_only, alignment_layer=alignment_layer, alignment_heads=alignment_heads,
                **context_inputs,
            )
        encoder_outs = self.encoder.forward_chunks(src_tokens, src_lengths, chunks, **context_inputs)
        pieces = []
        for rows, encoder_out in zip(chunks, encoder_outs):
            tokens, columns = trim_padding(prev_output_tokens.index_select(0, rows), pad)
            x, _ = self.decoder(
                tokens, encoder_out=encoder_out, features_only=features_only, alignment_layer=alignment_layer,
                alignment_heads=alignment_heads, src_lengths=src_lengths.index_select(0, rows),
            )
            pieces.append(x.new_zeros(rows.numel(), prev_output_tokens.size(1), x.size(-1)).index_copy(1, columns, x))
        order = torch.argsort(torch.cat(chunks))
        return torch.cat(pieces).index_select(0, order), {"attn": [None], "inner_states": None}

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        ctx_cfg = HierarchicalContextConfig(
            context_encoder_layers=getattr(args, "context_encoder_layers", None),
            separate_context_encoder=getattr(args, "separate_context_encoder", False),
            document_vector=getattr(args, "document_vector", False),
            document_vector_span=getattr(args, "document_vector_span", 32),
        )
        return HierarchicalContextEncoder(
            TransformerConfig.from_namespace(args),
            ctx_cfg,
            src_dict,
            embed_tokens,
            memory_attention=args.memory_attention,
        )


@register_model_architecture("hierarchical_context_transformer", "hce")
def hce_architecture(args):
    """HCE: hierarchical context encoder; Transformer-base sizes (512, 6+6, 8 heads, dropout 0.1)."""
    args.memory_attention = False
    base_architecture(args)


@register_model_architecture("hierarchical_context_transformer", "hmce")
def hmce_architecture(args):
    """HMCE: HCE + memory attention over the source embedding; thesis sizes by default."""
    args.memory_attention = True
    base_architecture(args)
