"""Sentences with an explicitly given context, collated into the batch format of
``context_translation`` (for inference on raw text: the hub, fairseq-interactive)."""
from collections import deque
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
from fairseq.data import Dictionary, LanguagePairDataset

from fairseq_ctx.context.data.context_batch import (
    ContextInputs,
    TargetContextKey,
    TargetContextKeys,
    collate_target_context,
    context_sentence,
)
from fairseq_ctx.context.data.context_dataset import ContextTranslationDataset
from fairseq_ctx.context.data.own_translations import OwnTranslations
from fairseq_ctx.core.language_pair_wrapper import LanguagePairWrapper


@dataclass
class Example:
    """One sentence to translate or score: source tokens, its context sentences (nearest
    first, source side, without ``<boc>``), optionally a target, and its previous target
    sentences (nearest first, target dictionary, ending in ``</s>``, without ``<boc>``; read by
    models built with ``--target-context-size`` M > 0, Voita et al. (2019)). A sentence decoded
    with the model's own previous translations as target context has a ``target_context_key``
    instead (:class:`~fairseq_ctx.context.data.own_translations.OwnTranslations` fills the target
    context when it is decoded)."""

    source: torch.Tensor
    context: List[torch.Tensor] = field(default_factory=list)
    target: Optional[torch.Tensor] = None
    target_context: List[torch.Tensor] = field(default_factory=list)
    target_context_key: Optional[TargetContextKey] = None


@dataclass
class ExampleCollater:
    """Collates :class:`Example` lists with the task's own dataset classes, so a batch is
    exactly what :class:`ContextTranslationDataset` gives for the same sentences and context
    (Yun 2022 §3: the previous ``context_size`` source sentences of the document); with
    ``target_context_size`` M > 0 also the first M sentences of each ``Example.target_context``
    (equal sentences stored once) and the examples' ``target_context_key``."""

    src_dict: Dictionary
    tgt_dict: Dictionary
    context_size: int
    boc_index: int
    max_context_tokens: int
    left_pad_source: bool = True
    left_pad_target: bool = False
    document_span: int = 0
    target_context_size: int = 0
    target_boc_index: int = -1

    @property
    def reads_documents(self) -> bool:
        """Whether batches carry context entries (source or target side)."""
        return self.context_size > 0 or self.target_context_size > 0

    @property
    def history_size(self) -> int:
        """Previous sentences an example needs: its context, and with a document vector
        (``document_span`` M > 0) the previous M sentences of the document."""
        return max(self.context_size, self.document_span) if self.context_size > 0 else 0

    def __call__(self, examples: Sequence[Example]) -> Dict:
        """The batch of ``examples``; ``sample["id"][row]`` is the position of the example in
        ``examples`` (rows are sorted by length, as fairseq's collater does)."""
        sources, targets, codes, wanted = [], [], [], []
        with_target = examples[0].target is not None
        for number, example in enumerate(examples):
            context = example.context[: self.history_size]
            for sentence in [*reversed(context), example.source]:
                sources.append(sentence)
                targets.append(example.target if with_target else None)
                codes.append(number)
            wanted.append(len(sources) - 1)
        eos = torch.tensor([self.tgt_dict.eos()])
        tgt = [t if t is not None else eos for t in targets] if with_target else None
        pair = LanguagePairDataset(
            sources, np.array([len(s) for s in sources]), self.src_dict,
            tgt, np.array([len(t) for t in tgt]) if tgt else None, self.tgt_dict,
            left_pad_source=self.left_pad_source, left_pad_target=self.left_pad_target,
        )
        dataset = pair
        if self.reads_documents:
            dataset = ContextTranslationDataset(pair, np.array(codes), context_size=self.context_size,
                                                boc_index=self.boc_index, max_context_tokens=self.max_context_tokens)
            dataset.document_span = self.document_span
        sample = dataset.collater([dataset[index] for index in wanted])
        position = {index: number for number, index in enumerate(wanted)}
        sample["id"] = torch.tensor([position[i] for i in sample["id"].tolist()])
        if self.target_context_size > 0:
            self._add_target_context(sample, [examples[n] for n in sample["id"].tolist()])
        return sample

    def _add_target_context(self, sample: Dict, rows: List[Example]) -> None:
        """The examples' own target context, and the keys of those decoded with the model's own
        previous translations."""
        previous = [[tuple(t.tolist()) for t in example.target_context] for example in rows]
        context = ContextInputs.of(sample["net_input"]).with_target_context(*collate_target_context(
            previous, self.target_context_sentence, self.target_context_size, self.tgt_dict.pad()))
        sample["net_input"].update(context.net_input())
        keys = [example.target_context_key for example in rows]
        if None not in keys:
            sample.update(TargetContextKeys.of_rows(keys, self.target_context_size).entries())

    def own_translations(self) -> OwnTranslations:
        """An empty store of previous hypotheses collated as this collater's target context."""
        return OwnTranslations(self.target_context_sentence, self.target_context_size, self.tgt_dict.pad(),
                               self.left_pad_source)

    def target_context_sentence(self, tokens: Sequence[int]) -> torch.Tensor:
        """A previous target sentence (token ids ending in ``</s>``) as it is collated."""
        return context_sentence(torch.tensor(tokens, dtype=torch.long), self.target_boc_index,
                                self.tgt_dict.eos(), self.max_context_tokens)


class RunningContext:
    """The running context of streamed text: the previous ``history_size`` source sentences of
    the current document, nearest first; a blank line ends the document (nothing crosses it)."""

    def __init__(self, history_size: int):
        self.history_size = history_size
        self.history: deque = deque(maxlen=max(history_size, 1))

    def next(self, source: Optional[torch.Tensor]) -> Optional[List[torch.Tensor]]:
        """The context of the next line's ``source`` (then remembered), or ``None`` for a blank
        line (``source=None``), which starts a new document."""
        if source is None:
            self.history.clear()
            return None
        context = list(reversed(self.history)) if self.history_size else []
        self.history.append(source)
        return context


class ExampleDataset(LanguagePairWrapper):
    """The non-blank lines of one fairseq-interactive buffer with their running context. Sizes,
    ordering and filtering are the source sentences' (``pair``); a batch is collated by
    ``collate`` from the examples, ``id`` = the line's number in the buffer (blank lines have
    no example, so they get no output), and kept in ``collated`` until the document state of
    fairseq-interactive takes it (fairseq-interactive passes on only its sources). With ``positions``
    (each line's position in its document) the lines are ordered by (position, length), so
    that a line is decoded after the previous lines of its document (target context).
    The token budget counts each line's context sentences and ``target_context_tokens`` (the
    tokens its target context is expected to have, when that context is made later).
    ``first_line``: the lines of the input read before this buffer (errors name input lines)."""

    EXTRA_TOKENS = "context (previous lines of its document, and their translations)"
    SMALLER_EXTRA = ", or lower --context-size / --target-context-size / --max-context-tokens"

    def __init__(self, pair: LanguagePairDataset, examples: Sequence[Example], line_numbers: Sequence[int],
                 collate: ExampleCollater, positions: Optional[Sequence[int]] = None,
                 target_context_tokens: Optional[Sequence[int]] = None, first_line: int = 0):
        super().__init__(pair)
        self.examples = list(examples)
        self.line_numbers = list(line_numbers)
        self.first_line = first_line
        self.collate = collate
        self.collated: deque = deque()
        self.positions = None if positions is None else np.asarray(positions, dtype=np.int64)
        limit = collate.max_context_tokens
        self.context_sizes = np.array(
            [sum(min(len(c) + 1, limit) for c in e.context[: collate.history_size]) for e in self.examples],
            dtype=np.int64)
        if target_context_tokens is not None:
            self.context_sizes += np.asarray(target_context_tokens, dtype=np.int64)

    def __getitem__(self, index: int) -> Dict:
        return {"id": index}

    def describe(self, index: int) -> str:
        return f"input line {self.first_line + self.line_numbers[index] + 1}"

    def extra_tokens(self, indices: np.ndarray) -> np.ndarray:
        return self.context_sizes[indices]

    def ordered_indices(self) -> np.ndarray:
        if self.positions is None:
            return super().ordered_indices()
        return np.lexsort((self.pair.src_sizes, self.positions)).astype(np.int64)

    def collater(self, samples: List[Dict], pad_to_length=None) -> Dict:
        if not samples:
            return {}
        positions = [sample["id"] for sample in samples]
        batch = self.collate([self.examples[p] for p in positions])
        batch["id"] = torch.tensor([self.line_numbers[positions[row]] for row in batch["id"].tolist()])
        self.collated.append(batch)
        return batch
