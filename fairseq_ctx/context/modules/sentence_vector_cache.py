"""A bounded cache of per-sentence context vectors, keyed by the sentence's tokens."""
from collections import OrderedDict
from typing import Dict, Hashable, List, Optional, Tuple

from torch import Tensor


class SentenceVectorCache:
    """Least-recently-used map from a sentence (its non-pad token ids) to its pooled context
    vector s_i (Yun 2022, eq. 3.14–3.16). HCE/HMCE's s_i depends only on the sentence and the
    weights, not on the sentence being translated, so at inference each sentence of a
    document is encoded once and then read back for the next N sentences (Yun, 2022, ch. 3).

    Valid only while the weights do not change: the owner clears it whenever it leaves
    evaluation mode, and only uses it without autograd.
    """

    def __init__(self, capacity: int = 8192):
        self.capacity = capacity
        self.vectors: "OrderedDict[Hashable, Tensor]" = OrderedDict()

    @staticmethod
    def keys_of(tokens: Tensor, padding_idx: int) -> List[Tuple[int, ...]]:
        return [tuple(t for t in row if t != padding_idx) for row in tokens.tolist()]

    def lookup(self, keys: List[Tuple[int, ...]], like: Tensor) -> Dict[int, Tensor]:
        """Position in ``keys`` → cached vector (cast to ``like``'s dtype and device)."""
        found: Dict[int, Tensor] = {}
        for position, key in enumerate(keys):
            vector: Optional[Tensor] = self.vectors.get(key)
            if vector is not None:
                self.vectors.move_to_end(key)
                found[position] = vector.to(like)
        return found

    def store(self, keys: List[Tuple[int, ...]], vectors: Tensor) -> None:
        for key, vector in zip(keys, vectors.detach()):
            self.vectors[key] = vector
            self.vectors.move_to_end(key)
        while len(self.vectors) > self.capacity:
            self.vectors.popitem(last=False)

    def clear(self) -> None:
        self.vectors.clear()

    def __len__(self) -> int:
        return len(self.vectors)


class ClearedWithTheWeights:
    """Mixin of an ``nn.Module`` that holds context caches valid only for the weights they were
    computed with (:class:`SentenceVectorCache`): ``clear_context_caches`` runs whenever the module
    changes mode (``train()``/``eval()``) or loads a state dict."""

    def clear_context_caches(self) -> None:
        raise NotImplementedError

    def train(self, mode: bool = True):
        self.clear_context_caches()
        return super().train(mode)

    def _load_from_state_dict(self, *args, **kwargs):
        self.clear_context_caches()
        super()._load_from_state_dict(*args, **kwargs)
