"""Architecture ``multisource_rnn``: BiGRU encoders + conditional-GRU decoder with Bahdanau
attention over several inputs (Libovický 2019 §5.1)."""
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from fairseq import utils
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.models import FairseqEncoder, FairseqEncoderDecoderModel, FairseqIncrementalDecoder, register_model
from fairseq.modules import FairseqDropout
from torch import Tensor, nn

from fairseq_ctx.multisource.aux_input_spec import parse_spec
from fairseq_ctx.multisource.modules.feature_projection import FeatureProjection
from fairseq_ctx.multisource.modules.multi_source_bahdanau import RNN_COMBINATIONS, MultiSourceBahdanauAttention
from fairseq_ctx.multisource.text_only_hub import text_only_hub


class BiGRUEncoder(nn.Module):
    """Embedding + bidirectional GRU; states (B, S, 2H), padding mask (B, S) (right-padded)."""

    def __init__(self, dictionary, embed_dim: int, hidden: int, dropout: float):
        super().__init__()
        self.padding_idx = dictionary.pad()
        self.embed = nn.Embedding(len(dictionary), embed_dim, padding_idx=self.padding_idx)
        self.rnn = nn.GRU(embed_dim, hidden, batch_first=True, bidirectional=True)
        self.dropout_module = FairseqDropout(dropout, module_name=self.__class__.__name__)

    def forward(self, tokens: Tensor):
        mask = tokens.eq(self.padding_idx)
        if mask[:, 0].any():
            tokens = utils.convert_padding_direction(tokens, self.padding_idx, left_to_right=True)
            mask = tokens.eq(self.padding_idx)
        lengths = (~mask).sum(1)
        packed = nn.utils.rnn.pack_padded_sequence(self.dropout_module(self.embed(tokens)), lengths.cpu(),
                                                   batch_first=True, enforce_sorted=False)
        states, _ = nn.utils.rnn.pad_packed_sequence(self.rnn(packed)[0], batch_first=True, total_length=tokens.size(1))
        return self.dropout_module(states), mask


class MultiSourceRNNEncoder(FairseqEncoder):
    """Source BiGRU, one BiGRU per extra source language, dense features projected to 2H."""

    def __init__(self, args, src_dict, extra_dicts: Dict[str, object]):
        super().__init__(src_dict)
        self.aux_inputs = parse_spec(args.aux_input_spec)
        hidden, embed = args.encoder_hidden_size, args.encoder_embed_dim
        self.source = BiGRUEncoder(src_dict, embed, hidden, args.dropout)
        self.extra = nn.ModuleDict({s.name: BiGRUEncoder(extra_dicts[s.name], embed, hidden, args.dropout)
                                    for s in self.aux_inputs if s.kind == "text"})
        self.features = nn.ModuleDict({s.name: FeatureProjection(s.dim, s.regions, 2 * hidden, True, args.dropout, True)
                                       for s in self.aux_inputs if s.kind == "feature"})

    def forward(self, src_tokens: Tensor, src_lengths: Tensor, aux_inputs: Optional[Dict[str, Tensor]] = None):
        states, masks = [], []
        for name, value in [("", src_tokens)] + [(s.name, (aux_inputs or {}).get(s.name)) for s in self.aux_inputs]:
            if value is None:
                raise ValueError(f"the model needs auxiliary input '{name}'; use --task multimodal_translation with it")
            if name in self.features:
                states.append(self.features[name](value).transpose(0, 1))
                masks.append(torch.zeros(value.shape[:2], dtype=torch.bool, device=value.device))
            else:
                h, m = (self.extra[name] if name else self.source)(value)
                states.append(h)
                masks.append(m)
        return {"states": states, "masks": masks}

    @property
    def source_state_dim(self) -> int:
        return 2 * self.source.rnn.hidden_size

    def source_states(self, encoder_out) -> Tuple[Tensor, Tensor]:
        """The source sentence's BiGRU states (B, S, 2H) and padding mask (B, S)."""
        return encoder_out["states"][0], encoder_out["masks"][0]

    def reorder_encoder_out(self, encoder_out, new_order: Tensor):
        return {key: [x.index_select(0, new_order) for x in value] for key, value in encoder_out.items()}

    def max_positions(self):
        return int(1e5)


class MultiSourceRNNDecoder(FairseqIncrementalDecoder):
    """Conditional GRU (Nematus-style; Firat & Cho 2016): s'_i = GRU_1(y_{i-1}, s_{i-1}),
    c_i = attention(s'_i, inputs), s_i = GRU_2(c_i, s'_i); output tanh(W [s_i; y_{i-1}; c_i]).
    Simplification: the sentinel gates s'_i (the state available when attention is computed)."""

    def __init__(self, args, dictionary, input_dims: List[int]):
        super().__init__(dictionary)
        hidden, embed = args.decoder_hidden_size, args.decoder_embed_dim
        self.embed = nn.Embedding(len(dictionary), embed, padding_idx=dictionary.pad())
        self.init_state = nn.Linear(input_dims[0], hidden)
        self.gru1 = nn.GRUCell(embed, hidden)
        self.attention = MultiSourceBahdanauAttention(hidden, input_dims, args.attention_dim, args.context_dim,
                                                      args.combination, args.sentinel, embed)
        self.gru2 = nn.GRUCell(args.context_dim, hidden)
        self.readout = nn.Linear(hidden + embed + args.context_dim, embed)
        self.output_projection = nn.Linear(embed, len(dictionary))
        self.dropout_module = FairseqDropout(args.dropout, module_name=self.__class__.__name__)

    def _initial(self, encoder_out) -> Dict[str, Tensor]:
        source, mask = encoder_out["states"][0], encoder_out["masks"][0]
        mean = source.masked_fill(mask.unsqueeze(-1), 0).sum(1) / (~mask).sum(1, keepdim=True).clamp_min(1)
        return {"state": torch.tanh(self.init_state(mean))}

    def forward(self, prev_output_tokens: Tensor, encoder_out=None, incremental_state=None, **unused):
        cached = self.get_incremental_state(incremental_state, "rnn") if incremental_state is not None else None
        if incremental_state is not None:
            prev_output_tokens = prev_output_tokens[:, -1:]
        state = cached["state"] if cached is not None else self._initial(encoder_out)["state"]
        keys = [cached[f"keys{k}"] for k in range(len(encoder_out["states"]))] if cached is not None \
            else self.attention.precompute(encoder_out["states"])
        outputs, weights = [], []
        embedded = self.dropout_module(self.embed(prev_output_tokens))
        for t in range(prev_output_tokens.size(1)):
            y = embedded[:, t]
            intermediate = self.gru1(y, state)
            context, input_weights = self.attention(intermediate, encoder_out["states"], keys, encoder_out["masks"], y, state)
            state = self.gru2(context, intermediate)
            outputs.append(torch.tanh(self.readout(torch.cat([state, y, context], -1))))
            weights.append(input_weights)
        if incremental_state is not None:
            self.set_incremental_state(incremental_state, "rnn",
                                       {"state": state, **{f"keys{k}": v for k, v in enumerate(keys)}})
        logits = self.output_projection(self.dropout_module(torch.stack(outputs, 1)))
        return logits, {"attn": [None], "input_weights": [torch.stack(weights, 1)]}

    def reorder_incremental_state(self, incremental_state, new_order: Tensor):
        cached = self.get_incremental_state(incremental_state, "rnn")
        if cached is not None:
            self.set_incremental_state(incremental_state, "rnn", {k: v.index_select(0, new_order) for k, v in cached.items()})

    def max_positions(self):
        return int(1e5)


@dataclass
class MultiSourceRNNConfig(FairseqDataclass):
    """Options of ``multisource_rnn``, defaults as Libovický (2019), §5.1."""
    encoder_embed_dim: int = field(default=300, metadata={"help": "source embedding size (thesis 300)"})
    encoder_hidden_size: int = field(default=300, metadata={"help": "BiGRU units per direction (thesis 300)"})
    decoder_embed_dim: int = field(default=300, metadata={"help": "target embedding size (thesis 300)"})
    decoder_hidden_size: int = field(default=500, metadata={"help": "conditional GRU size (thesis 500)"})
    attention_dim: int = field(default=500, metadata={"help": "attention hidden size (thesis 500)"})
    context_dim: Optional[int] = field(
        default=None, metadata={"help": "size of the combined context vector (default: 2 x --encoder-hidden-size)"})
    combination: ChoiceEnum(RNN_COMBINATIONS) = field(
        default="hierarchical", metadata={"help": "how the inputs' contexts are combined (eq. 5.1-5.3)"})
    sentinel: bool = field(default=False, metadata={"help": "add the sentinel gate (eq. 5.4-5.5)"})
    dropout: float = field(default=0.2, metadata={"help": "dropout probability"})
    aux_input_spec: str = field(
        default="", metadata={"help": "filled in by --task multimodal_translation (inputs and feature sizes); do not set"})


@register_model("multisource_rnn", dataclass=MultiSourceRNNConfig)
class MultiSourceRNN(FairseqEncoderDecoderModel):
    """RNN multi-source / multimodal translation with concat, flat or hierarchical attention."""

    task_name = "multimodal_translation"  # checked by the tasks (fairseq_ctx.core.model_family)

    @classmethod
    def build_model(cls, args: MultiSourceRNNConfig, task):
        if args.context_dim is None:
            args.context_dim = 2 * args.encoder_hidden_size
        encoder = MultiSourceRNNEncoder(args, task.source_dictionary, getattr(task, "extra_dicts", {}))
        input_dims = [2 * args.encoder_hidden_size] * (1 + len(encoder.aux_inputs))
        return cls(encoder, MultiSourceRNNDecoder(args, task.target_dictionary, input_dims))

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        """fairseq's hub interface for a text-only model; a clear error when it reads auxiliary inputs."""
        return text_only_hub(super().from_pretrained(*args, **kwargs))

    def forward(self, src_tokens, src_lengths, prev_output_tokens, aux_inputs=None, **unused):
        encoder_out = self.encoder(src_tokens, src_lengths=src_lengths, aux_inputs=aux_inputs)
        return self.decoder(prev_output_tokens, encoder_out=encoder_out)

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        logits = net_output[0].float()
        return F.log_softmax(logits, -1) if log_probs else F.softmax(logits, -1)

