"""A language-pair dataset whose batches also carry auxiliary inputs (features, extra sources)."""
from typing import Dict, List

import numpy as np
import torch
from fairseq.data import FairseqDataset, LanguagePairDataset, data_utils

from fairseq_ctx.data.feature_file import FeatureFile


class MultimodalTranslationDataset(FairseqDataset):
    """Wraps a :class:`LanguagePairDataset`; ``net_input["aux_inputs"]`` (absent when there are
    none, so stock text-only models accept the batches) maps each auxiliary
    input name to a batch tensor in the order of the batch's ``id``:

    - dense features: float (B, R, d),
    - extra text sources: token ids (B, L), padded like the primary source.
    """

    def __init__(self, pair: LanguagePairDataset, features: Dict[str, FeatureFile], extra_sources: Dict[str, object]):
        super().__init__()
        self.pair = pair
        self.features = features
        self.extra_sources = extra_sources
        self.extra_sizes = sum((np.asarray(d.sizes) for d in extra_sources.values()), np.zeros(len(pair), dtype=np.int64))

    def __getitem__(self, index: int) -> Dict:
        item = self.pair[index]
        item["aux"] = {name: f[index] for name, f in self.features.items()}
        item["aux"].update({lang: d[index] for lang, d in self.extra_sources.items()})
        return item

    def __len__(self) -> int:
        return len(self.pair)

    def collater(self, samples: List[Dict], pad_to_length=None) -> Dict:
        batch = self.pair.collater(samples, pad_to_length=pad_to_length)
        if len(samples) == 0 or "net_input" not in batch:
            return batch
        aux_of = {s["id"]: s["aux"] for s in samples}
        ordered = [aux_of[i] for i in batch["id"].tolist()]
        aux_inputs = {name: torch.stack([a[name] for a in ordered]) for name in self.features}
        for lang in self.extra_sources:
            aux_inputs[lang] = data_utils.collate_tokens(
                [a[lang] for a in ordered], self.pair.src_dict.pad(), self.pair.src_dict.eos(),
                left_pad=self.pair.left_pad_source,
            )
        if aux_inputs:
            batch["net_input"]["aux_inputs"] = aux_inputs
        return batch

    def num_tokens(self, index: int) -> int:
        return int(self.num_tokens_vec(np.array([index]))[0])

    def num_tokens_vec(self, indices: np.ndarray) -> np.ndarray:
        sizes = self.pair.src_sizes[indices] + self.extra_sizes[indices]
        if self.pair.tgt_sizes is not None:
            sizes = np.maximum(sizes, self.pair.tgt_sizes[indices])
        return sizes

    def size(self, index: int):
        return self.pair.size(index)

    @property
    def sizes(self):
        return self.pair.sizes

    @property
    def src_sizes(self):
        return self.pair.src_sizes

    @property
    def tgt_sizes(self):
        return self.pair.tgt_sizes

    def ordered_indices(self) -> np.ndarray:
        return self.pair.ordered_indices()

    def filter_indices_by_size(self, indices, max_sizes):
        return self.pair.filter_indices_by_size(indices, max_sizes)

    @property
    def supports_prefetch(self) -> bool:
        return False

    def set_epoch(self, epoch: int):
        super().set_epoch(epoch)
        self.pair.set_epoch(epoch)
