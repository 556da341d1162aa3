"""fairseq-ctx: a fairseq plugin (``--user-dir fairseq_ctx``) for context-aware MT, multi-source
MT, multilingual document embeddings and CKA analysis. One subpackage per family
(``context``, ``multisource``, ``embedding``, ``analysis``) over a small shared ``core``.

Importing the package is cheap: as soon as fairseq is imported (at once when it already is),
every task, architecture and criterion is registered (:mod:`fairseq_ctx.core.registration`) and
the plugin's changes to fairseq's behaviour are installed, each a listed fix that
``FAIRSEQ_CTX_FIXES_OFF`` can switch off (:mod:`fairseq_ctx.core.fixes`, docs/fixes.md)."""
from fairseq_ctx.core.fixes import install_fixes
from fairseq_ctx.core.registration import register_with_fairseq
from fairseq_ctx.version import __version__  # noqa: F401

install_fixes(["tensorboard-note"])  # before fairseq is imported: its note comes at import
register_with_fairseq()
