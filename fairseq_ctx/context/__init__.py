"""Context-aware MT: the ``context_translation`` task, HCE/HMCE (Yun 2022 ch. 3), the baselines
TwC, DAT, HAN and DCT, and the hub interface for document translation."""

# The modules that register tasks, architectures and criterions with fairseq, imported by
# fairseq_ctx.core.registration (where fairseq is imported, or by fairseq_ctx.register()).
REGISTERING_MODULES = ("context_translation_task", "hmce_representations", "context_discounted_loss", "models")
