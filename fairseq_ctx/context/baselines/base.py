"""A fairseq Transformer whose encoder reads the shared context batch format."""
from dataclasses import dataclass
from typing import NamedTuple, Optional

from fairseq.dataclass import FairseqDataclass
from fairseq.models.transformer import TransformerConfig, TransformerModel
from torch import Tensor

from fairseq_ctx.core.model_options import TransformerOptions


@dataclass
class ContextModelConfig(FairseqDataclass):
    """A context baseline without options of its own beyond fairseq's Transformer (DAT, HAN)."""


class ContextBatchNeeds(NamedTuple):
    """What a context model needs from the batches of the context_translation task."""
    count_context_tokens: bool = True  # count context tokens in the batch size (off when they are sources too)
    document_span: int = 0  # previous sentences each example's ``document_index`` lists (document vector)


class ContextTransformerModel(TransformerOptions, TransformerModel):
    """Transformer with a context-aware encoder (``encoder_class``, built from the whole
    fairseq namespace) and fairseq's standard decoder (incremental beam search unchanged).
    The context enters through ``net_input["context_tokens"]`` / ``["context_index"]``.
    ``options``: the model's own options (registered flat with the Transformer's,
    :func:`~fairseq_ctx.core.model_options.with_transformer_options`)."""

    task_name = "context_translation"  # checked by the tasks (fairseq_ctx.core.model_family)

    encoder_class = None
    options = ContextModelConfig

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        return cls.encoder_class(TransformerConfig.from_namespace(args), args, src_dict, embed_tokens)

    def configure_context(self, cache: bool, document_window: int) -> ContextBatchNeeds:
        """Called by the task once the model is built: ``cache`` is off under
        ``--no-context-cache``, ``document_window`` is ``--document-window``. The baselines
        have no context cache and need nothing beyond the default batches."""
        return ContextBatchNeeds()

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
        """``context_inputs``: the context entries of the batch's ``net_input``
        (``context_tokens``, ``context_index``, and what a given encoder also reads)."""
        encoder_out = self.encoder(
            src_tokens, src_lengths=src_lengths, return_all_hiddens=return_all_hiddens, **context_inputs
        )
        return self.decoder(
            prev_output_tokens,
            encoder_out=encoder_out,
            features_only=features_only,
            alignment_layer=alignment_layer,
            alignment_heads=alignment_heads,
            src_lengths=src_lengths,
            return_all_hiddens=return_all_hiddens,
        )
