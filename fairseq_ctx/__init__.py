"""fairseq-ctx: a fairseq plugin (``--user-dir fairseq_ctx``) for context-aware MT, multi-source
MT, multilingual document embeddings and CKA analysis. One subpackage per family
(``context``, ``multisource``, ``embedding``, ``analysis``) over a small shared ``core``.

Importing the package is cheap: as soon as fairseq is imported (at once when it already is),
every task, architecture and criterion is registered, the classes fairseq checkpoints need for
torch's weights-only loading are allow-listed, and fairseq's checkpoint writes become atomic and
its checkpoint reads name a damaged file; see :mod:`fairseq_ctx.core.registration`. fairseq's
import-time note "Please install tensorboardX" is kept out (:mod:`fairseq_ctx.core.tensorboard_note`)."""
from fairseq_ctx.core.registration import register_with_fairseq
from fairseq_ctx.core.tensorboard_note import quiet_tensorboard_note
from fairseq_ctx.version import __version__  # noqa: F401

quiet_tensorboard_note()
register_with_fairseq()
