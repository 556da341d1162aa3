"""Criterions registered with fairseq (the context models train with fairseq's own
``label_smoothed_cross_entropy``)."""
from fairseq_ctx.criterions import cka_alignment, distance_constraint, head_diversity, imagination  # noqa: F401
