"""Logging of the extra loss terms our criterions add to fairseq's metrics."""
import math
from typing import Dict, List, Sequence

from fairseq import metrics


def log_terms_per(logging_outputs: List[Dict], keys: Sequence[str], weight_key: str, round_to: int) -> None:
    """Log each of ``keys`` (summed over the workers' logging outputs) divided by the summed
    ``weight_key`` (e.g. sample_size or nsentences); keys no output carries are skipped."""
    weight = sum(log.get(weight_key, 0) for log in logging_outputs)
    if weight <= 0:
        return
    for key in keys:
        if any(key in log for log in logging_outputs):
            total = sum(float(log.get(key, 0)) for log in logging_outputs)
            metrics.log_scalar(key, total / weight, weight, round=round_to)


def log_cross_entropy(logging_outputs: List[Dict]) -> None:
    """The label-smoothed CE part alone (``ce_loss``, in bits per sample-size unit like ``loss``)."""
    sample_size = sum(log.get("sample_size", 0) for log in logging_outputs)
    if sample_size > 0:
        ce = sum(float(log.get("ce_loss", 0)) for log in logging_outputs)
        metrics.log_scalar("ce_loss", ce / sample_size / math.log(2), sample_size, round=3)
