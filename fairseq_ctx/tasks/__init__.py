"""Tasks registered with fairseq."""
from fairseq_ctx.tasks import context_translation, multilingual_embedding, multimodal_translation  # noqa: F401
