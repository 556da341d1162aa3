"""Architectures registered with fairseq."""
from fairseq_ctx.models import hierarchical_context  # noqa: F401
