"""Building blocks shared by the fairseq-ctx models."""
from fairseq_ctx.modules.attentive_pooling import AttentivePooling
from fairseq_ctx.modules.gated_sum import GatedSum

__all__ = ["AttentivePooling", "GatedSum"]
from fairseq_ctx.modules.context_attention import ContextAttention  # noqa: E402

__all__ += ["ContextAttention"]
