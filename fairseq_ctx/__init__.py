"""fairseq-ctx: a fairseq plugin (``--user-dir fairseq_ctx``) for context-aware MT, multi-source
MT, multilingual document embeddings and CKA analysis. One subpackage per family
(``context``, ``multisource``, ``embedding``, ``analysis``) over a small shared ``core``.

Importing the package is cheap and changes nothing: where fairseq is already imported (as with
``--user-dir``) every task, architecture and criterion is registered at once, otherwise when
:func:`register` is called (:mod:`fairseq_ctx.core.registration`). The plugin's changes to fairseq's behaviour are listed fixes, installed when
one of its tasks is built or its tools read a checkpoint (:mod:`fairseq_ctx.core.fixes`,
docs/fixes.md)."""
from fairseq_ctx.core.registration import register, register_if_fairseq_is_imported
from fairseq_ctx.version import __version__  # noqa: F401

__all__ = ["register", "__version__"]

register_if_fairseq_is_imported()
