"""CKA toolkit: differentiable CKA/HSIC and SVCCA, attention-head taps, representations by name,
and the ``cka_alignment`` and ``head_diversity`` criterions (Yun 2022 ch. 2)."""
from fairseq_ctx.analysis import cka_alignment, head_diversity  # noqa: F401  (registration)
