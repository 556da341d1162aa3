"""Task ``context_translation``: translation whose batches carry previous source sentences."""
import logging
import os
from dataclasses import dataclass, field
from typing import List, Optional

import torch
from fairseq import utils
from fairseq.distributed import utils as distributed_utils
from fairseq.sequence_scorer import SequenceScorer
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from fairseq_ctx.context.data.context_batch import ContextInputs, TargetContextKeys
from fairseq_ctx.context.context_use import OWN_TRANSLATIONS, REFERENCES, describe_context
from fairseq_ctx.context.data.context_dataset import ContextTranslationDataset
from fairseq_ctx.context.data.context_examples import ExampleCollater
from fairseq_ctx.context.data.coword_dropout import coword_dropout
from fairseq_ctx.context.data.docids import DocumentIdError, docids_path, read_docids
from fairseq_ctx.context.data.own_translations import OwnTranslations
from fairseq_ctx.context.interactive import InteractiveDocuments
from fairseq_ctx.context.models.context_transformer import ContextTransformerModel
from fairseq_ctx.core.fixes import install_fixes
from fairseq_ctx.core.hydra_model_config import complete_model_config
from fairseq_ctx.core.language_pair_wrapper import LanguagePairWrapper
from fairseq_ctx.core.model_family import check_model_family
from fairseq_ctx.core.mixed_precision import MixedPrecisionTask
from fairseq_ctx.core.resumable_task import ResumableTask

logger = logging.getLogger(__name__)


@dataclass
class ContextTranslationConfig(TranslationConfig):
    context_size: int = field(
        default=2,
        metadata={"help": "number of previous source sentences of the same document given "
                  "as context (Yun (2022) ch. 3: N=2 in the thesis); 0 = sentence-level"},
    )
    max_context_tokens: Optional[int] = field(
        default=None,
        metadata={"help": "truncate each context sentence (with its <boc>) to this many tokens; "
                  "default: --max-source-positions. Truncations are counted and logged once"},
    )
    document_window: int = field(
        default=16,
        metadata={"help": "batch runs of this many consecutive sentences of a document (windows "
                  "shuffled, then sorted by their longest sentence) so that most context sentences "
                  "are sources of the same batch, whose encodings HCE/HMCE reuse; 0 = fairseq's "
                  "length-sorted order (contexts are then encoded separately)"},
    )
    no_context_cache: bool = field(
        default=False,
        metadata={"help": "HCE/HMCE: encode the sentence of every context slot of every example on "
                  "its own instead of reusing the batch's source encodings and caching sentence "
                  "vectors during inference (same results, slower; the reference computation)"},
    )
    context_begin_symbol: str = field(
        default="<boc>",
        metadata={"help": "beginning-of-context symbol prepended to every context sentence; "
                  "added to the source dictionary (and the target one when they are joined "
                  "or --target-context-size > 0)"},
    )
    target_context_size: int = field(
        default=0,
        metadata={"help": "number of previous target sentences of the same document given as "
                  "target-side context (Voita et al. (2019); Müller et al. (2018); Bawden et al. "
                  "(2018): pronoun gender and lexical cohesion depend on the previous translation). "
                  "Training reads the reference translations; fairseq-generate, fairseq-interactive, "
                  "the hub and fairseq-ctx-translate-doc read the model's own previous output; "
                  "contrastive scoring reads the target context of the test set. Needs a model "
                  "that reads target context (hce, hmce, ctx_concat) and {split}.docids, also "
                  "with --context-size 0; 0 = none"},
    )
    coword_dropout: float = field(
        default=0.0,
        metadata={"help": "CoWord dropout (Fernandes et al., 2021): in training, replace each token of the "
                  "current source sentence (not padding or </s>) by <unk> with this probability, so that "
                  "translating it takes more of the context; the context sentences stay whole (HCE/HMCE then "
                  "encode them from the context entries instead of reusing the batch's source encodings). "
                  "Validation and decoding read the sentence unchanged; 0 = off"},
    )


@register_task("context_translation", dataclass=ContextTranslationConfig)
class ContextTranslationTask(ResumableTask, MixedPrecisionTask, TranslationTask):
    """Document-level translation (Yun, 2022, ch. 3). Data = a fairseq-preprocess directory plus
    ``{split}.docids`` (one document id per source line) in the same directory."""

    DATA_SETTINGS = ("context_size", "target_context_size", "max_context_tokens", "document_window")

    cfg: ContextTranslationConfig
    interactive: Optional[InteractiveDocuments] = None  # fairseq-interactive's document state, made on first use
    own_outputs: Optional[OwnTranslations] = None  # fairseq-generate's previous hypotheses, made on first use
    context_logged: bool = False  # the context line is logged once (a DocumentTranslator logs its own and sets it)

    def __init__(self, cfg: ContextTranslationConfig, src_dict, tgt_dict):
        install_fixes()  # the plugin's changes to fairseq, in a process that runs one of its tasks
        if cfg.target_context_size < 0:
            raise ValueError(f"--target-context-size must be >= 0 (0 = no target context), got {cfg.target_context_size}")
        if not 0 <= cfg.coword_dropout < 1:
            raise ValueError(f"--coword-dropout must be in [0, 1) (0 = off), got {cfg.coword_dropout}")
        self.joined_dictionaries = src_dict == tgt_dict
        super().__init__(cfg, src_dict, tgt_dict)
        self.boc_index = src_dict.add_symbol(cfg.context_begin_symbol)
        self.count_context_tokens = True
        self.document_span = 0
        self.target_boc_index = -1
        self.add_target_boc()

    def add_target_boc(self) -> None:
        """``<boc>`` in the target dictionary when it is the source one, joined with it, or target
        context is read (the dictionary then has the size the model was trained with)."""
        if self.tgt_dict is self.src_dict:
            self.target_boc_index = self.boc_index
        elif self.target_boc_index < 0 and (self.joined_dictionaries or self.cfg.target_context_size > 0):
            self.target_boc_index = self.tgt_dict.add_symbol(self.cfg.context_begin_symbol)

    def adopt_checkpoint_settings(self, trained, path: str) -> None:
        """fairseq-generate / fairseq-interactive load ``--path`` into the task their command line
        built. The context sizes the model was trained with (``trained``: the checkpoint's task
        config) replace the ones left at their defaults; one given that differs from the trained
        one is kept with a warning naming both, or refused when the model could not read it
        (target context for a model trained without, or the other way round)."""
        taken = []
        for name, flag in (("context_size", "--context-size"), ("target_context_size", "--target-context-size")):
            value, given, default = trained.get(name), getattr(self.cfg, name), _default(name)
            if value is None or value == given:
                continue
            if given == default:
                setattr(self.cfg, name, value)
                taken.append(f"{flag} {value}")
            elif name == "target_context_size" and (value == 0 or given == 0):
                raise ValueError(
                    f"context_translation: checkpoint {path} was trained with {flag} {value} but {flag} {given} is "
                    f"given; the model {'has no' if value == 0 else 'needs its'} target-context parameters. Leave "
                    f"{flag} out to decode with the trained value")
            else:
                logger.warning(
                    f"context_translation: checkpoint {path} was trained with {flag} {value}, but {flag} {given} is "
                    f"given and used: the model never saw {given} previous sentences in training; leave {flag} out "
                    f"to decode with the trained value")
        if taken:
            logger.info(f"context_translation: decoding with {' and '.join(taken)}, as checkpoint {path} was trained "
                        f"(the command line left {'it' if len(taken) == 1 else 'them'} at the default)")
            self.add_target_boc()

    def log_context_use(self, path: str, target_from: str, documents: str) -> None:
        """Log once what context the sentences are decoded with (:mod:`~fairseq_ctx.context.context_use`)."""
        if not self.context_logged:
            self.context_logged = True
            logger.info(describe_context(path, self.cfg.context_size, self.cfg.target_context_size, target_from,
                                         documents))

    def decoded_splits(self) -> str:
        """The documents and sentences of the loaded splits other than the training split."""
        splits = [f"split {name}: {dataset.documents} documents, {len(dataset)} sentences"
                  for name, dataset in self.datasets.items()
                  if name != self.cfg.train_subset and isinstance(dataset, ContextTranslationDataset)]
        return "; ".join(splits) or "the binarized split"

    @property
    def reads_documents(self) -> bool:
        """Whether batches carry context entries: source context (--context-size) or target
        context (--target-context-size); either needs ``{split}.docids``."""
        return self.cfg.context_size > 0 or self.cfg.target_context_size > 0

    @property
    def context_limit(self) -> int:
        limit = self.cfg.max_source_positions
        if self.cfg.max_context_tokens is not None:
            limit = min(limit, self.cfg.max_context_tokens)
        if limit < 2:
            raise ValueError(f"--max-context-tokens must be at least 2 (<boc> and </s>), got {limit}")
        return limit

    def load_dataset(self, split: str, epoch: int = 1, combine: bool = False, **kwargs):
        paths = utils.split_paths(self.cfg.data)
        data_path = paths[(epoch - 1) % len(paths)] if split == self.cfg.train_subset else paths[0]
        if _binarized_split_is_empty(data_path, split, self.cfg.source_lang, self.cfg.target_lang):
            raise DocumentIdError(_empty_split_message(data_path, split))
        super().load_dataset(split, epoch=epoch, combine=False, **kwargs)
        pair = self.datasets[split]
        if len(pair) == 0:
            raise DocumentIdError(_empty_split_message(data_path, split))
        if self.cfg.document_window < 0:
            raise ValueError(f"--document-window must be >= 0, got {self.cfg.document_window}")
        if self.cfg.context_size < 0:
            raise ValueError(f"--context-size must be >= 0, got {self.cfg.context_size}")
        if not self.reads_documents:
            self.datasets[split] = LanguagePairWrapper(pair)
            return
        codes = read_docids(docids_path(data_path, split), split, len(pair))
        self.datasets[split] = ContextTranslationDataset(
            pair,
            codes,
            context_size=self.cfg.context_size,
            boc_index=self.boc_index,
            max_context_tokens=self.context_limit,
            split=split,
            document_window=self.cfg.document_window,
            target_context_size=self.cfg.target_context_size,
            target_boc_index=self.target_boc_index,
            document_order=self.cfg.target_context_size > 0 and split != self.cfg.train_subset,
        )
        self.configure_dataset(self.datasets[split])

    def configure_dataset(self, dataset) -> None:
        """What the built model needs from the batches (datasets loaded before the model was
        built, as fairseq-train loads the validation split, are updated when it is)."""
        if isinstance(dataset, ContextTranslationDataset):
            dataset.count_context_tokens = self.count_context_tokens
            dataset.document_span = self.document_span

    def build_model(self, cfg, from_checkpoint: bool = False):
        complete_model_config(cfg)
        check_model_family(cfg, "context_translation")
        model = super().build_model(cfg, from_checkpoint)
        reads_context = isinstance(model, ContextTransformerModel)
        if self.cfg.context_size > 0 and not reads_context:
            raise ValueError(
                f"context_translation: --arch {getattr(cfg, 'arch', None) or getattr(cfg, '_name', '?')} is a "
                f"sentence-level model and cannot read context; train it with --context-size 0 "
                f"(same data directory) or choose a context-aware arch such as hce or hmce"
            )
        if self.cfg.target_context_size > 0 and not (reads_context and model.reads_target_context):
            raise ValueError(
                f"context_translation: --arch {getattr(cfg, 'arch', None) or getattr(cfg, '_name', '?')} cannot "
                f"read target-side context (--target-context-size {self.cfg.target_context_size}): use hce, hmce "
                f"or ctx_concat, or --target-context-size 0"
            )
        self.check_validation_bleu()
        if reads_context:
            needs = model.configure_context(not self.cfg.no_context_cache, self.cfg.document_window)
            self.count_context_tokens, self.document_span = needs.count_context_tokens, needs.document_span
            for dataset in self.datasets.values():
                self.configure_dataset(dataset)
        checkpoint = getattr(cfg, "pretrained_sentence_checkpoint", None)
        if checkpoint and not from_checkpoint:
            model.load_sentence_checkpoint(checkpoint, (self.cfg.source_lang, self.cfg.target_lang))
        return model

    def check_validation_bleu(self) -> None:
        """--eval-bleu with target context decodes each validation document from the model's own
        previous translations, so every document must be decoded by one process."""
        workers = distributed_utils.get_data_parallel_world_size()
        if self.cfg.eval_bleu and self.cfg.target_context_size > 0 and workers > 1:
            raise ValueError(
                f"context_translation: --eval-bleu with --target-context-size {self.cfg.target_context_size} "
                f"decodes each validation sentence after its document's previous sentences, from the model's own "
                f"translations, but the {workers} training processes each validate a share of the batches. Drop "
                f"--eval-bleu (the validation loss is still computed) and score the saved checkpoints with one "
                f"fairseq-generate process, or train on one process"
            )

    def example_collater(self) -> ExampleCollater:
        """Collates sentences with an explicitly given context into this task's batch format."""
        return ExampleCollater(
            self.source_dictionary, self.target_dictionary, self.cfg.context_size, self.boc_index,
            self.context_limit, self.cfg.left_pad_source, self.cfg.left_pad_target, self.document_span,
            self.cfg.target_context_size, self.target_boc_index,
        )

    def own_translations(self) -> OwnTranslations:
        """The store of previous hypotheses that fairseq-generate's batches read as target context."""
        if self.own_outputs is None:
            self.own_outputs = self.example_collater().own_translations()
        return self.own_outputs

    def interactive_documents(self) -> InteractiveDocuments:
        if self.interactive is None:
            self.interactive = InteractiveDocuments(self.example_collater())
        return self.interactive

    def get_interactive_tokens_and_lengths(self, lines, encode_fn):
        """fairseq-interactive: each buffer's lines continue the running document context; a
        blank line starts a new document."""
        tokens, lengths = super().get_interactive_tokens_and_lengths(lines, encode_fn)
        self.log_context_use("context_translation (fairseq-interactive)", OWN_TRANSLATIONS,
                             "documents: the input as it comes, a blank line ends one" if self.reads_documents else
                             "every line translated on its own")
        if self.reads_documents:
            self.interactive_documents().read_buffer(lines, tokens)
        return tokens, lengths

    def build_dataset_for_inference(self, src_tokens, src_lengths, constraints=None):
        """The buffer read by :meth:`get_interactive_tokens_and_lengths`, blank lines left out,
        each sentence with its context; anything else raises :class:`ContextUnavailableError`
        (e.g. fairseq's GeneratorHubInterface, which has no notion of documents)."""
        if not self.reads_documents:
            return super().build_dataset_for_inference(src_tokens, src_lengths, constraints=constraints)
        return self.interactive_documents().build_dataset(src_tokens, src_lengths, constraints, self)

    def filter_indices_by_size(self, indices, dataset, max_positions=None, ignore_invalid_inputs=False):
        """fairseq's size filter; a sentence of fairseq-interactive's input that is longer (with its
        context) than the model reads is named by its input line, where fairseq's message gives a
        sample number and advises --skip-invalid-size-inputs-valid-test, which would leave that
        line without a translation."""
        interactive = getattr(self.interactive, "dataset", None)
        if ignore_invalid_inputs or interactive is None or dataset is not interactive:
            return super().filter_indices_by_size(indices, dataset, max_positions, ignore_invalid_inputs)
        kept, ignored = dataset.filter_indices_by_size(indices, max_positions)
        if len(ignored) > 0:
            first = int(ignored[0])
            line = dataset.first_line + dataset.line_numbers[first] + 1
            size = dataset.size(first)
            tokens = int(size[0] if isinstance(size, tuple) else size)
            limit = max_positions[0] if isinstance(max_positions, tuple) else max_positions
            raise ValueError(
                f"fairseq-interactive: input line {line} is {tokens} tokens with its context, where the model reads at "
                f"most {limit} (the checkpoint's --max-source-positions); split that sentence into shorter ones, or "
                f"pass --skip-invalid-size-inputs-valid-test to leave it untranslated (it then gets no output line)")
        return kept

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        """fairseq's training step on ``sample`` after ``--coword-dropout``."""
        kept = (self.src_dict.pad(), self.src_dict.eos(), self.src_dict.bos())
        sample = coword_dropout(sample, self.cfg.coword_dropout, self.src_dict.unk(), kept)
        return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad)

    def inference_step(self, generator, models, sample, prefix_tokens=None, constraints=None):
        """A batch without context entries is only accepted from fairseq-interactive (whose
        sample keeps just ``src_tokens``/``src_lengths``; the context is put back). With
        --target-context-size > 0, a batch of a binarized split or of fairseq-interactive reads
        the model's own translations of the previous sentences as target context
        (:class:`OwnTranslations`); batches collated from given examples (the hub, contrastive
        scoring), and every batch scored rather than decoded (a :class:`SequenceScorer`:
        ``--score-reference``, CXMI), keep the target context they were given: for a binarized
        split, the references."""
        own = self.own_outputs
        decoding = not isinstance(generator, SequenceScorer)
        if self.reads_documents and not ContextInputs.of(sample["net_input"]).has_context:
            sample = self.interactive_documents().restore_context(sample)
            own = self.interactive.own_outputs
        else:
            self.log_context_use(f"context_translation ({'decoding' if decoding else 'scoring'})",
                                 OWN_TRANSLATIONS if decoding else REFERENCES, self.decoded_splits())
            if self.cfg.target_context_size > 0:
                own = self.own_translations()
        if self.cfg.target_context_size > 0 and TargetContextKeys.of(sample) is not None and decoding:
            return self.decode_with_own_translations(own, generator, models, sample, prefix_tokens, constraints)
        return super().inference_step(generator, models, sample, prefix_tokens=prefix_tokens, constraints=constraints)

    def decode_with_own_translations(self, own: OwnTranslations, generator, models, sample, prefix_tokens=None,
                                     constraints=None) -> List:
        """The hypotheses of every row of ``sample``, decoded level by level
        (:meth:`OwnTranslations.levels`), each row reading the model's own translations of its
        previous sentences as target context."""
        hypotheses: List = [None] * len(TargetContextKeys.of(sample).target_context_key)
        for rows in own.levels(sample):
            part = own.level_batch(sample, rows)
            level = super().inference_step(generator, models, part, prefix_tokens=_rows_of(prefix_tokens, rows),
                                           constraints=_rows_of(constraints, rows))
            own.keep(part, level)
            for row, hypothesis in zip(rows, level):
                hypotheses[row] = hypothesis
        return hypotheses


def _rows_of(value: Optional[torch.Tensor], rows: List[int]) -> Optional[torch.Tensor]:
    if value is None:
        return None
    return value[torch.tensor(rows, dtype=torch.long, device=value.device)]


def _default(name: str):
    return ContextTranslationConfig.__dataclass_fields__[name].default


def _empty_split_message(data_path: str, split: str) -> str:
    return (
        f"context_translation: split '{split}' in {data_path} has 0 sentences; "
        f"check the text files given to fairseq-preprocess for this split"
    )


def _binarized_split_is_empty(data_path: str, split: str, src: str, tgt: str) -> bool:
    """fairseq cannot memory-map an empty .bin file; detect the empty split before it tries."""
    for pair in (f"{src}-{tgt}", f"{tgt}-{src}"):
        path = os.path.join(data_path, f"{split}.{pair}.{src}.bin")
        if os.path.exists(path):
            return os.path.getsize(path) == 0
    return False
