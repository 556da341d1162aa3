"""Logging of the extra loss terms our criterions add to fairseq's metrics."""
import math
from typing import Dict, List, Optional, Sequence

from fairseq import metrics
from torch import Tensor


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


def skippable_term(name: str, value: Optional[Tensor], sample_size: float, skipped: int) -> Dict:
    """Logging-output entries of a loss term that a degenerate batch can leave out (``value``
    None; e.g. HSIC/CKA without two vectors to compare): ``name`` (value × sample size),
    ``{name}_size`` (the sample size it was computed on) and ``{name}_skipped`` (how many
    evaluations of the term were left out). The keys are the same whether or not the term was
    computed, because fairseq sums the logging outputs of all workers key by key."""
    computed = value is not None
    return {
        name: value.data * sample_size if computed else 0.0,
        f"{name}_size": sample_size if computed else 0,
        f"{name}_skipped": skipped,
    }


def log_skippable_terms(logging_outputs: List[Dict], keys: Sequence[str], round_to: int) -> None:
    """Each term of ``keys`` (entries of :func:`skippable_term`) per sample-size unit over the
    batches that computed it, and ``{term}_skipped`` summed over the logged batches."""
    for key in keys:
        if not any(key in log for log in logging_outputs):
            continue
        weight = sum(float(log.get(f"{key}_size", 0)) for log in logging_outputs)
        if weight > 0:
            total = sum(float(log.get(key, 0)) for log in logging_outputs)
            metrics.log_scalar(key, total / weight, weight, round=round_to)
        metrics.log_scalar_sum(f"{key}_skipped", sum(int(log.get(f"{key}_skipped", 0)) for log in logging_outputs))
