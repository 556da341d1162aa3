"""Context-aware baselines of Yun (2022) §3.2.1 (TwC, DAT, HAN, DCT), all reading the shared
context batch format of ``context_translation``."""
from fairseq_ctx.context.baselines import concat, dat, dct, han  # noqa: F401  (registration)
