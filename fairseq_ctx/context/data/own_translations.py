"""Decoding with the model's own previous translations as target context (``--target-context-size``).

At inference a model trained on reference target context (Voita et al. (2019)) reads what it
produced itself for the previous sentences of the document. A batch may hold sentences whose
previous sentence is in the same batch (they wait for it: the batch is decoded in dependency
levels) or in an earlier batch (its best hypothesis is kept, by sentence key, until every later
sentence that reads it has been decoded). Any batch order is therefore correct as long as no
sentence is decoded before its previous ones; an order that breaks this is a clear error.

The batches carry, outside ``net_input``: ``target_context_key`` (B,) one key per sentence,
``target_context_ids`` (B, M) the keys of its previous target sentences, nearest first (-1 when
absent), and ``target_context_users`` (B,) how many later sentences read it.
"""
from typing import Callable, Dict, List, Optional, Sequence

import torch

from fairseq_ctx.context.data.target_context import collate_target_context

ROW_KEYS = ("src_tokens", "src_lengths", "prev_output_tokens", "context_index", "document_index")
OWN_OUTPUT_KEYS = ("target_context_key", "target_context_ids", "target_context_users")  # the batch keys described above
TOP_ROW_KEYS = ("id", "target", *OWN_OUTPUT_KEYS)

Run = Callable[[Dict, Optional[torch.Tensor], Optional[torch.Tensor]], List]


def own_output_keys(keys: Sequence[int], previous: Sequence[Sequence[int]], readers: Sequence[int],
                    size: int) -> Dict[str, torch.Tensor]:
    """The batch entries :data:`OWN_OUTPUT_KEYS` of rows with these ``keys``, the keys of their
    previous target sentences (nearest first, at most ``size``) and how many later sentences
    read each row."""
    return {
        "target_context_key": torch.tensor(list(keys), dtype=torch.long),
        "target_context_ids": torch.tensor([list(p) + [-1] * (size - len(p)) for p in previous],
                                           dtype=torch.long).view(len(keys), size),
        "target_context_users": torch.tensor(list(readers), dtype=torch.long),
    }


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

    def generate(self, sample: Dict, run: Run, prefix_tokens: Optional[torch.Tensor] = None,
                 constraints: Optional[torch.Tensor] = None) -> List:
        """``run(sample, prefix_tokens, constraints)`` (the task's inference step) on every
        dependency level of ``sample`` with the target context replaced by the model's own
        previous output; the hypotheses of all rows, in the rows' order."""
        keys = sample["target_context_key"].tolist()
        previous = [[k for k in row if k >= 0] for row in sample["target_context_ids"].tolist()]
        users = sample["target_context_users"].tolist()
        row_of = {key: row for row, key in enumerate(keys)}
        for row, needed in enumerate(previous):
            for key in needed:
                if key not in row_of and key not in self.hypotheses:
                    raise MissingTargetContextError(_missing_message(keys[row], key))
        levels = _levels(previous, row_of)
        out: List = [None] * len(keys)
        for level in range(max(levels, default=-1) + 1):
            rows = [row for row, value in enumerate(levels) if value == level]
            part = self._with_own_context(select_rows(sample, rows, self.left_pad_source),
                                          [previous[row] for row in rows])
            hypos = run(part, _rows_of(prefix_tokens, rows), _rows_of(constraints, rows))
            for row, hypo in zip(rows, hypos):
                out[row] = hypo
                self._consume(previous[row])
                if users[row] > 0:
                    self.hypotheses[keys[row]] = hypo[0]["tokens"].detach().cpu()
                    self.users[keys[row]] = users[row]
        return out

    def _with_own_context(self, sample: Dict, previous: List[List[int]]) -> Dict:
        device = sample["net_input"]["src_tokens"].device
        tokens, index = collate_target_context(
            previous, lambda key: self.sentence_of(self.hypotheses[key].tolist()), self.size, self.pad_index)
        sample["net_input"]["target_context_tokens"] = tokens.to(device)
        sample["net_input"]["target_context_index"] = index.to(device)
        return sample

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


def _rows_of(value: Optional[torch.Tensor], rows: List[int]) -> Optional[torch.Tensor]:
    if value is None:
        return None
    return value[torch.tensor(rows, dtype=torch.long, device=value.device)]


def select_rows(sample: Dict, rows: List[int], left_pad_source: bool) -> Dict:
    """The sub-batch of ``sample`` made of ``rows`` (in that order): per-row entries selected,
    the source padding cut to the longest selected sentence, the shared context sentences kept
    (``context_source_row`` renumbered)."""
    net_input = sample["net_input"]
    device = net_input["src_tokens"].device
    index = torch.tensor(rows, dtype=torch.long, device=device)
    part: Dict = {}
    for name, value in net_input.items():
        if name in ROW_KEYS and torch.is_tensor(value):
            part[name] = value[index]
        elif name == "context_source_row":
            renumber = torch.full((net_input["src_tokens"].size(0) + 1,), -1, dtype=torch.long, device=device)
            renumber[index] = torch.arange(len(rows), device=device)
            part[name] = renumber[value]  # -1 picks the last entry, which stays -1
        else:
            part[name] = value
    width = int(part["src_lengths"].max()) if rows else 0
    part["src_tokens"] = part["src_tokens"][:, -width:] if left_pad_source else part["src_tokens"][:, :width]
    selected = {**sample, "net_input": part, "nsentences": len(rows)}
    for name in TOP_ROW_KEYS:
        if torch.is_tensor(sample.get(name)):
            selected[name] = sample[name][index.to(sample[name].device)]
    return selected
