"""Architectures registered with fairseq."""
from fairseq_ctx.models import hierarchical_context  # noqa: F401
from fairseq_ctx.models import laser_bilstm, transformer_embedding  # noqa: F401,E402
from fairseq_ctx.models import hierarchical_context_representations  # noqa: F401
from fairseq_ctx.models import context_baselines  # noqa: F401
