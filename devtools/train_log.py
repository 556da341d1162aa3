"""Validation curves, batch sizes, training time and machines read back from a ``fairseq-train`` text log
(``--log-format simple``, with or without logging prefixes), for results tables."""
import re
from datetime import datetime
from typing import Dict, List, Optional

VALIDATION = "valid on 'valid' subset"
STRETCH_START = "| $ fairseq-train "  # what a recipe logs before each fairseq-train (recipe_tools.run)
MACHINE_LINE = "| machine: "  # what it logs right after: the machine that stretch trains on
NOT_RECORDED = "not recorded"
TIMESTAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) \|")


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


def sentences_per_update(log_text: str) -> Optional[float]:
    """Mean sentences per update (``bsz``) over the training epochs summarised in the log, each
    epoch weighted by its updates (a resumed epoch counts from where it resumed); None if the
    log has no epoch summary."""
    summary = re.compile(r"epoch \d+ \| loss .*\| bsz ([\d.]+) \| num_updates (\d+)")
    epochs: Dict[int, float] = {}
    for line in log_text.splitlines():
        found = summary.search(line)
        if found and VALIDATION not in line:
            epochs[int(found.group(2))] = float(found.group(1))
    if not epochs:
        return None
    ends = sorted(epochs)
    weights = [end - start for start, end in zip([0, *ends[:-1]], ends)]
    return sum(epochs[end] * weight for end, weight in zip(ends, weights)) / sum(weights)


def training_stretches(log_text: str) -> List[List[str]]:
    """The timestamped lines of each training stretch in a recipe's log (an interrupted and resumed
    run has several), each stretch from its ``$ fairseq-train`` line on; a log without such lines
    is one stretch."""
    stretches: List[List[str]] = []
    for line in log_text.splitlines():
        if TIMESTAMP.match(line) is None:
            continue
        if STRETCH_START in line or not stretches:
            stretches.append([])
        stretches[-1].append(line)
    return stretches


def training_seconds(log_text: str) -> float:
    """Wall seconds of every training stretch (:func:`training_stretches`): each from its first to
    its last timestamped line, so a stretch cut off counts up to its last logged line."""
    def at(line: str) -> float:
        stamp = TIMESTAMP.match(line)
        return datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S").timestamp() + int(stamp.group(2)) / 1000

    return sum(at(lines[-1]) - at(lines[0]) for lines in training_stretches(log_text))


def training_machines(log_text: str) -> List[str]:
    """The machines the training stretches (:func:`training_stretches`) ran on, each once, in the
    order first used: a stretch's ``machine:`` line, logged right after its ``$ fairseq-train``
    line; a stretch without one (logged before machines were recorded) counts as :data:`NOT_RECORDED`."""
    machines: List[str] = []
    for lines in training_stretches(log_text):
        machine = next((line.split(MACHINE_LINE, 1)[1].strip() for line in lines if MACHINE_LINE in line),
                       NOT_RECORDED)
        if machine not in machines:
            machines.append(machine)
    return machines
