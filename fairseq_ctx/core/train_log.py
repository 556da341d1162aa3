"""Validation curves read back from a ``fairseq-train`` log (``--log-format simple`` or
``json``-free text lines), for results tables and convergence plots."""
import re
from typing import Dict, List

VALIDATION = "valid on 'valid' subset"


def validation_curve(log_text: str, metric: str) -> List[List[float]]:
    """``[[updates, value], …]`` of ``metric`` (e.g. ``loss``, ``bleu``) at every validation of
    the log, in update order; an update validated again (training resumed from an earlier
    checkpoint) keeps its last value."""
    value = re.compile(rf"\| {re.escape(metric)} ([-\d.]+)")
    updates = re.compile(r"\| num_updates (\d+)")
    curve: Dict[int, float] = {}
    for line in log_text.splitlines():
        if VALIDATION in line:
            found, at = value.search(line), updates.search(line)
            if found and at:
                curve[int(at.group(1))] = float(found.group(1))
    return [[step, number] for step, number in sorted(curve.items())]
