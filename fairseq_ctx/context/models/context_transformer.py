"""The base class of every context_translation model: a fairseq Transformer whose encoder reads the
context batch of the task."""
from dataclasses import dataclass
from typing import Iterable, NamedTuple, Optional, Tuple

from fairseq.models.transformer import TransformerConfig, TransformerModel
from fairseq.tasks import TASK_REGISTRY
from torch import Tensor

from fairseq_ctx.context.sentence_init import SentenceInitConfig, load_sentence_checkpoint
from fairseq_ctx.core.model_options import TransformerOptions


@dataclass
class ContextModelConfig(SentenceInitConfig):
    """A context baseline without options of its own beyond fairseq's Transformer and the
    two-stage initialisation (DAT, HAN)."""


class ContextBatchNeeds(NamedTuple):
    """What a context model needs from the batches of the context_translation task."""
    count_context_tokens: bool = True  # count context tokens in the batch size (off when they are sources too)
    document_span: int = 0  # previous sentences each example's ``document_index`` lists (document vector)


class ContextTransformerModel(TransformerOptions, TransformerModel):
    """Transformer with a context-aware encoder (``encoder_class``, built from the whole
    fairseq namespace) and fairseq's standard decoder (incremental beam search unchanged).
    The context enters as the batch's :class:`~fairseq_ctx.context.data.context_batch.ContextInputs`.
    ``options``: the model's own options (registered flat with the Transformer's,
    :func:`~fairseq_ctx.core.model_options.with_transformer_options`)."""

    task_name = "context_translation"  # checked by the tasks (fairseq_ctx.core.model_family)

    encoder_class = None
    options = ContextModelConfig
    reads_target_context: bool = False  # whether the arch reads --target-context-size > 0 (hce, hmce, ctx_concat)

    @classmethod
    def build_model(cls, args, task):
        if not isinstance(task, TASK_REGISTRY[cls.task_name]):
            arch = getattr(args, "arch", None) or getattr(args, "_name", "?")
            raise ValueError(
                f"--arch {arch} is a context_translation model, but the task is {type(task).__name__}, which "
                f"gives it no context and would translate sentence by sentence; use --task context_translation "
                f"(data directory with {{split}}.docids) or, for raw text, fairseq_ctx.context.hub / "
                f"fairseq-ctx-translate-doc"
            )
        target_context_size = task.cfg.target_context_size
        model = super().build_model(args, task)
        if target_context_size > 0 and cls.reads_target_context:
            model.read_target_context(target_context_size)
        return model

    def load_state_dict(self, state_dict, strict: bool = True, model_cfg=None, args=None):
        """fairseq's; a strict load first checks that the checkpoint and this model agree on
        target-side context (the task's --target-context-size decides it when the model is built)."""
        if strict:
            check_target_context_agrees(self.state_dict().keys(), state_dict.keys())
        return super().load_state_dict(state_dict, strict=strict, model_cfg=model_cfg, args=args)

    def read_target_context(self, size: int) -> None:
        """Give the model what it needs to read the previous ``size`` target sentences
        (``ContextInputs.target_context_tokens`` / ``target_context_index``); only called
        on archs with ``reads_target_context``, which override it."""
        raise NotImplementedError(f"{type(self).__name__} does not read target-side context")

    @classmethod
    def from_pretrained(cls, model_name_or_path: str, checkpoint_file: str = "checkpoint_best.pt",
                        data_name_or_path: Optional[str] = None, **kwargs):
        """A :class:`fairseq_ctx.context.hub.DocumentTranslator` (document-level translation with
        the running context), not fairseq's GeneratorHubInterface, which cannot pass context."""
        from fairseq_ctx.context import hub

        return hub.from_pretrained(model_name_or_path, checkpoint_file, data_name_or_path, **kwargs)

    def load_sentence_checkpoint(self, path: str, languages: Tuple[str, str]) -> None:
        """Stage 2 of the two-stage recipe: initialise from a sentence-level checkpoint
        (:func:`fairseq_ctx.context.sentence_init.load_sentence_checkpoint`)."""
        self.sentence_checkpoint_report = load_sentence_checkpoint(self, path, languages)

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
        **context_entries: Tensor,
    ):
        """``context_entries``: the :class:`~fairseq_ctx.context.data.context_batch.ContextInputs`
        entries of the batch's ``net_input``, handed to the encoder."""
        encoder_out = self.encoder(
            src_tokens, src_lengths=src_lengths, return_all_hiddens=return_all_hiddens, **context_entries
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


# The parameters that --target-context-size > 0 adds (HCE/HMCE's target-side vector, ctx_concat's
# target-context segment vector): present in a checkpoint exactly when it was trained with it.
TARGET_CONTEXT_PARAMETERS = ("encoder.target_context.target_side", "decoder.target_context_segment")


def check_target_context_agrees(model_keys: Iterable[str], checkpoint_keys: Iterable[str]) -> None:
    """A clear error instead of fairseq's missing/unexpected-key one when a checkpoint trained with
    (without) target-side context is loaded by a task with --target-context-size 0 (> 0)."""
    model_reads = any(key in TARGET_CONTEXT_PARAMETERS for key in model_keys)
    checkpoint_reads = any(key in TARGET_CONTEXT_PARAMETERS for key in checkpoint_keys)
    if checkpoint_reads and not model_reads:
        raise ValueError(
            "the checkpoint was trained with target-side context (--target-context-size > 0) but the task has "
            "--target-context-size 0; pass the --target-context-size the model was trained with"
        )
    if model_reads and not checkpoint_reads:
        raise ValueError(
            "the checkpoint was trained without target-side context but the task has --target-context-size > 0; "
            "use --target-context-size 0 with this checkpoint"
        )
