"""Multi-source and multimodal MT: the ``multimodal_translation`` task, the Transformer with a
multi-input decoder (serial, parallel, flat, hierarchical), the RNN variant and the
``imagination`` criterion (Libovický 2019 ch. 5)."""

# The modules that register tasks, architectures and criterions with fairseq, imported by
# fairseq_ctx.core.registration (where fairseq is imported, or by fairseq_ctx.register()).
REGISTERING_MODULES = ("imagination", "multimodal_translation_task", "multisource_representations", "rnn", "transformer")
