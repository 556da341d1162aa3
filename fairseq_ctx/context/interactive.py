"""The document state that lets stock ``fairseq-interactive`` translate with context.

fairseq-interactive reads its input in buffers of ``--buffer-size`` lines and, per buffer, calls
``task.get_interactive_tokens_and_lengths(lines)``, ``task.build_dataset_for_inference(tokens,
lengths)``, iterates the batches and passes each one to ``task.inference_step`` -- rebuilding
the sample from ``src_tokens``/``src_lengths`` only. :class:`InteractiveDocuments` keeps the
running context across buffers (the previous source sentences of the current document; a blank
line starts a new document), gives each line its context when the buffer is read, remembers
every collated batch and hands its context back in ``inference_step``, after checking that the
sample is that batch (the buffer's dataset keeps the batches it collates). Any other caller of these task methods (fairseq's GeneratorHubInterface,
a custom loop) gets :class:`ContextUnavailableError` instead of a translation without context.

With ``--target-context-size`` M > 0 every line gets a key (counting across buffers) and the
keys of the previous M lines of its document; the lines of a buffer are decoded in the order
(position in the document, length) and ``task.inference_step`` reads the model's own
translations of those lines as target context (:class:`OwnTranslations`), so the output is that
of translating each document one sentence at a time.
"""
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import torch
from fairseq.data import LanguagePairDataset

from fairseq_ctx.context.data.context_batch import ContextInputs, TargetContextKey, TargetContextKeys
from fairseq_ctx.context.data.context_examples import Example, ExampleCollater, ExampleDataset, RunningContext
from fairseq_ctx.context.data.own_translations import OwnTranslations

CONTEXT_INTERFACES = (
    "translate raw text with fairseq_ctx.context.hub.load(CHECKPOINT) (or the model class's from_pretrained), "
    "which returns a DocumentTranslator (translate_document / translate_stream), with fairseq-ctx-translate-doc, "
    "or with fairseq-interactive --task context_translation (blank line = new document); decode a binarized "
    "split that has {split}.docids with fairseq-generate --task context_translation"
)


class LineHistory(NamedTuple):
    """What a line of a buffer needs to read its previous lines' translations (target context)."""

    key: TargetContextKey  # the line's key (counting across buffers), its previous lines' and its readers
    position: int  # position in its document
    target_tokens: int  # estimated tokens of its target context (for --max-tokens)


class ContextUnavailableError(RuntimeError):
    """An inference path would translate a context-aware model's input without its context."""


class InteractiveDocuments:
    """Running context and batch bookkeeping of one fairseq-interactive session."""

    def __init__(self, collate: ExampleCollater):
        self.collate = collate
        self.running = RunningContext(collate.history_size)
        self.pending: Optional[List[Optional[Example]]] = None
        self.dataset: Optional[ExampleDataset] = None  # the buffer's, which keeps the batches it collates
        self.target_context_size = collate.target_context_size
        self.own_outputs: Optional[OwnTranslations] = (
            collate.own_translations() if self.target_context_size > 0 else None)
        self.next_key = 0
        self.document: List[Tuple[int, int, int]] = []  # (key, position, length) of the document's last M lines
        self.position = 0
        self.history: Dict[int, LineHistory] = {}  # by line number in the buffer
        self.lines_read = 0  # input lines of the buffers read so far
        self.buffer_start = 0  # input lines before the buffer read last

    def read_buffer(self, lines: Sequence[str], tokens: Sequence[torch.Tensor]) -> None:
        """Give every line of the buffer its context (``None`` marks a blank line)."""
        self.buffer_start, self.lines_read = self.lines_read, self.lines_read + len(lines)
        blank = [not line.strip() for line in lines]
        if self.own_outputs is not None:
            self.history = self._target_history([None if empty else len(source) for source, empty in zip(tokens, blank)])
        self.pending = []
        for number, (empty, source) in enumerate(zip(blank, tokens)):
            context = self.running.next(None if empty else source)
            key = self.history[number].key if self.own_outputs is not None and not empty else None
            self.pending.append(None if empty else Example(source, context, target_context_key=key))

    def _target_history(self, lengths: List[Optional[int]]) -> Dict[int, LineHistory]:
        """Key, previous keys (nearest first), number of later readers, document position and the
        estimated tokens of the target context of every line of the buffer (``lengths``: its
        lines' source lengths, None for a blank line). The target context is the model's own
        translations, unknown when fairseq-interactive makes its batches, so ``--max-tokens`` counts
        each previous translation as long as its source sentence (plus its ``<boc>``). All earlier
        buffers are decoded: the hypotheses the current document keeps get their exact remaining
        readers (or are forgotten) once it is known where the document ends."""
        size, limit = self.target_context_size, self.collate.max_context_tokens
        blank = [length is None for length in lengths]
        ends = [number for number, is_blank in enumerate(blank) if is_blank]
        continuing = ends[0] if ends else None
        last = self.position - 1
        for key, position, _ in self.document:
            left = position + size - last
            self.own_outputs.expect(key, left if continuing is None else min(continuing, left))
        history = {}
        for number, is_blank in enumerate(blank):
            if is_blank:
                self.document, self.position = [], 0
                continue
            later_ends = [end for end in ends if end > number]
            later = (later_ends[0] - number - 1) if later_ends else size
            previous = [key for key, _, _ in reversed(self.document)]
            estimate = sum(min(length + 1, limit) for _, _, length in self.document)
            history[number] = LineHistory(TargetContextKey(self.next_key, previous, min(later, size)), self.position,
                                          estimate)
            self.document = (self.document + [(self.next_key, self.position, lengths[number])])[-size:]
            self.next_key += 1
            self.position += 1
        return history

    def build_dataset(self, src_tokens: Sequence[torch.Tensor], src_lengths: Sequence[int],
                      constraints: Optional[torch.Tensor], task) -> ExampleDataset:
        """The dataset of the buffer read last; ``src_tokens`` must be that buffer's tokens."""
        pending, self.pending = self.pending, None
        if pending is None or len(pending) != len(src_tokens):
            raise ContextUnavailableError(
                f"context_translation: {len(src_tokens)} sentences were given to build_dataset_for_inference "
                f"without their documents (as fairseq's hub interface, TransformerModel.from_pretrained(...)"
                f".translate/.generate, does), so "
                f"they would be translated without context; {CONTEXT_INTERFACES}"
            )
        if constraints is not None:
            raise ContextUnavailableError(
                "context_translation: fairseq-interactive --constraints is not supported with document context "
                "(--context-size or --target-context-size > 0); translate without --constraints, or use a "
                "sentence-level model (--context-size 0 --target-context-size 0)"
            )
        kept = [number for number, example in enumerate(pending) if example is not None]
        for number in kept:
            if not torch.equal(pending[number].source, src_tokens[number]):
                raise ContextUnavailableError(
                    f"context_translation: line {number} of the buffer changed between "
                    f"get_interactive_tokens_and_lengths and build_dataset_for_inference; {CONTEXT_INTERFACES}"
                )
        pair = LanguagePairDataset(
            [src_tokens[n] for n in kept], np.array([int(src_lengths[n]) for n in kept], dtype=np.int64),
            task.source_dictionary, tgt_dict=task.target_dictionary,
            left_pad_source=self.collate.left_pad_source, left_pad_target=self.collate.left_pad_target,
        )
        positions = estimates = None
        if self.own_outputs is not None:
            positions = [self.history[n].position for n in kept]
            estimates = [self.history[n].target_tokens for n in kept]
        self.dataset = ExampleDataset(pair, [pending[n] for n in kept], kept, self.collate, positions, estimates,
                                      self.buffer_start)
        return self.dataset

    def restore_context(self, sample: Dict) -> Dict:
        """``sample`` (rebuilt by fairseq-interactive from a batch's ``src_tokens`` and
        ``src_lengths``) with that batch's context entries put back."""
        src_tokens = sample["net_input"]["src_tokens"]
        if self.dataset is None or not self.dataset.collated:
            raise ContextUnavailableError(
                f"context_translation: a batch of {src_tokens.size(0)} sentences reached inference_step without "
                f"'context_index'/'context_tokens' (--context-size {self.collate.context_size}); it would be "
                f"translated without context. {CONTEXT_INTERFACES}"
            )
        batch = self.dataset.collated.popleft()
        if not torch.equal(batch["net_input"]["src_tokens"], src_tokens.cpu()):
            raise ContextUnavailableError(
                "context_translation: the batch given to inference_step is not the batch collated last, so its "
                f"context is unknown; {CONTEXT_INTERFACES}"
            )
        context = ContextInputs.of(batch["net_input"]).to(src_tokens.device)
        keys = TargetContextKeys.of(batch)
        restored = {**sample, "net_input": {**sample["net_input"], **context.net_input()}}
        return {**restored, **keys.entries()} if keys is not None else restored
