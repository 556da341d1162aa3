"""Multilingual document embedding: the ``multilingual_embedding`` task, T-MDE (_P, _F), cT-MDE,
the LASER-style BiLSTM and the ``distance_constraint`` criterion (Li 2021 ch. 4)."""

# The modules that register tasks, architectures and criterions with fairseq, imported by
# fairseq_ctx.core.registration (where fairseq is imported, or by fairseq_ctx.register()).
REGISTERING_MODULES = ("distance_constraint", "laser_bilstm", "multilingual_embedding_task", "tmde")
