"""Task ``multilingual_embedding``: many-to-pivot translation that trains a sentence embedding."""
import logging
import math
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch
from fairseq import metrics, utils
from fairseq.data import data_utils
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.tasks import FairseqTask, register_task
from omegaconf import II

from fairseq_ctx.embedding.data.multilingual_embedding_dataset import MultilingualEmbeddingDataset, sample_pair_rows
from fairseq_ctx.embedding.data.shared_dictionary import load_shared_dictionary
from fairseq_ctx.core.fixes import install_fixes
from fairseq_ctx.core.hydra_model_config import complete_model_config
from fairseq_ctx.core.model_family import check_model_family
from fairseq_ctx.core.mixed_precision import MixedPrecisionTask
from fairseq_ctx.core.resumable_task import ResumableTask

logger = logging.getLogger(__name__)


@dataclass
class MultilingualEmbeddingConfig(FairseqDataclass):
    data: Optional[str] = field(
        default=None,
        metadata={"help": "fairseq-preprocess output of every pair ({split}.{src}-{tgt}.{lang}) with one shared "
                  "dictionary (dict.txt, or identical dict.{lang}.txt files)"},
    )
    lang_pairs: str = field(
        default="",
        metadata={"help": "comma-separated src-tgt pairs, e.g. de-en,de-es,fr-en,fr-es,en-es,es-en "
                  "(Li (2021) ch. 4: every language to the two pivots)"},
    )
    str_tag: str = field(
        default="<str>",
        metadata={"help": "sentence-embedding tag prepended to every source (STR_TAG); its encoder output is "
                  "the embedding"},
    )
    pair_sampling: ChoiceEnum(["uniform", "temperature", "natural"]) = field(
        default="uniform",
        metadata={"help": "how training examples are drawn across pairs each epoch: uniform (Li, 2021, ch. 4), "
                  "temperature (share ∝ n^(1/T)) or natural (every row once)"},
    )
    sampling_temperature: float = field(default=5.0, metadata={"help": "T for --pair-sampling temperature"})
    max_source_positions: int = field(default=1024, metadata={"help": "max source tokens (tag included)"})
    max_target_positions: int = field(default=1024, metadata={"help": "max target tokens"})
    seed: int = II("common.seed")
    train_subset: str = II("dataset.train_subset")


def parse_lang_pairs(text: str) -> List[Tuple[str, str]]:
    pairs = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        parts = item.split("-")
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"multilingual_embedding: bad --lang-pairs entry '{item}', expected SRC-TGT")
        pairs.append((parts[0], parts[1]))
    if not pairs:
        raise ValueError("multilingual_embedding: --lang-pairs is required, e.g. --lang-pairs de-en,de-es")
    return pairs


def lang_token(lang: str) -> str:
    return f"__{lang}__"


@register_task("multilingual_embedding", dataclass=MultilingualEmbeddingConfig)
class MultilingualEmbeddingTask(ResumableTask, MixedPrecisionTask, FairseqTask):
    """Multilingual translation with a sentence-embedding bottleneck (T-MDE / LASER).

    One dictionary for all languages, extended with STR_TAG and one ``__{lang}__`` token per
    language; the decoder learns the target language from its first input token (the
    language token replaces the usual </s> start symbol; LASER-style decoders also embed it).
    """

    cfg: MultilingualEmbeddingConfig

    def __init__(self, cfg: MultilingualEmbeddingConfig, dictionary):
        install_fixes()  # the plugin's changes to fairseq, in a process that runs one of its tasks
        super().__init__(cfg)
        self.pairs = parse_lang_pairs(cfg.lang_pairs)
        self.languages = sorted({lang for pair in self.pairs for lang in pair})
        self.dictionary = dictionary
        self.str_tag_index = dictionary.add_symbol(cfg.str_tag)
        self.lang_token_index: Dict[str, int] = {l: dictionary.add_symbol(lang_token(l)) for l in self.languages}

    @classmethod
    def setup_task(cls, cfg: MultilingualEmbeddingConfig, **kwargs):
        paths = utils.split_paths(cfg.data)
        if not paths:
            raise ValueError("multilingual_embedding: give the data directory as the first argument")
        langs = sorted({lang for pair in parse_lang_pairs(cfg.lang_pairs) for lang in pair})
        dictionary = load_shared_dictionary(paths[0], langs)
        logger.info(f"multilingual_embedding: {len(dictionary)} shared types, languages {langs}")
        return cls(cfg, dictionary)

    @property
    def source_dictionary(self):
        return self.dictionary

    @property
    def target_dictionary(self):
        return self.dictionary

    def max_positions(self):
        return self.cfg.max_source_positions, self.cfg.max_target_positions

    def build_model(self, cfg, from_checkpoint: bool = False):
        complete_model_config(cfg)
        check_model_family(cfg, "multilingual_embedding")
        return super().build_model(cfg, from_checkpoint)

    def check_language(self, lang: str) -> None:
        if lang not in self.languages:
            raise ValueError(
                f"language '{lang}' is not one of the model's languages {', '.join(self.languages)} "
                f"(from --lang-pairs {self.cfg.lang_pairs})"
            )

    def has_sharded_data(self, split: str) -> bool:
        """The training split is re-drawn every epoch (pair sampling), so fairseq reloads it."""
        return split == self.cfg.train_subset and self.cfg.pair_sampling != "natural"

    def load_dataset(self, split: str, epoch: int = 1, combine: bool = False, **kwargs):
        paths = utils.split_paths(self.cfg.data)
        data_path = paths[(epoch - 1) % len(paths)] if split == self.cfg.train_subset else paths[0]
        sources, targets = [], []
        for src, tgt in self.pairs:
            for lang, bucket in ((src, sources), (tgt, targets)):
                prefix = os.path.join(data_path, f"{split}.{src}-{tgt}.{lang}")
                dataset = data_utils.load_indexed_dataset(prefix, self.dictionary)
                if dataset is None:
                    raise FileNotFoundError(
                        f"multilingual_embedding: {prefix}.bin/.idx not found for pair {src}-{tgt}; binarize it with "
                        f"fairseq-preprocess --source-lang {src} --target-lang {tgt} --srcdict DICT --tgtdict DICT "
                        f"--destdir {data_path} ..."
                    )
                bucket.append(dataset)
            if len(sources[-1]) != len(targets[-1]) or len(sources[-1]) == 0:
                raise ValueError(
                    f"multilingual_embedding: {split}.{src}-{tgt} has {len(sources[-1])} source and "
                    f"{len(targets[-1])} target sentences; it must be non-empty and aligned"
                )
        is_train = split == self.cfg.train_subset
        strategy = self.cfg.pair_sampling if is_train else "natural"
        rows = sample_pair_rows([len(s) for s in sources], strategy, self.cfg.sampling_temperature,
                                seed=self.cfg.seed * 1000 + epoch)
        self.datasets[split] = MultilingualEmbeddingDataset(
            self.pairs, sources, targets, rows, self.dictionary, self.str_tag_index, self.lang_token_index,
            shuffle=is_train,
        )

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        """Also tells criterions that change with training progress (``set_num_updates``) the update."""
        if hasattr(criterion, "set_num_updates"):
            criterion.set_num_updates(update_num)
        return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad)

    def valid_step(self, sample, model, criterion):
        loss, sample_size, logging_output = super().valid_step(sample, model, criterion)
        pair = int(sample["pair"][0])
        for index, (src, tgt) in enumerate(self.pairs):
            mine = index == pair
            logging_output[f"pair_loss_{src}-{tgt}"] = logging_output["loss"] if mine else 0.0
            logging_output[f"pair_size_{src}-{tgt}"] = sample_size if mine else 0
        return loss, sample_size, logging_output

    def reduce_metrics(self, logging_outputs, criterion):
        super().reduce_metrics(logging_outputs, criterion)
        for src, tgt in self.pairs:
            size = sum(log.get(f"pair_size_{src}-{tgt}", 0) for log in logging_outputs)
            if size > 0:
                total = sum(log.get(f"pair_loss_{src}-{tgt}", 0) for log in logging_outputs)
                metrics.log_scalar(f"loss_{src}-{tgt}", float(total) / size / math.log(2), size, round=3)

    def encode_line(self, line: str, max_tokens: int):
        """Source tokens for embedding: STR_TAG, at most ``max_tokens`` tokens of the line, </s>."""
        tokens = self.dictionary.encode_line(line, add_if_not_exist=False, append_eos=False).long()[:max_tokens]
        return torch.cat([tokens.new_tensor([self.str_tag_index]), tokens, tokens.new_tensor([self.dictionary.eos()])])
