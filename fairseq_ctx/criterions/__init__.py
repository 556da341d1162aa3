"""Criterions registered with fairseq (the context models train with fairseq's own
``label_smoothed_cross_entropy``)."""
from fairseq_ctx.criterions import distance_constraint  # noqa: F401,E402
from fairseq_ctx.criterions import cka_alignment, head_diversity  # noqa: F401,E402
