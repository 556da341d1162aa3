"""A language-pair dataset whose batches also carry auxiliary inputs (features, extra sources)."""
from typing import Dict, List

import numpy as np
from fairseq.data import LanguagePairDataset, data_utils

from fairseq_ctx.multisource.data.feature_file import FeatureFile
from fairseq_ctx.core.language_pair_wrapper import LanguagePairWrapper


class MultimodalTranslationDataset(LanguagePairWrapper):
    """Wraps a :class:`LanguagePairDataset`; ``net_input["aux_inputs"]`` (absent when there are
    none, so stock text-only models accept the batches) maps each auxiliary
    input name to a batch tensor in the order of the batch's ``id``:

    - dense features: (B, R, d) in the feature file's dtype (float16 or float32), read for the
      whole batch at once from the memory map (the models cast them to their own dtype),
    - extra text sources: token ids (B, L), padded like the primary source.
    """

    EXTRA_TOKENS = "extra source sentences"

    def __init__(self, pair: LanguagePairDataset, features: Dict[str, FeatureFile], extra_sources: Dict[str, object]):
        super().__init__(pair)
        self.features = features
        self.extra_sources = extra_sources
        self.extra_sizes = sum((np.asarray(d.sizes) for d in extra_sources.values()), np.zeros(len(pair), dtype=np.int64))

    def __getitem__(self, index: int) -> Dict:
        """The pair's item with ``aux``, the extra sources' tokens; the features are read by the
        collater, for the whole batch at once (``features[name][index]`` reads one sentence's)."""
        item = self.pair[index]
        item["aux"] = {lang: d[index] for lang, d in self.extra_sources.items()}
        return item

    def collater(self, samples: List[Dict], pad_to_length=None) -> Dict:
        batch = self.pair.collater(samples, pad_to_length=pad_to_length)
        if len(samples) == 0 or "net_input" not in batch:
            return batch
        aux_inputs = {name: features.rows(batch["id"].numpy()) for name, features in self.features.items()}
        aux_of = {s["id"]: s["aux"] for s in samples}
        ordered = [aux_of[i] for i in batch["id"].tolist()]
        for lang in self.extra_sources:
            aux_inputs[lang] = data_utils.collate_tokens(
                [a[lang] for a in ordered], self.pair.src_dict.pad(), self.pair.src_dict.eos(),
                left_pad=self.pair.left_pad_source,
            )
        if aux_inputs:
            batch["net_input"]["aux_inputs"] = aux_inputs
        return batch

    def extra_tokens(self, indices: np.ndarray) -> np.ndarray:
        return self.extra_sizes[indices]
