"""Architectures ``hce`` and ``hmce``: Transformer with a hierarchical (memory) context encoder."""
import logging
from typing import Optional, Tuple

import torch
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import TransformerConfig, base_architecture
from torch import Tensor

from fairseq_ctx.core.checkpoint_loading import CheckpointError, check_task, read_checkpoint
from fairseq_ctx.context.baselines.base import ContextBatchNeeds, ContextTransformerModel
from fairseq_ctx.context.embedding_rows import check_overlap, checkpoint_dictionaries, embedding_side, shared_rows
from fairseq_ctx.context.modules.hierarchical_context_encoder import (
    HierarchicalContextConfig,
    HierarchicalContextEncoder,
)
from fairseq_ctx.core.model_options import with_transformer_options
from fairseq_ctx.core.length_chunks import SinglePass, in_batch_order, length_chunks, trim_padding, widen

logger = logging.getLogger(__name__)
SENTENCE_TASKS = ("translation", "context_translation")


@register_model("hierarchical_context_transformer", dataclass=with_transformer_options(HierarchicalContextConfig))
class HierarchicalContextTransformer(ContextTransformerModel, SinglePass):
    """Transformer whose encoder output is fused with HCE/HMCE context (Yun 2022, ch. 3).

    The decoder is fairseq's standard Transformer decoder (incremental decoding unchanged);
    the context enters through ``net_input["context_tokens"]`` / ``["context_index"]``.
    """

    options = HierarchicalContextConfig

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

    def use_single_pass(self) -> None:
        """Turn length chunks off (:class:`SinglePass`)."""
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
        longest sentence; the output and the decoder's ``extra`` (``attn``, ``inner_states``)
        are reassembled in batch order, zeros at padding, so callers see the single pass's
        shapes and, at real positions, its numbers."""
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
        encoder_outs = self.encoder.forward_chunks(src_tokens, src_lengths, chunks,
                                                   return_all_hiddens=return_all_hiddens, **context_inputs)
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

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        return HierarchicalContextEncoder(
            TransformerConfig.from_namespace(args),
            HierarchicalContextConfig.from_namespace(args),
            src_dict,
            embed_tokens,
            memory_attention=args.memory_attention,
        )

    def load_sentence_checkpoint(self, path: str, languages: Tuple[str, str]) -> None:
        """Copy every tensor of a sentence-level checkpoint whose name exists here.

        Embedding and output-projection rows are copied by symbol through the checkpoint's own
        dictionaries (:mod:`fairseq_ctx.context.embedding_rows`): rows of symbols both
        dictionaries have are copied, the rest (``<boc>``, words the checkpoint never saw) and
        all context parameters keep their fresh initialisation; a dictionary sharing fewer than
        half of this model's symbols is refused. What was (partially) loaded and what stayed new
        is logged, with the row counts. A file that cannot be read, or a checkpoint whose shared
        tensors have other shapes (another model size or family), is a :class:`CheckpointError`
        naming the file and the fix. ``languages``: this model's (source, target) pair, the
        checkpoint's when it recorded none.
        """
        purpose = "--pretrained-sentence-checkpoint"
        checkpoint = read_checkpoint(path, purpose)
        check_task(checkpoint, path, SENTENCE_TASKS, purpose)
        state = checkpoint["model"]
        own = self.state_dict()
        old_dicts, old_files = checkpoint_dictionaries(checkpoint, path, purpose, languages)
        new_dicts = {"source": self.encoder.dictionary, "target": self.decoder.dictionary}
        embeddings = {name: side for name in state if name in own and (side := embedding_side(name))}
        for name, side in embeddings.items():
            check_overlap(side, new_dicts[side], old_dicts[side], state[name].size(0), old_files[side], path, purpose)
        loaded, partial, mismatched, rows = [], [], [], {}
        with torch.no_grad():
            for name, value in state.items():
                if name not in own:
                    continue
                target = own[name]
                if name in embeddings and target.shape[1:] == value.shape[1:]:
                    side = embeddings[name]
                    new_index, old_index = shared_rows(new_dicts[side], old_dicts[side], value.size(0))
                    target.index_copy_(0, new_index, value.index_select(0, old_index).to(target.dtype))
                    rows[name] = (len(new_index), target.size(0), value.size(0))
                    (loaded if len(new_index) == target.size(0) == value.size(0) else partial).append(name)
                elif target.shape == value.shape:
                    target.copy_(value)
                    loaded.append(name)
                else:
                    mismatched.append(name)
        if mismatched or not loaded:
            raise CheckpointError(sentence_checkpoint_mismatch(path, purpose, state, own, mismatched))
        fresh = sorted(set(own) - set(loaded) - set(partial))
        logger.info(
            "loaded %d tensors from sentence-level checkpoint %s; embedding rows copied by symbol (copied of "
            "model rows, checkpoint rows): %s; %d tensors newly initialised: %s",
            len(loaded) + len(partial), path, ", ".join(f"{n} {c} of {m} ({o})" for n, (c, m, o) in rows.items()),
            len(fresh), fresh,
        )
        self.sentence_checkpoint_report = {"loaded": loaded, "partial": partial, "fresh": fresh, "rows": rows}


def sentence_checkpoint_mismatch(path: str, purpose: str, state, own, mismatched) -> str:
    if not mismatched:
        return (f"{purpose}: {path} shares no tensor name with this model ({len(state)} tensors, e.g. "
                f"{sorted(state)[:3]}); give the checkpoint of a sentence-level transformer (fairseq-train --arch "
                f"transformer, or --task context_translation --context-size 0)")
    shown = ", ".join(f"{name} {tuple(state[name].shape)} vs {tuple(own[name].shape)}" for name in mismatched[:3])
    return (f"{purpose}: {path} does not fit this model: {len(mismatched)} tensors differ in shape "
            f"(checkpoint vs model: {shown}); train the sentence-level model with the same sizes "
            f"(--encoder-embed-dim, --encoder-ffn-embed-dim, --encoder-attention-heads, decoder likewise) or "
            f"pass those sizes here")


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
