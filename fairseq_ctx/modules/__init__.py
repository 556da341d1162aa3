"""Building blocks shared by the fairseq-ctx models."""
from fairseq_ctx.modules.attentive_pooling import AttentivePooling
from fairseq_ctx.modules.context_attention import ContextAttention
from fairseq_ctx.modules.factored_attention import factored_attention, factored_attention_is_cheaper
from fairseq_ctx.modules.feature_projection import FeatureProjection
from fairseq_ctx.modules.gated_sum import GatedSum
from fairseq_ctx.modules.multi_input_attention import MultiInputAttention
from fairseq_ctx.modules.multi_source_bahdanau import MultiSourceBahdanauAttention

__all__ = [
    "AttentivePooling",
    "ContextAttention",
    "FeatureProjection",
    "factored_attention",
    "factored_attention_is_cheaper",
    "GatedSum",
    "MultiInputAttention",
    "MultiSourceBahdanauAttention",
]
