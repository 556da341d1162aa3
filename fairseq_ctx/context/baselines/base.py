"""A fairseq Transformer whose encoder reads the shared context batch format."""
from typing import Optional

from fairseq.dataclass.utils import gen_parser_from_dataclass
from fairseq.models.transformer import TransformerConfig, TransformerModel
from torch import Tensor


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

    @classmethod
    def build_model(cls, args, task):
        from fairseq_ctx.context.task import ContextTranslationTask

        if not isinstance(task, ContextTranslationTask):
            arch = getattr(args, "arch", None) or getattr(args, "_name", "?")
            raise ValueError(
                f"--arch {arch} is a context_translation model, but the task is {type(task).__name__}, which "
                f"gives it no context and would translate sentence by sentence; use --task context_translation "
                f"(data directory with {{split}}.docids) or, for raw text, fairseq_ctx.context.hub / "
                f"fairseq-ctx-translate-doc"
            )
        return super().build_model(args, task)

    @classmethod
    def from_pretrained(cls, model_name_or_path: str, checkpoint_file: str = "checkpoint_best.pt",
                        data_name_or_path: Optional[str] = None, **kwargs):
        """A :class:`fairseq_ctx.context.hub.DocumentTranslator` (document-level translation with
        the running context), not fairseq's GeneratorHubInterface, which cannot pass context."""
        from fairseq_ctx.context import hub

        return hub.from_pretrained(model_name_or_path, checkpoint_file, data_name_or_path, **kwargs)

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
