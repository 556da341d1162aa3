"""Decoding with the model's own previous translations as target context (``--target-context-size``).

At inference a model trained on reference target context (Voita et al. (2019)) reads what it
produced itself for the previous sentences of the document. A batch may hold sentences whose
previous sentence is in the same batch (they wait for it: the batch is decoded in dependency
levels) or in an earlier batch (its best hypothesis is kept, by sentence key, until every later
sentence that reads it has been decoded). Any batch order is therefore correct as long as no
sentence is decoded before its previous ones; an order that breaks this is a clear error.

Such batches carry :class:`~fairseq_ctx.context.data.context_batch.TargetContextKeys`: one key per
sentence, the keys of its previous target sentences and how many later sentences read it. The task
decodes them level by level: :meth:`OwnTranslations.levels`, then for each level
:meth:`OwnTranslations.level_batch` and, with the hypotheses, :meth:`OwnTranslations.keep`.
"""
from typing import Callable, Dict, List, Optional, Sequence

import torch

from fairseq_ctx.context.data.context_batch import ContextInputs, TargetContextKeys, collate_target_context

SENTENCE_ROW_KEYS = ("src_tokens", "src_lengths", "prev_output_tokens")  # net_input entries with one row per sentence


class MissingTargetContextError(RuntimeError):
    """A sentence needs the translation of a previous sentence that was not decoded before it."""


class OwnTranslations:
    """The best hypotheses of previous sentences, kept until no later sentence needs them."""

    def __init__(self, sentence_of: Callable[[Sequence[int]], torch.Tensor], size: int, pad_index: int,
                 left_pad_source: bool):
        self.sentence_of = sentence_of
        self.size = size
        self.pad_index = pad_index
        self.left_pad_source = left_pad_source
        self.hypotheses: Dict[int, torch.Tensor] = {}
        self.users: Dict[int, int] = {}

    def discard(self, keys: Sequence[int]) -> None:
        """Forget the hypotheses of ``keys`` (their document ended)."""
        for key in keys:
            self.hypotheses.pop(key, None)
            self.users.pop(key, None)

    def expect(self, key: int, readers: int) -> None:
        """``key`` (if kept) will be read by exactly ``readers`` more sentences; forgotten at 0."""
        if readers <= 0:
            self.discard([key])
        elif key in self.users:
            self.users[key] = readers

    def levels(self, sample: Dict) -> List[List[int]]:
        """The rows of ``sample`` by dependency level: level 0 reads only sentences decoded in earlier
        batches, level k + 1 also rows of level k. A previous sentence that is neither decoded nor
        in the batch is a :class:`MissingTargetContextError`."""
        rows = TargetContextKeys.of(sample).rows()
        row_of = {row.key: number for number, row in enumerate(rows)}
        for row in rows:
            for key in row.previous:
                if key not in row_of and key not in self.hypotheses:
                    raise MissingTargetContextError(_missing_message(row.key, key))
        levels = _levels([row.previous for row in rows], row_of)
        return [[row for row, value in enumerate(levels) if value == level] for level in range(max(levels, default=-1) + 1)]

    def level_batch(self, sample: Dict, rows: List[int]) -> Dict:
        """The sub-batch of ``rows`` (one level of :meth:`levels`), its target context the kept
        hypotheses of the rows' previous sentences."""
        part = select_rows(sample, rows, self.left_pad_source)
        previous = [row.previous for row in TargetContextKeys.of(part).rows()]
        tokens, index = collate_target_context(
            previous, lambda key: self.sentence_of(self.hypotheses[key].tolist()), self.size, self.pad_index)
        device = part["net_input"]["src_tokens"].device
        context = ContextInputs.of(part["net_input"]).with_target_context(tokens.to(device), index.to(device))
        part["net_input"].update(context.net_input())
        return part

    def keep(self, part: Dict, hypotheses: List) -> None:
        """After decoding ``part`` (a :meth:`level_batch`): keep the best hypothesis of every row a
        later sentence reads, and forget those of previous sentences no sentence reads any more."""
        for row, hypothesis in zip(TargetContextKeys.of(part).rows(), hypotheses):
            self._consume(row.previous)
            if row.readers > 0:
                self.hypotheses[row.key] = hypothesis[0]["tokens"].detach().cpu()
                self.users[row.key] = row.readers

    def _consume(self, needed: Sequence[int]) -> None:
        for key in needed:
            if key in self.users:
                self.users[key] -= 1
                if self.users[key] <= 0:
                    self.discard([key])


def _missing_message(key: int, needed: int) -> str:
    return (f"context_translation: sentence {key} reads the translation of sentence {needed} of its document as "
            f"target context (--target-context-size > 0), but sentence {needed} was neither translated before "
            f"it nor is in its batch. Decode every document whole and in one run: do not split the set with "
            f"--num-shards/--shard-id or several workers, and do not drop sentences "
            f"(--skip-invalid-size-inputs-valid-test; raise --max-source-positions/--max-target-positions "
            f"instead)")


def _levels(previous: List[List[int]], row_of: Dict[int, int]) -> List[int]:
    """Level of each row: 0 when none of its previous sentences is in the batch, else one more
    than the highest level among them."""
    levels: List[Optional[int]] = [None] * len(previous)

    def level(row: int, seen: frozenset) -> int:
        if levels[row] is None:
            inside = [row_of[key] for key in previous[row] if key in row_of]
            if any(other in seen for other in inside):
                raise MissingTargetContextError(f"context_translation: the previous sentences of sentence row {row} "
                                                f"form a cycle; target_context_ids must point to earlier sentences")
            levels[row] = 1 + max((level(other, seen | {row}) for other in inside), default=-1)
        return levels[row]

    return [level(row, frozenset()) for row in range(len(previous))]


def select_rows(sample: Dict, rows: List[int], left_pad_source: bool) -> Dict:
    """The sub-batch of ``sample`` made of ``rows`` (in that order): per-sentence entries selected,
    the source padding cut to the longest selected sentence, the context sentences kept
    (:meth:`ContextInputs.select_rows`)."""
    net_input = sample["net_input"]
    device = net_input["src_tokens"].device
    index = torch.tensor(rows, dtype=torch.long, device=device)
    part: Dict = {name: value[index] if name in SENTENCE_ROW_KEYS and torch.is_tensor(value) else value
                  for name, value in net_input.items()}
    part.update(ContextInputs.of(net_input).select_rows(index, net_input["src_tokens"].size(0)).net_input())
    width = int(part["src_lengths"].max()) if rows else 0
    part["src_tokens"] = part["src_tokens"][:, -width:] if left_pad_source else part["src_tokens"][:, :width]
    selected = {**sample, "net_input": part, "nsentences": len(rows)}
    for name in ("id", "target"):
        if torch.is_tensor(sample.get(name)):
            selected[name] = sample[name][index.to(sample[name].device)]
    keys = TargetContextKeys.of(sample)
    if keys is not None:
        selected.update(keys.select_rows(index).entries())
    return selected
