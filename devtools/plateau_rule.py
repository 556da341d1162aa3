"""The convergence rules of the real-data recipes, fixed before their runs: a validation curve has
plateaued when the best value of the last fifth of its updates improves on the best value before
by less than a set amount, or, judged on window means rather than maxima, when the mean of the
last fifth improves on the mean of the fifth before by less than it. A recipe either trains in chunks until the rule finds a plateau (or the
budget ends), resumable chunk by chunk, or judges the curve of a fixed budget with it."""
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple, Union


@dataclass(frozen=True)
class Judgement:
    """What the rule says about a curve: whether it could judge it, whether it found a plateau, and why."""

    judged: bool
    plateaued: bool
    text: str

    def as_dict(self) -> Dict[str, Union[bool, str]]:
        return asdict(self)


@dataclass(frozen=True)
class PlateauRule:
    """A curve of ``metric`` (validations at equal intervals) has converged when the ``statistic``
    of its last ``tail`` of the updates improves on that of the updates before by less than
    ``min_gain`` (absolute), judged from the ``min_points``-th validation on. ``statistic`` "best":
    the best value of the tail against the best of all updates before; "mean": the mean of the
    validations in the tail against the mean of those in the ``tail`` before it (means of windows,
    not maxima: one lucky validation does not decide)."""

    metric: str
    min_gain: float
    higher_is_better: bool
    tail: float = 0.2
    min_points: int = 5
    statistic: str = "best"

    def describe(self, every: Union[int, str], budget: int, stops: bool) -> str:
        """The rule in words; ``every``: the validation interval in updates, or in words (e.g.
        "5 epochs"); ``stops``: training ends at the plateau, else the rule judges a fixed budget."""
        interval = f"{every} updates" if isinstance(every, int) else every
        end = (f"training stops there or at the budget of {budget} updates" if stops
               else f"judged on the curve of a fixed budget of {budget} updates")
        if self.statistic == "mean":
            compared = ("the mean of the validations in the last fifth of the updates improves on the mean of those "
                        "in the fifth before")
        else:
            best = "highest" if self.higher_is_better else "lowest"
            compared = f"the {best} value of the last fifth of the updates improves on the {best} value before"
        return (f"{self.metric}, validated every {interval}, has plateaued when {compared} by less than "
                f"{self.min_gain:g} (absolute), judged from the {self.min_points}th validation on; {end}")

    def judge(self, curve: Sequence[Sequence[float]]) -> Judgement:
        """``curve``: [(updates, value), …] in update order."""
        if len(curve) < self.min_points:
            return Judgement(False, False, f"not judged: {len(curve)} validation(s), fewer than the "
                                           f"{self.min_points} the rule needs")
        last = int(curve[-1][0])
        width = round(self.tail * last)
        start = last - width
        first = start - width if self.statistic == "mean" else -1
        before = [value for updates, value in curve if first < updates <= start]
        tail = [value for updates, value in curve if updates > start]
        if not before:
            where = f"in updates {first + 1}–{start}" if self.statistic == "mean" else "before the last fifth"
            return Judgement(False, False, f"not judged: no validation {where} of the updates")
        if self.statistic == "mean":
            earlier, later = sum(before) / len(before), sum(tail) / len(tail)
            described = (f"mean {earlier:.2f} of {len(before)} validation(s) in updates {first + 1}–{start}, mean "
                         f"{later:.2f} of {len(tail)} in {start + 1}–{last}")
        else:
            best = max if self.higher_is_better else min
            earlier, later = best(before), best(tail)
            described = f"best {earlier:.2f} up to update {start}, best {later:.2f} in updates {start + 1}–{last}"
        gain = (later - earlier) * (1 if self.higher_is_better else -1)
        plateaued = gain < self.min_gain
        state = (f"plateau (gain under {self.min_gain:g})" if plateaued
                 else f"still improving (gain of {self.min_gain:g} or more)")
        return Judgement(True, plateaued, f"{described} (gain {gain:+.2f}): {state}")


BLEU_PLATEAU = PlateauRule("greedy validation BLEU", min_gain=0.5, higher_is_better=True)
"""The rule of the translation recipes whose tested model is the best checkpoint (CKA controls,
SCAT stage 1, the multi-source tables before 2026-12): 0.5 BLEU."""

AVERAGED_BLEU_PLATEAU = PlateauRule("validation BLEU (beam search) of the averaged last epoch checkpoints",
                                    min_gain=0.5, higher_is_better=True, statistic="mean")
"""The rule of the recipes that test the average of the last epoch checkpoints (multi-source): 0.5 BLEU."""


def train_until_plateau(rule: PlateauRule, every: int, budget: int, curve: List[Tuple[int, float]],
                        train_to: Callable[[int], None], validate: Callable[[int], float],
                        record: Callable[[List[Tuple[int, float]]], None]) -> str:
    """Train in chunks of ``every`` updates up to ``budget``, validating after each, until ``rule``
    finds a plateau; ``curve`` holds the validations of earlier sessions (resumed, not redone).
    ``train_to(updates)`` trains up to that update, ``validate(updates)`` returns the value there,
    ``record(curve)`` saves the curve after each validation. Returns "plateau" or "budget"."""
    while True:
        if rule.judge(curve).plateaued:
            return "plateau"
        done = curve[-1][0] if curve else 0
        if done >= budget:
            return "budget"
        target = min(done + every, budget)
        train_to(target)
        curve.append((target, validate(target)))
        record(curve)


def checkpoint_updates(path: Path) -> int:
    """The updates a fairseq checkpoint was saved at (0 when there is none), read as every checkpoint
    of the package is: weights-only, with fairseq_ctx's allow-list (a pickle that would run code is
    not loaded). A file that cannot be read so is an error naming it."""
    if not path.exists():
        return 0
    from fairseq_ctx.core.checkpoint_loading import training_progress
    from fairseq_ctx.core.fixes.checkpoint_allow_list import allow_fairseq_checkpoints

    allow_fairseq_checkpoints()
    progress = training_progress(str(path))
    if progress is None:
        raise ValueError(f"cannot read the training progress of {path}: the file is damaged, not a fairseq "
                         f"checkpoint, or holds objects outside the weights-only allow-list; delete it (or its "
                         f"run's directory) to train that run again")
    return progress[0]
