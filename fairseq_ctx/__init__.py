"""fairseq-ctx: a fairseq plugin (``--user-dir fairseq_ctx``) for context-aware MT, multi-source
MT, multilingual document embeddings and CKA analysis. One subpackage per family
(``context``, ``multisource``, ``embedding``, ``analysis``) over a small shared ``core``.
Importing the package registers every task, architecture and criterion, and allow-lists the
classes fairseq checkpoints need for torch's weights-only loading, and makes fairseq's checkpoint
writes atomic and its checkpoint reads name a damaged file (``core.fairseq_checkpoint_hooks``)."""
from fairseq_ctx.core import checkpoint_safety, fairseq_checkpoint_hooks

checkpoint_safety.allow_fairseq_checkpoints()
fairseq_checkpoint_hooks.install()

from fairseq_ctx import analysis, context, embedding, multisource  # noqa: E402,F401  (registration)

__version__ = "0.1.0"
