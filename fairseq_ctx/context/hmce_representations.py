"""Named representations of hce/hmce for ``cka_alignment``, collected with a forward hook on the
encoder's source-context attention (no change to the model): ``source`` = the source encoder
states h_src (B, T, d), ``context`` = the context tensor t (B, N, d) with empty slots masked,
plus the ``TransformerModel`` names (``encoder_out`` = the fused states, ...)."""
from typing import Dict, Optional

import torch
from torch import Tensor

from fairseq_ctx.analysis.representations import (
    Representation,
    TransformerRepresentations,
    register_representation_adapter,
)
from fairseq_ctx.context.data.context_batch import ContextInputs
from fairseq_ctx.context.models.hmce import HierarchicalContextTransformer


@register_representation_adapter(HierarchicalContextTransformer)
class HierarchicalContextRepresentations(TransformerRepresentations):
    def __init__(self, model: HierarchicalContextTransformer):
        super().__init__(model)
        self._source: Optional[Tensor] = None
        self._context: Optional[Tensor] = None
        attention = model.encoder.context_attn
        self._handles.append(attention.register_forward_pre_hook(self._on_context_attention, with_kwargs=True))

    def _on_context_attention(self, _module, args, kwargs):
        self._source = kwargs["query"] if "query" in kwargs else args[0]
        self._context = kwargs["key"] if "key" in kwargs else args[1]

    def collect(self, sample: dict) -> Dict[str, Representation]:
        out = super().collect(sample)
        net_input = sample["net_input"]
        if self._source is not None:
            src_mask = net_input["src_tokens"].eq(self.model.encoder.padding_idx)
            out["source"] = Representation(self._source.transpose(0, 1), src_mask)
            inputs = ContextInputs.of(net_input)
            context = self._context.transpose(0, 1)
            index = inputs.context_index
            empty = index.lt(0) if index is not None else context.new_ones(context.shape[:2]).bool()
            if inputs.document_index is not None and empty.size(1) < context.size(1):  # the document-vector slot
                empty = torch.cat([empty, inputs.document_index.lt(0).all(dim=1, keepdim=True)], dim=1)
            out["context"] = Representation(context, empty)
        return out
