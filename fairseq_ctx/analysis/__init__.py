"""CKA toolkit: differentiable CKA/HSIC and SVCCA, attention-head taps, representations by name,
and the ``cka_alignment`` and ``head_diversity`` criterions (Yun 2022 ch. 2)."""

# The modules that register tasks, architectures and criterions with fairseq, imported by
# fairseq_ctx.core.registration (where fairseq is imported, or by fairseq_ctx.register()).
REGISTERING_MODULES = ("cka_alignment", "head_diversity")
