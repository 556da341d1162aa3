"""Batches for multilingual embedding training: many language pairs, one shared dictionary."""
from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch
from fairseq.data import FairseqDataset, data_utils
from torch import Tensor

from fairseq_ctx.core.complete_batches import complete_batches


class MultilingualEmbeddingDataset(FairseqDataset):
    """All language pairs of a split behind one index (T-MDE training data).

    ``index_map[i] = (pair, row)`` names the example; the task draws it per epoch (uniform or
    temperature sampling across pairs). Every source starts with the sentence-embedding tag
    (STR_TAG); the decoder input starts with the target-language token instead of </s>.
    A batch holds one language pair (negatives of the distance constraint share the target
    language; per-pair validation losses come for free). Besides the translation input it
    carries the target sentence as an encoder input (``target_input``) and the reversed
    direction (``reverse``), both built in memory from the same binarized rows.
    """

    def __init__(
        self,
        pairs: Sequence[Tuple[str, str]],
        sources: Sequence,
        targets: Sequence,
        index_map: np.ndarray,
        dictionary,
        str_tag_index: int,
        lang_token_index: Dict[str, int],
        shuffle: bool = True,
    ):
        self.pairs = list(pairs)
        self.sources = list(sources)
        self.targets = list(targets)
        self.index_map = index_map.astype(np.int64)
        self.dictionary = dictionary
        self.tag = str_tag_index
        self.lang_token_index = lang_token_index
        self.shuffle = shuffle
        pair_of, row = self.index_map[:, 0], self.index_map[:, 1]
        self.src_sizes = np.empty(len(row), dtype=np.int64)
        self.tgt_sizes = np.empty(len(row), dtype=np.int64)
        for p in range(len(self.pairs)):
            chosen = pair_of == p
            self.src_sizes[chosen] = np.asarray(self.sources[p].sizes)[row[chosen]] + 1
            self.tgt_sizes[chosen] = np.asarray(self.targets[p].sizes)[row[chosen]]
        self.sizes = np.vstack((self.src_sizes, self.tgt_sizes)).T

    def __len__(self) -> int:
        return len(self.index_map)

    def __getitem__(self, index: int) -> Dict:
        pair, row = (int(v) for v in self.index_map[index])
        source, target = self.sources[pair][row], self.targets[pair][row]
        tag = source.new_tensor([self.tag])
        return {"id": index, "pair": pair, "source": torch.cat([tag, source]), "target": target,
                "target_source": torch.cat([tag, target]), "raw_source": source}

    def num_tokens(self, index: int) -> int:
        return max(self.src_sizes[index], self.tgt_sizes[index])

    def num_tokens_vec(self, indices: np.ndarray) -> np.ndarray:
        return np.maximum(self.src_sizes[indices], self.tgt_sizes[indices])

    def size(self, index: int) -> Tuple[int, int]:
        return self.src_sizes[index], self.tgt_sizes[index]

    def ordered_indices(self) -> np.ndarray:
        order = np.random.permutation(len(self)) if self.shuffle else np.arange(len(self))
        order = order[np.argsort(self.tgt_sizes[order], kind="mergesort")]
        return order[np.argsort(self.src_sizes[order], kind="mergesort")]

    def batch_by_size(self, indices, max_tokens=None, max_sentences=None, required_batch_size_multiple=1):
        """fairseq's token-count batching, run separately per language pair; the examples fairseq
        drops at the end of each pair come back as a last batch of that pair."""
        pair_of = self.index_map[indices, 0]
        batches: List[np.ndarray] = []
        for pair in range(len(self.pairs)):
            chosen = indices[pair_of == pair]
            if len(chosen):
                pair_batches = super().batch_by_size(chosen, max_tokens, max_sentences, required_batch_size_multiple)
                batches.extend(complete_batches(chosen, pair_batches))
        return batches

    def _decoder_input(self, tokens: List[Tensor], lang: str) -> List[Tensor]:
        start = tokens[0].new_tensor([self.lang_token_index[lang]])
        return [torch.cat([start, t[:-1]]) for t in tokens]

    def _collate(self, tokens: List[Tensor]) -> Tensor:
        return data_utils.collate_tokens(tokens, self.dictionary.pad(), self.dictionary.eos(), left_pad=False)

    def collater(self, samples: List[Dict]) -> Dict:
        if not samples:
            return {}
        pairs = {s["pair"] for s in samples}
        if len(pairs) != 1:
            raise ValueError("a multilingual_embedding batch must hold one language pair")
        src_lang, tgt_lang = self.pairs[pairs.pop()]
        targets = [s["target"] for s in samples]
        raw_sources = [s["raw_source"] for s in samples]
        lengths = lambda items: torch.LongTensor([t.numel() for t in items])  # noqa: E731
        target_sources = [s["target_source"] for s in samples]
        return {
            "id": torch.LongTensor([s["id"] for s in samples]),
            "pair": torch.LongTensor([s["pair"] for s in samples]),
            "nsentences": len(samples),
            "ntokens": sum(t.numel() for t in targets),
            "net_input": {
                "src_tokens": self._collate([s["source"] for s in samples]),
                "src_lengths": lengths([s["source"] for s in samples]),
                "prev_output_tokens": self._collate(self._decoder_input(targets, tgt_lang)),
            },
            "target": self._collate(targets),
            "target_input": {"src_tokens": self._collate(target_sources), "src_lengths": lengths(target_sources)},
            "reverse": {
                "prev_output_tokens": self._collate(self._decoder_input(raw_sources, src_lang)),
                "target": self._collate(raw_sources),
                "ntokens": sum(t.numel() for t in raw_sources),
            },
        }

    @property
    def supports_prefetch(self) -> bool:
        return False


def sample_pair_rows(pair_sizes: Sequence[int], strategy: str, temperature: float, seed: int) -> np.ndarray:
    """(pair, row) rows for one epoch: ``natural`` keeps every row once; ``uniform`` gives every
    pair the same number of rows; ``temperature`` gives pair i a share ∝ n_i^(1/T). The total
    stays the corpus size; a pair smaller than its share is repeated (whole permutations first)."""
    sizes = np.asarray(pair_sizes, dtype=np.float64)
    if strategy == "natural":
        counts = sizes.astype(np.int64)
    else:
        weights = np.ones_like(sizes) if strategy == "uniform" else sizes ** (1.0 / temperature)
        counts = np.maximum(1, np.round(sizes.sum() * weights / weights.sum())).astype(np.int64)
    rng = np.random.RandomState(seed)
    rows = []
    for pair, (n, count) in enumerate(zip(sizes.astype(np.int64), counts)):
        if strategy == "natural":
            chosen = np.arange(n)
        else:
            repeats = [rng.permutation(n) for _ in range(count // n)]
            chosen = np.concatenate(repeats + [rng.choice(n, count % n, replace=False)])
        rows.append(np.stack([np.full(len(chosen), pair), chosen], axis=1))
    return np.concatenate(rows).astype(np.int64)
