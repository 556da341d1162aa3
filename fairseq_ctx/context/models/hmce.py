"""Architectures ``hce`` and ``hmce``: Transformer with a hierarchical (memory) context encoder."""
from dataclasses import dataclass, field
from typing import List, Optional

import torch
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import base_architecture
from torch import Tensor

from fairseq_ctx.context.data.context_batch import ContextInputs
from fairseq_ctx.context.models.context_transformer import ContextBatchNeeds, ContextTransformerModel
from fairseq_ctx.context.modules.hierarchical_context_encoder import HierarchicalContextEncoder
from fairseq_ctx.context.sentence_init import SentenceInitConfig
from fairseq_ctx.core.length_chunks import SinglePass, in_batch_order, length_chunks, trim_padding, widen
from fairseq_ctx.core.model_options import with_transformer_options


@dataclass
class HierarchicalContextConfig(SentenceInitConfig):
    """Options of HCE/HMCE (Yun 2022, ch. 3) beyond fairseq's Transformer."""
    memory_attention: bool = field(
        default=False,
        metadata={"help": "HMCE: the upper level also attends the source embedding (memory attention, "
                  "eq. 3.17); set by --arch hmce, off for --arch hce"},
    )
    context_encoder_layers: Optional[int] = field(
        default=None,
        metadata={"help": "layers of the lower-level (per context sentence) encoder; default: "
                  "as many as the source encoder (the thesis' StackedTransformerEncoder)"},
    )
    separate_context_encoder: bool = field(
        default=False,
        metadata={"help": "give the lower-level context encoder its own layers instead of sharing "
                  "the source encoder's first --context-encoder-layers layers (the thesis shares)"},
    )
    document_vector: bool = field(
        default=False,
        metadata={"help": "add a document vector as one more context slot (Table 3.3 '+ Document "
                  "vector'): a learned summary of the previous --document-vector-span sentences "
                  "of the document (see DocumentVector)"},
    )
    document_vector_span: int = field(
        default=32,
        metadata={"help": "how many previous sentences of the document the document vector summarises"},
    )
    train_length_chunks: int = field(
        default=3,
        metadata={"help": "training on the CPU only: run each batch as up to this many chunks of "
                  "similar-length sentences (document-window batches mix lengths; each chunk is padded to "
                  "its own longest sentence). Same loss and gradients up to float rounding; 1 = one padded "
                  "pass, which is what a batch on a GPU always gets (there each chunk is another round of "
                  "kernel launches, which costs more than the padding it saves)"},
    )


@register_model("hierarchical_context_transformer", dataclass=with_transformer_options(HierarchicalContextConfig))
class HierarchicalContextTransformer(ContextTransformerModel, SinglePass):
    """Transformer whose encoder output is fused with HCE/HMCE context (Yun 2022, ch. 3).

    The decoder is fairseq's standard Transformer decoder (incremental decoding unchanged);
    the context enters as the batch's :class:`~fairseq_ctx.context.data.context_batch.ContextInputs`.
    """

    encoder_class = HierarchicalContextEncoder
    options = HierarchicalContextConfig
    reads_target_context = True

    def __init__(self, args, encoder, decoder):
        super().__init__(args, encoder, decoder)
        self.train_length_chunks: int = args.train_length_chunks

    def configure_context(self, cache: bool, document_window: int) -> ContextBatchNeeds:
        """The context cache on or off; context tokens are not counted in the batch size when
        they are reused from in-batch sources (document windows); the document vector's span."""
        self.encoder.set_context_cache(cache)
        reused = self.encoder.reuses_source_encodings and document_window > 0
        document_vector = self.encoder.document_vector
        return ContextBatchNeeds(count_context_tokens=not reused,
                                 document_span=document_vector.span if document_vector is not None else 0)

    def read_target_context(self, size: int) -> None:
        """The previous ``size`` target sentences as context slots over the decoder's embeddings."""
        self.encoder.read_target_context(size, self.decoder.embed_tokens)

    def use_single_pass(self) -> None:
        """Turn length chunks off (:class:`SinglePass`)."""
        self.train_length_chunks = 1

    def training_chunks(self, src_tokens: Tensor, prev_output_tokens: Tensor) -> Optional[List[Tensor]]:
        """The batch rows of each length chunk (:func:`length_chunks`), or None for one pass: in
        eval mode, with ``--train-length-chunks 1`` and for a batch that is not on the CPU. Chunks
        trade padded positions for more, smaller operations: on the CPU that pays
        (examples/context_mt/results/speed.md); on a GPU, where small operations cost their launch
        rather than their arithmetic, 3 chunks made a training step run 3.7× as many operations
        (benchmarks/context_op_count.py)."""
        if not self.training or self.train_length_chunks <= 1 or src_tokens.device.type != "cpu":
            return None
        pad = self.decoder.padding_idx
        lengths = torch.maximum(src_tokens.ne(pad).sum(dim=1), prev_output_tokens.ne(pad).sum(dim=1))
        return length_chunks(lengths, self.train_length_chunks)

    def forward(
        self,
        src_tokens: Tensor,
        src_lengths: Tensor,
        prev_output_tokens: Tensor,
        return_all_hiddens: bool = True,
        features_only: bool = False,
        alignment_layer: Optional[int] = None,
        alignment_heads: Optional[int] = None,
        **context_entries: Tensor,
    ):
        """In training on the CPU, a batch of mixed lengths (document windows) runs as length chunks
        (``--train-length-chunks``): each chunk's encoder and decoder pass is cut to its own
        longest sentence; the output and the decoder's ``extra`` (``attn``, ``inner_states``)
        are reassembled in batch order, zeros at padding, so callers see the single pass's
        shapes and, at real positions, its numbers."""
        pad = self.decoder.padding_idx
        chunks = self.training_chunks(src_tokens, prev_output_tokens)
        if chunks is None:
            return super().forward(
                src_tokens, src_lengths, prev_output_tokens, return_all_hiddens=return_all_hiddens,
                features_only=features_only, alignment_layer=alignment_layer, alignment_heads=alignment_heads,
                **context_entries,
            )
        encoder_outs = self.encoder.forward_chunks(src_tokens, src_lengths, chunks, ContextInputs(**context_entries),
                                                   return_all_hiddens=return_all_hiddens)
        target_length, source_length = prev_output_tokens.size(1), src_tokens.size(1)
        outputs, attns, inner_states = [], [], []
        for rows, encoder_out in zip(chunks, encoder_outs):
            tokens, columns = trim_padding(prev_output_tokens.index_select(0, rows), pad)
            source_columns = trim_padding(src_tokens.index_select(0, rows), pad)[1]
            x, extra = self.decoder(
                tokens, encoder_out=encoder_out, features_only=features_only, alignment_layer=alignment_layer,
                alignment_heads=alignment_heads, src_lengths=src_lengths.index_select(0, rows),
                return_all_hiddens=return_all_hiddens,
            )
            outputs.append(widen(x, columns, target_length, 1))
            attn = extra["attn"][0]
            attns.append(None if attn is None else
                         widen(widen(attn, columns, target_length, 1), source_columns, source_length, 2))
            inner_states.append([widen(state, columns, target_length, 0) for state in extra["inner_states"]])
        attn = None if any(a is None for a in attns) else in_batch_order(attns, chunks)
        states = [in_batch_order(list(layer), chunks, dim=1) for layer in zip(*inner_states)]
        return in_batch_order(outputs, chunks), {"attn": [attn], "inner_states": states}


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
