"""Tasks registered with fairseq."""
from fairseq_ctx.tasks import context_translation  # noqa: F401
from fairseq_ctx.tasks import multimodal_translation  # noqa: F401
