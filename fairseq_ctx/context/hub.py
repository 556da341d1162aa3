"""Python API in the style of fairseq's hub interface for every context_translation model.

    from fairseq_ctx.context import hub
    translator = hub.load("checkpoints/hmce")            # directory (checkpoint_best.pt) or file
    translator.translate_document(["the cat sleeps .", "it is quiet ."])

The model is only used through ``task.build_generator`` / ``task.inference_step`` and the
task's own context batching (:class:`ContextTranslationDataset`, through the task's
:class:`~fairseq_ctx.context.data.context_examples.ExampleCollater`), so the API works for every
architecture (transformer with ``--context-size 0``, hce, hmce, ctx_concat, dat, han, dct).
A model trained with ``--target-context-size`` M > 0 reads its own translations of the previous
M sentences of the document (Voita et al. (2019)).

The first translation logs what context the sentences get (:mod:`~fairseq_ctx.context.context_use`);
input that is mostly ``<unk>`` is warned about (:mod:`~fairseq_ctx.core.unknown_tokens`). The
length limit is fairseq's (``max_len_a`` 0, ``max_len_b`` 200, as fairseq-generate and
fairseq-interactive): fairseq's generator limits a whole batch by ``a`` times its longest source,
so with ``max_len_a`` > 0 a translation depends on the sentences it is batched with.
"""
import collections.abc
import logging
import os
from argparse import Namespace
from typing import Dict, Iterable, Iterator, List, Optional, Sequence

from fairseq_ctx.context.tensorboard_note import quiet_tensorboard_note

quiet_tensorboard_note()  # the hub's own logging: fairseq's import-time note on its speech tasks stays out

import torch  # noqa: E402
from fairseq import utils  # noqa: E402

from fairseq_ctx.context.context_use import OWN_TRANSLATIONS, describe_context  # noqa: E402
from fairseq_ctx.context.data.context_batch import TargetContextKey  # noqa: E402
from fairseq_ctx.context.data.context_examples import Example, RunningContext  # noqa: E402
from fairseq_ctx.core.sentencepiece_codec import SentencePieceCodec  # noqa: E402
from fairseq_ctx.core.tool_loading import load_models  # noqa: E402
from fairseq_ctx.core.unknown_tokens import UnknownTokenCheck  # noqa: E402

logger = logging.getLogger(__name__)


class DocumentTranslator:
    """A loaded context-aware model with document-level translation and scoring."""

    def __init__(self, task, models, spm_model: Optional[str] = None, beam: int = 5,
                 max_len_a: float = 0, max_len_b: int = 200, lenpen: float = 1.0):
        self.task = task
        self.models = models
        self.src_dict, self.tgt_dict = task.source_dictionary, task.target_dictionary
        self.context_size = task.cfg.context_size
        self.target_context_size = task.cfg.target_context_size
        self.spm = SentencePieceCodec(spm_model) if spm_model else None
        self.generator = task.build_generator(
            models, Namespace(beam=beam, nbest=1, max_len_a=max_len_a, max_len_b=max_len_b, lenpen=lenpen)
        )
        self.scorer = task.build_generator(models, Namespace(score_reference=True))
        self.device = next(models[0].parameters()).device
        self.collate = task.example_collater()
        self.next_key = 0  # own-output key of the next sentence translated with target context
        task.context_logged = True  # the task's own line is for fairseq's tools; this translator logs its own
        self.context_logged = False
        self.unknown: Optional[UnknownTokenCheck] = None

    def unknown_tokens_fix(self) -> str:
        if self.spm is None:
            return ("pass the sentencepiece model the training data was segmented with (--spm MODEL; spm_model= in "
                    "Python), or text tokenized as the training data was")
        return "the text is in another language or script than the training data"

    def log_context_use(self) -> None:
        if not self.context_logged:
            self.context_logged = True
            logger.info(describe_context("DocumentTranslator", self.context_size, self.target_context_size,
                                         OWN_TRANSLATIONS, "documents: a blank line ends one (translate_stream), one "
                                         "per translate_document"))

    def encode(self, line: str, dictionary) -> torch.Tensor:
        line = self.spm.encode(line) if self.spm is not None else line.strip()
        return dictionary.encode_line(line, add_if_not_exist=False, append_eos=True).long()

    def encode_source(self, line: str) -> torch.Tensor:
        tokens = self.encode(line, self.src_dict)
        if self.unknown is not None:
            self.unknown.add(tokens)
        return tokens

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
        sample = self.collate(examples)
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

    def translate_stream(self, lines: Iterable[str], batch_size: int = 32, source: str = "the input") -> Iterator[str]:
        """One output line per input line: a blank input line (document boundary) gives a blank
        output line and clears the running context. Sentences are batched ``batch_size`` at a
        time across documents (the context is source-side, so batching does not change the
        result) and only the running context is kept: the input is never held whole.

        With target context (``--target-context-size`` M > 0) each sentence reads the model's own
        translations of the previous M sentences of its document, so a document is translated
        sentence after sentence: up to ``batch_size`` documents of the stream are held, sentence
        i of all of them is translated in one batch, and the output is that of translating each
        document on its own, one sentence at a time.

        ``source`` names the input in the warning given when its first batch is mostly ``<unk>``."""
        self.log_context_use()
        self.unknown = UnknownTokenCheck(self.src_dict, source, self.unknown_tokens_fix())
        if self.target_context_size > 0:
            yield from self._translate_documents(lines, batch_size)
            return
        running = RunningContext(self.collate.history_size)
        pending: List[Optional[int]] = []
        batch: List[Example] = []
        for line in lines:
            if not line.strip():
                running.next(None)
                if batch:
                    pending.append(None)
                else:
                    yield ""
                continue
            source = self.encode_source(line)
            context = running.next(source)
            pending.append(len(batch))
            batch.append(Example(source, context))
            if len(batch) >= batch_size:
                yield from self._flush(batch, pending)
                batch, pending = [], []
        yield from self._flush(batch, pending)

    def _translate_documents(self, lines: Iterable[str], batch_size: int) -> Iterator[str]:
        """Groups of up to ``batch_size`` whole documents (blank lines kept in place), each group
        translated by :meth:`translate_group`."""
        group: List[List[torch.Tensor]] = []
        layout: List[Optional[int]] = []  # per line: the document it belongs to, None for a blank line
        for line in lines:
            if not line.strip():
                if layout and layout[-1] is not None and len(group) >= batch_size:
                    yield from self._emit(group, layout)
                    group, layout = [], []
                layout.append(None)
                continue
            if not layout or layout[-1] is None:
                group.append([])
            group[-1].append(self.encode_source(line))
            layout.append(len(group) - 1)
        yield from self._emit(group, layout)

    def _emit(self, group: List[List[torch.Tensor]], layout: List[Optional[int]]) -> Iterator[str]:
        self.unknown.check()
        translations = [iter(document) for document in self.translate_group(group)]
        for document in layout:
            yield "" if document is None else self.decode(next(translations[document]))

    def translate_group(self, documents: Sequence[Sequence[torch.Tensor]]) -> List[List[torch.Tensor]]:
        """Translate encoded documents together, as fairseq-generate decodes a binarized split:
        one batch whose sentences carry their source context (the previous sentences of their
        document) and the keys of their previous ``target_context_size`` sentences, whose
        translations the task's :class:`~fairseq_ctx.context.data.own_translations.OwnTranslations`
        passes as target context (sentence i of every document is decoded after sentence i-1)."""
        history, size = self.collate.history_size, self.target_context_size
        examples: List[Example] = []
        for document in documents:
            first, self.next_key = self.next_key, self.next_key + len(document)
            for position, source in enumerate(document):
                context = list(reversed(document[max(0, position - history):position])) if history else []
                key = TargetContextKey(first + position,
                                       list(range(first + position - 1, first + max(0, position - size) - 1, -1)),
                                       min(len(document) - 1 - position, size))
                examples.append(Example(source, context, target_context_key=key))
        sentences = iter(self.translate_examples(examples))
        return [[next(sentences).cpu() for _ in document] for document in documents]

    def _flush(self, batch: List[Example], pending: List[Optional[int]]) -> Iterator[str]:
        self.unknown.check()
        hypotheses = self.translate_examples(batch)
        for slot in pending:
            yield "" if slot is None else self.decode(hypotheses[slot])

    def translate(self, sentences: str) -> str:
        """One sentence on its own (a document of one sentence: no context). fairseq's hub
        ``translate(list)`` translates sentences independently, which would drop the context a
        list of sentences usually has; use :meth:`translate_document` or :meth:`translate_stream`."""
        if not isinstance(sentences, str):
            raise TypeError("DocumentTranslator.translate takes one sentence; for a list of sentences use "
                            "translate_document(sentences) (one document, running context) or "
                            "translate_stream(lines) (blank line = document boundary)")
        return self.translate_document([sentences])[0]

    def translate_document(self, sentences: Sequence[str], batch_size: int = 32) -> List[str]:
        """Translate one document (a list of sentences, in order) keeping the running context. A
        string is refused: iterated, it would be translated character by character."""
        if isinstance(sentences, str):
            raise TypeError("translate_document takes a document as a list of sentences, got a string; use "
                            "translate_document([sentence]) or translate(sentence) for one sentence, or "
                            "translate_stream(text.splitlines()) for blank-line separated text")
        if not isinstance(sentences, collections.abc.Iterable):
            raise TypeError(f"translate_document takes a document as a list of sentences (strings), got "
                            f"{type(sentences).__name__}")
        sentences = list(sentences)
        for number, sentence in enumerate(sentences):
            if not isinstance(sentence, str):
                raise TypeError(f"sentence {number} of the document is {type(sentence).__name__}, not a string; a "
                                f"document is a list of sentences (strings)")
            if not sentence.strip():
                raise ValueError(f"sentence {number} of the document is empty; a document is a list of "
                                 f"non-empty sentences (use translate_stream for blank-line separated text)")
        return list(self.translate_stream(sentences, batch_size=batch_size))


def load(checkpoint: str, checkpoint_file: str = "checkpoint_best.pt", data: Optional[str] = None,
         spm_model: Optional[str] = None, cpu: bool = False, **generation) -> DocumentTranslator:
    """Load a checkpoint directory (or file). The dictionaries come from ``data`` if given, else
    from the checkpoint directory when it holds ``dict.*.txt``, else from the data directory
    recorded in the checkpoint. ``generation``: beam, max_len_a, max_len_b, lenpen (defaults 5, 0, 200, 1:
    fairseq's length limit)."""
    models, _, task = load_models(checkpoint, ["context_translation"], "fairseq_ctx.context.hub.load",
                                  checkpoint_file=checkpoint_file, data=data, cpu=cpu)
    return DocumentTranslator(task, models, spm_model=spm_model, **generation)


def from_pretrained(model_name_or_path: str, checkpoint_file: str = "checkpoint_best.pt",
                    data_name_or_path: Optional[str] = None, **kwargs) -> DocumentTranslator:
    """``Model.from_pretrained`` of every context_translation model class: fairseq's signature,
    answered with a :class:`DocumentTranslator` (fairseq's GeneratorHubInterface cannot pass
    context). A relative ``data_name_or_path`` is looked up in the model directory first, as
    fairseq does; ``kwargs``: spm_model, cpu, beam, max_len_a, max_len_b, lenpen."""
    data = data_name_or_path
    if data is not None and not os.path.isabs(data) and os.path.isdir(model_name_or_path):
        inside = os.path.join(model_name_or_path, data)
        data = inside if os.path.isdir(inside) else data
    return load(model_name_or_path, checkpoint_file=checkpoint_file, data=data, **kwargs)
