"""Tasks registered with fairseq."""
from fairseq_ctx.tasks import context_translation  # noqa: F401
