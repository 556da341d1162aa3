"""Multilingual document embedding: the ``multilingual_embedding`` task, T-MDE (_P, _F), cT-MDE,
the LASER-style BiLSTM and the ``distance_constraint`` criterion (Li 2021 ch. 4)."""
from fairseq_ctx.embedding import distance_constraint, laser_bilstm, task, tmde  # noqa: F401  (registration)
