"""Context-aware MT: the ``context_translation`` task, HCE/HMCE (Yun 2022 ch. 3), the baselines
TwC, DAT, HAN and DCT, and the hub interface for document translation."""
from fairseq_ctx.context import baselines, hmce, representations, task  # noqa: F401  (registration)
