"""The convergence rule of the real-data recipes, fixed before their runs: a validation curve has
plateaued when the best value of the last fifth of its updates improves on the best value before
by less than a set amount. A recipe either trains in chunks until the rule finds a plateau (or the
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
    """A curve of ``metric`` (validations at equal intervals) has converged when the best value of
    its last ``tail`` of the updates improves on the best value before by less than ``min_gain``
    (absolute), judged from the ``min_points``-th validation on."""

    metric: str
    min_gain: float
    higher_is_better: bool
    tail: float = 0.2
    min_points: int = 5

    def describe(self, every: int, budget: int, stops: bool) -> str:
        """The rule in words; ``stops``: training ends at the plateau, else the rule judges a fixed budget."""
        best = "highest" if self.higher_is_better else "lowest"
        end = (f"training stops there or at the budget of {budget} updates" if stops
               else f"judged on the curve of a fixed budget of {budget} updates")
        return (f"{self.metric}, validated every {every} updates, has plateaued when the {best} value of the last "
                f"fifth of the updates improves on the {best} value before by less than {self.min_gain:g} (absolute), "
                f"judged from the {self.min_points}th validation on; {end}")

    def judge(self, curve: Sequence[Sequence[float]]) -> Judgement:
        """``curve``: [(updates, value), …] in update order."""
        if len(curve) < self.min_points:
            return Judgement(False, False, f"not judged: {len(curve)} validation(s), fewer than the "
                                           f"{self.min_points} the rule needs")
        last = int(curve[-1][0])
        start = last - round(self.tail * last)
        before = [value for updates, value in curve if updates <= start]
        tail = [value for updates, value in curve if updates > start]
        if not before:
            return Judgement(False, False, "not judged: every validation lies in the last fifth of the updates")
        best = max if self.higher_is_better else min
        gain = (best(tail) - best(before)) * (1 if self.higher_is_better else -1)
        plateaued = gain < self.min_gain
        state = (f"plateau (gain under {self.min_gain:g})" if plateaued
                 else f"still improving (gain of {self.min_gain:g} or more)")
        return Judgement(True, plateaued, f"best {best(before):.2f} up to update {start}, best {best(tail):.2f} in "
                                          f"updates {start + 1}–{last} (gain {gain:+.2f}): {state}")


BLEU_PLATEAU = PlateauRule("greedy validation BLEU", min_gain=0.5, higher_is_better=True)
"""The rule of the translation recipes (multi-source, CKA controls, SCAT stage 1): 0.5 BLEU."""


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
    from fairseq_ctx.core.checkpoint_safety import allow_fairseq_checkpoints

    allow_fairseq_checkpoints()
    progress = training_progress(str(path))
    if progress is None:
        raise ValueError(f"cannot read the training progress of {path}: the file is damaged, not a fairseq "
                         f"checkpoint, or holds objects outside the weights-only allow-list; delete it (or its "
                         f"run's directory) to train that run again")
    return progress[0]
