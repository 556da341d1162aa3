"""Architectures registered with fairseq."""
from fairseq_ctx.models import hierarchical_context  # noqa: F401
from fairseq_ctx.models import hierarchical_attention_decoder  # noqa: F401
from fairseq_ctx.models import multisource_rnn  # noqa: F401
