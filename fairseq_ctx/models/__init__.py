"""Architectures registered with fairseq."""
from fairseq_ctx.models import (  # noqa: F401
    context_baselines,
    hierarchical_attention_decoder,
    hierarchical_context,
    hierarchical_context_representations,
    laser_bilstm,
    multisource_representations,
    multisource_rnn,
    transformer_embedding,
)
