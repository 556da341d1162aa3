"""fairseq-ctx: a fairseq plugin (``--user-dir fairseq_ctx``) registering context-aware MT
tasks, architectures and criterions. Importing it registers everything and allow-lists the
classes fairseq checkpoints need for torch's weights-only loading."""
from fairseq_ctx import checkpoint_safety

checkpoint_safety.allow_fairseq_checkpoints()

from fairseq_ctx import criterions, models, tasks  # noqa: E402,F401  (registration side effects)

__version__ = "0.1.0"
