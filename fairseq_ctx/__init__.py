"""fairseq-ctx: a fairseq plugin (``--user-dir fairseq_ctx``) for context-aware MT, multi-source
MT, multilingual document embeddings and CKA analysis. One subpackage per family
(``context``, ``multisource``, ``embedding``, ``analysis``) over a small shared ``core``.

Importing the package is cheap: as soon as fairseq is imported (at once when it already is),
every task, architecture and criterion is registered (:mod:`fairseq_ctx.core.registration`), and
nothing else changes. The plugin's changes to fairseq's behaviour are listed fixes, installed when
one of its tasks is built or its tools read a checkpoint (:mod:`fairseq_ctx.core.fixes`,
docs/fixes.md)."""
from fairseq_ctx.core.registration import register_with_fairseq
from fairseq_ctx.version import __version__  # noqa: F401

register_with_fairseq()
