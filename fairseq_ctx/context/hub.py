"""Python API in the style of fairseq's hub interface for every context_translation model.

    from fairseq_ctx.context import hub
    translator = hub.load("checkpoints/hmce")            # directory (checkpoint_best.pt) or file
    translator.translate_document(["the cat sleeps .", "it is quiet ."])

The model is only used through ``task.build_generator`` / ``task.inference_step`` and the
task's own context batching (:class:`ContextTranslationDataset`), so the API works for every
architecture (transformer with ``--context-size 0``, hce, hmce, ctx_concat, dat, han, dct).
"""
from argparse import Namespace
from collections import deque
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Sequence

import numpy as np
import torch
from fairseq import utils
from fairseq.data import LanguagePairDataset

from fairseq_ctx.core.sentencepiece_codec import SentencePieceCodec
from fairseq_ctx.core.tool_loading import load_models
from fairseq_ctx.context.data.context_dataset import ContextTranslationDataset


@dataclass
class Example:
    """One sentence to translate or score: source tokens, its context sentences (nearest
    first, source side, without ``<boc>``) and optionally a target."""

    source: torch.Tensor
    context: List[torch.Tensor] = field(default_factory=list)
    target: Optional[torch.Tensor] = None


class DocumentTranslator:
    """A loaded context-aware model with document-level translation and scoring."""

    def __init__(self, task, models, spm_model: Optional[str] = None, beam: int = 5,
                 max_len_a: float = 1.2, max_len_b: int = 10, lenpen: float = 1.0):
        self.task = task
        self.models = models
        self.src_dict, self.tgt_dict = task.source_dictionary, task.target_dictionary
        self.context_size = int(getattr(task.cfg, "context_size", 0))
        self.spm = SentencePieceCodec(spm_model) if spm_model else None
        self.generator = task.build_generator(
            models, Namespace(beam=beam, nbest=1, max_len_a=max_len_a, max_len_b=max_len_b, lenpen=lenpen)
        )
        self.scorer = task.build_generator(models, Namespace(score_reference=True))
        self.device = next(models[0].parameters()).device

    def encode(self, line: str, dictionary) -> torch.Tensor:
        line = self.spm.encode(line) if self.spm is not None else line.strip()
        return dictionary.encode_line(line, add_if_not_exist=False, append_eos=True).long()

    def encode_source(self, line: str) -> torch.Tensor:
        return self.encode(line, self.src_dict)

    def encode_target(self, line: str) -> torch.Tensor:
        return self.encode(line, self.tgt_dict)

    def decode(self, tokens: torch.Tensor) -> str:
        text = self.tgt_dict.string(tokens.int().cpu(), extra_symbols_to_ignore={self.tgt_dict.eos()})
        if self.spm is not None:
            return self.spm.decode(text)
        return text

    def make_sample(self, examples: Sequence[Example]) -> Dict:
        """Collate ``examples`` with the task's own dataset classes; ``sample["id"][row]`` is the
        position of the example in ``examples``."""
        sources, targets, codes, wanted = [], [], [], []
        with_target = examples[0].target is not None
        for number, example in enumerate(examples):
            context = example.context[: self.context_size]
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
            left_pad_source=self.task.cfg.left_pad_source, left_pad_target=self.task.cfg.left_pad_target,
        )
        dataset = pair
        if self.context_size > 0:
            dataset = ContextTranslationDataset(pair, np.array(codes), context_size=self.context_size,
                                                boc_index=self.task.boc_index,
                                                max_context_tokens=self.task.context_limit)
        sample = dataset.collater([dataset[index] for index in wanted])
        position = {index: number for number, index in enumerate(wanted)}
        sample["id"] = torch.tensor([position[i] for i in sample["id"].tolist()])
        return utils.move_to_cuda(sample) if self.device.type == "cuda" else sample

    @torch.no_grad()
    def translate_examples(self, examples: Sequence[Example]) -> List[torch.Tensor]:
        """Best beam-search hypothesis (token ids, with ``</s>``) per example, in order."""
        if not examples:
            return []
        sample = self.make_sample(examples)
        hypos = self.task.inference_step(self.generator, self.models, sample)
        out: List[Optional[torch.Tensor]] = [None] * len(examples)
        for row, number in enumerate(sample["id"].tolist()):
            out[number] = hypos[row][0]["tokens"]
        return out

    @torch.no_grad()
    def score_examples(self, examples: Sequence[Example]) -> List[torch.Tensor]:
        """Log-probability (natural log) of each target token given source and context."""
        if not examples:
            return []
        sample = self.make_sample(examples)
        hypos = self.task.inference_step(self.scorer, self.models, sample)
        out: List[Optional[torch.Tensor]] = [None] * len(examples)
        for row, number in enumerate(sample["id"].tolist()):
            out[number] = hypos[row][0]["positional_scores"].float().cpu()
        return out

    def translate_stream(self, lines: Iterable[str], batch_size: int = 32) -> Iterator[str]:
        """One output line per input line: a blank input line (document boundary) gives a blank
        output line and clears the running context. Sentences are batched ``batch_size`` at a
        time across documents (the context is source-side, so batching does not change the
        result) and only the running context is kept: the input is never held whole."""
        history: deque = deque(maxlen=max(self.context_size, 1))
        pending: List[Optional[int]] = []
        batch: List[Example] = []
        for line in lines:
            if not line.strip():
                history.clear()
                if batch:
                    pending.append(None)
                else:
                    yield ""
                continue
            source = self.encode_source(line)
            context = list(reversed(history)) if self.context_size else []
            history.append(source)
            pending.append(len(batch))
            batch.append(Example(source, context))
            if len(batch) >= batch_size:
                yield from self._flush(batch, pending)
                batch, pending = [], []
        yield from self._flush(batch, pending)

    def _flush(self, batch: List[Example], pending: List[Optional[int]]) -> Iterator[str]:
        hypotheses = self.translate_examples(batch)
        for slot in pending:
            yield "" if slot is None else self.decode(hypotheses[slot])

    def translate_document(self, sentences: Sequence[str], batch_size: int = 32) -> List[str]:
        """Translate one document (a list of sentences, in order) keeping the running context."""
        for number, sentence in enumerate(sentences):
            if not sentence.strip():
                raise ValueError(f"sentence {number} of the document is empty; a document is a list of "
                                 f"non-empty sentences (use translate_stream for blank-line separated text)")
        return list(self.translate_stream(sentences, batch_size=batch_size))


def load(checkpoint: str, checkpoint_file: str = "checkpoint_best.pt", data: Optional[str] = None,
         spm_model: Optional[str] = None, cpu: bool = False, **generation) -> DocumentTranslator:
    """Load a checkpoint directory (or file). The dictionaries come from ``data`` if given, else
    from the checkpoint directory when it holds ``dict.*.txt``, else from the data directory
    recorded in the checkpoint. ``generation``: beam, max_len_a, max_len_b, lenpen."""
    models, _, task = load_models(checkpoint, ["context_translation"], "fairseq_ctx.context.hub.load",
                                  checkpoint_file=checkpoint_file, data=data, cpu=cpu)
    return DocumentTranslator(task, models, spm_model=spm_model, **generation)
