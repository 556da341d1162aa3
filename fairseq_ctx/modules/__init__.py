"""Building blocks shared by the fairseq-ctx models."""
from fairseq_ctx.modules.attentive_pooling import AttentivePooling
from fairseq_ctx.modules.gated_sum import GatedSum

__all__ = ["AttentivePooling", "GatedSum"]
from fairseq_ctx.modules.multi_input_attention import MultiInputAttention  # noqa: E402
from fairseq_ctx.modules.feature_projection import FeatureProjection  # noqa: E402
from fairseq_ctx.modules.multi_source_bahdanau import MultiSourceBahdanauAttention  # noqa: E402
__all__ += ["FeatureProjection", "MultiInputAttention", "MultiSourceBahdanauAttention"]
