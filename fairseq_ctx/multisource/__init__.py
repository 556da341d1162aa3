"""Multi-source and multimodal MT: the ``multimodal_translation`` task, the Transformer with a
multi-input decoder (serial, parallel, flat, hierarchical), the RNN variant and the
``imagination`` criterion (Libovický 2019 ch. 5)."""
from fairseq_ctx.multisource import imagination, representations, rnn, task, transformer  # noqa: F401  (registration)
