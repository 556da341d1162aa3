"""Named representations of the multi-source Transformer for ``cka_alignment`` (Yun, 2022, ch. 5),
collected with the generic encoder hook (no change to the model): ``source`` = the text
encoder states (B, T, d), and one entry per auxiliary input under its name — for dense features
(e.g. ``img``) the projected features (B, R, d), for an extra language its encoder states —
plus the ``TransformerModel`` names (``encoder_out`` = all inputs' states concatenated, ...)."""
from typing import Dict

from fairseq_ctx.multisource.transformer import MultiSourceTransformer
from fairseq_ctx.analysis.representations import (
    Representation,
    TransformerRepresentations,
    register_representation_adapter,
)


@register_representation_adapter(MultiSourceTransformer)
class MultiSourceRepresentations(TransformerRepresentations):
    def collect(self, sample: dict) -> Dict[str, Representation]:
        out = super().collect(sample)
        if self._encoder is None or "input_sizes" not in self._encoder:
            return out
        states = self._encoder["encoder_out"][0].transpose(0, 1)
        mask = self._encoder["encoder_padding_mask"][0]
        names = ["source"] + [spec.name for spec in self.model.encoder.aux_inputs]
        start = 0
        for name, size in zip(names, self._encoder["input_sizes"]):
            out[name] = Representation(states[:, start:start + size], mask[:, start:start + size])
            start += size
        return out
