"""The context of a ``context_translation`` batch as a type, and the one way it is built.

:class:`ContextInputs` is what every context model reads: the previous source sentences of each
example (Yun 2022, ch. 3) and, with ``--target-context-size M``, its previous M target sentences
(Voita et al. (2019); Müller et al. (2018); Bawden et al. (2018)). It travels in the batch's
``net_input`` as one tensor entry per field, so that fairseq's trainer, generator, scorer and
data-parallel wrapper move and pass it like any other entry; a context encoder gets the entries
as keyword arguments and reads them back with ``ContextInputs(**entries)``.

- ``context_tokens`` (U, Lc): every distinct source context sentence of the batch once,
  ``[<boc>] + tokens`` ending in ``</s>`` (:func:`context_sentence`), right-padded;
- ``context_index`` (B, N): the row of ``context_tokens`` for slot n of example b (n = 0: the
  nearest previous sentence), -1 for an empty slot;
- ``context_source_row`` (U,): the row of ``src_tokens`` holding the same (untruncated) sentence as
  context row u, -1 when it is not a source of the batch (HCE/HMCE reuse those encodings);
- ``document_index`` (B, D): rows of ``context_tokens`` holding the previous D sentences of each
  example's document (the document vector of HCE/HMCE), -1 when absent;
- ``target_context_tokens`` (V, Lt) and ``target_context_index`` (B, M): the same for the previous
  target sentences (target dictionary); V may be 0 (shape (0, 1) of pad).

:class:`TargetContextKeys` is what decoding with the model's own previous translations reads
(:mod:`~fairseq_ctx.context.data.own_translations`); it travels next to ``net_input``, never into the
model. :class:`SentenceTable` builds the ``*_tokens`` / ``*_index`` pairs of both sides.
"""
import dataclasses
from dataclasses import dataclass
from typing import Callable, Dict, Hashable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import torch
from fairseq.data import data_utils
from torch import Tensor


@dataclass
class ContextInputs:
    """The context entries of a batch's ``net_input`` (see the module's description); ``None``
    where the batch has no such entry (a sentence-level batch has none)."""

    context_tokens: Optional[Tensor] = None
    context_index: Optional[Tensor] = None
    context_source_row: Optional[Tensor] = None
    document_index: Optional[Tensor] = None
    target_context_tokens: Optional[Tensor] = None
    target_context_index: Optional[Tensor] = None

    @classmethod
    def of(cls, net_input: Mapping[str, object]) -> "ContextInputs":
        """The context entries of ``net_input``; its other entries (``src_tokens``, ...) are left out."""
        return cls(**{name: net_input[name] for name in NET_INPUT_NAMES if name in net_input})

    def net_input(self) -> Dict[str, Tensor]:
        """The entries to put in a batch's ``net_input``."""
        return {name: getattr(self, name) for name in NET_INPUT_NAMES if getattr(self, name) is not None}

    @property
    def has_context(self) -> bool:
        """Whether the batch carries context entries (source or target side)."""
        return self.context_index is not None or self.target_context_index is not None

    def with_target_context(self, tokens: Tensor, index: Tensor) -> "ContextInputs":
        return dataclasses.replace(self, target_context_tokens=tokens, target_context_index=index)

    def masked(self) -> "ContextInputs":
        """The same batch with every source and target context slot empty."""
        masked = dataclasses.replace(self)
        if self.context_index is not None:
            masked.context_index, masked.context_tokens = torch.full_like(self.context_index, -1), self.context_tokens[:0]
        if self.target_context_index is not None:
            masked.target_context_index = torch.full_like(self.target_context_index, -1)
            masked.target_context_tokens = self.target_context_tokens[:0]
        return masked

    def select_rows(self, rows: Tensor, batch_size: int) -> "ContextInputs":
        """The context of the examples ``rows`` (of a batch of ``batch_size``), in that order: the
        per-example index entries selected, the sentences kept, ``context_source_row`` renumbered."""
        selected = dataclasses.replace(self)
        for name in ("context_index", "document_index", "target_context_index"):
            if getattr(self, name) is not None:
                setattr(selected, name, getattr(self, name)[rows])
        if self.context_source_row is not None:
            renumber = torch.full((batch_size + 1,), -1, dtype=torch.long, device=rows.device)
            renumber[rows] = torch.arange(rows.numel(), device=rows.device)
            selected.context_source_row = renumber[self.context_source_row]  # -1 picks the last entry, which stays -1
        return selected

    def to(self, device: torch.device) -> "ContextInputs":
        return ContextInputs(**{name: value.to(device) for name, value in self.net_input().items()})


NET_INPUT_NAMES = tuple(field.name for field in dataclasses.fields(ContextInputs))


class TargetContextKey(NamedTuple):
    """One sentence decoded with the model's own previous translations as target context."""

    key: int  # the sentence's own key
    previous: Sequence[int]  # the keys of its previous target sentences, nearest first
    readers: int  # how many later sentences read its translation


@dataclass
class TargetContextKeys:
    """The batch entries ``target_context_key`` (B,), ``target_context_ids`` (B, M) (-1 when
    absent) and ``target_context_users`` (B,): :class:`TargetContextKey` of every row."""

    target_context_key: Tensor
    target_context_ids: Tensor
    target_context_users: Tensor

    @classmethod
    def of_rows(cls, rows: Sequence[TargetContextKey], size: int) -> "TargetContextKeys":
        """The entries of ``rows`` (each with at most ``size`` previous keys)."""
        return cls(
            target_context_key=torch.tensor([row.key for row in rows], dtype=torch.long),
            target_context_ids=torch.tensor([list(row.previous) + [-1] * (size - len(row.previous)) for row in rows],
                                            dtype=torch.long).view(len(rows), size),
            target_context_users=torch.tensor([row.readers for row in rows], dtype=torch.long),
        )

    @classmethod
    def of(cls, sample: Mapping[str, object]) -> Optional["TargetContextKeys"]:
        """The keys of ``sample``, None when it has none (its target context is given, not decoded)."""
        if "target_context_key" not in sample:
            return None
        return cls(**{name: sample[name] for name in TARGET_CONTEXT_KEY_NAMES})

    def rows(self) -> List[TargetContextKey]:
        previous = [[key for key in row if key >= 0] for row in self.target_context_ids.tolist()]
        return [TargetContextKey(*row) for row in zip(self.target_context_key.tolist(), previous,
                                                        self.target_context_users.tolist())]

    def entries(self) -> Dict[str, Tensor]:
        """The entries to put in the batch, next to ``net_input``."""
        return {name: getattr(self, name) for name in TARGET_CONTEXT_KEY_NAMES}

    def select_rows(self, rows: Tensor) -> "TargetContextKeys":
        return TargetContextKeys(**{name: value[rows.to(value.device)] for name, value in self.entries().items()})


TARGET_CONTEXT_KEY_NAMES = tuple(field.name for field in dataclasses.fields(TargetContextKeys))


def context_sentence(tokens: Tensor, boc_index: int, eos_index: int, max_tokens: int) -> Tensor:
    """A context sentence of either side as the batches carry it: ``[<boc>] + tokens`` (``tokens``
    end in ``</s>``), cut to ``max_tokens`` keeping a final ``</s>``."""
    sentence = torch.cat([tokens.new_tensor([boc_index]), tokens.long()])
    if sentence.numel() > max_tokens:
        sentence = torch.cat([sentence[: max_tokens - 1], sentence.new_tensor([eos_index])])
    return sentence


class SentenceTable:
    """The distinct context sentences of one side of a batch, each stored once in the order of
    first use, and the slots that point at them: a ``*_tokens`` / ``*_index`` pair."""

    def __init__(self) -> None:
        self.rows: Dict[Hashable, int] = {}

    def slots(self, keys_per_example: Sequence[Sequence[Hashable]], width: int) -> Tensor:
        """(B, ``width``) rows of the sentences ``keys_per_example[b]`` (nearest first; those beyond
        ``width`` left out), -1 for an empty slot."""
        index = torch.full((len(keys_per_example), width), -1, dtype=torch.long)
        for example, keys in enumerate(keys_per_example):
            for slot, key in enumerate(list(keys)[:width]):
                index[example, slot] = self.rows.setdefault(key, len(self.rows))
        return index

    def keys(self) -> List[Hashable]:
        return list(self.rows)

    def tokens(self, sentence_of: Callable[[Hashable], Tensor], pad_index: int) -> Tensor:
        """(U, L) the sentences (``sentence_of(key)``, collated by :func:`context_sentence`),
        right-padded; (0, 1) of pad for none."""
        return collate_sentences([sentence_of(key) for key in self.rows], pad_index)


def collate_sentences(sentences: Sequence[Tensor], pad_index: int) -> Tensor:
    """Context sentences right-padded into one (U, L) tensor; (0, 1) of pad for none."""
    if not sentences:
        return torch.full((0, 1), pad_index, dtype=torch.long)
    return data_utils.collate_tokens(list(sentences), pad_index, left_pad=False)


def collate_target_context(keys_per_example: Sequence[Sequence[Hashable]], sentence_of: Callable[[Hashable], Tensor],
                           size: int, pad_index: int) -> Tuple[Tensor, Tensor]:
    """``(target_context_tokens, target_context_index)`` for examples whose previous target
    sentences are ``keys_per_example[b]`` (nearest first, the first ``size`` used); a key in
    several examples is stored once."""
    table = SentenceTable()
    index = table.slots(keys_per_example, size)
    return table.tokens(sentence_of, pad_index), index
