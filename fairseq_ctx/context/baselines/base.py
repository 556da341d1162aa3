"""A fairseq Transformer whose encoder reads the shared context batch format."""
from typing import Optional

from fairseq.dataclass.utils import gen_parser_from_dataclass
from fairseq.models.transformer import TransformerConfig, TransformerModel
from torch import Tensor

from fairseq_ctx.context.sentence_init import SentenceInitConfig, load_sentence_checkpoint


class ContextTransformerModel(TransformerModel):
    """Transformer with a context-aware encoder (``encoder_class``, built from the whole
    fairseq namespace) and fairseq's standard decoder (incremental beam search unchanged).
    The context enters through ``net_input["context_tokens"]`` / ``["context_index"]``."""

    task_name = "context_translation"  # checked by the tasks (fairseq_ctx.core.model_family)

    encoder_class = None
    config_class = None  # a FairseqDataclass of the model's own options, added to the parser

    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        if cls.config_class is not None:
            gen_parser_from_dataclass(parser, cls.config_class(), delete_default=True)
        gen_parser_from_dataclass(parser, SentenceInitConfig(), delete_default=True)

    def load_sentence_checkpoint(self, path: str) -> None:
        """Stage 2 of the two-stage recipe: initialise from a sentence-level checkpoint
        (:func:`fairseq_ctx.context.sentence_init.load_sentence_checkpoint`)."""
        self.sentence_checkpoint_report = load_sentence_checkpoint(self, path)

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        return cls.encoder_class(TransformerConfig.from_namespace(args), args, src_dict, embed_tokens)

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
