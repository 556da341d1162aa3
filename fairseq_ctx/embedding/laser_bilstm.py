"""Architecture ``laser_bilstm``: the LASER baseline (Artetxe & Schwenk 2019; Li 2021 §2.1.4)."""
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import torch
from fairseq.dataclass import FairseqDataclass
from fairseq.models import FairseqDecoder, FairseqEncoder, FairseqEncoderDecoderModel, register_model
from fairseq.models.lstm import Embedding, LSTMEncoder
from fairseq.modules import FairseqDropout
from torch import Tensor, nn

from fairseq_ctx.embedding.float32_recurrence import float32_recurrence
from fairseq_ctx.embedding.no_hub_interface import no_hub_interface


class MaxPooledBiLSTMEncoder(FairseqEncoder):
    """BiLSTM over the tokens; the sentence embedding is the max over time of the top layer's
    outputs (padding excluded with the dtype's minimum)."""

    def __init__(self, dictionary, embed_dim: int, hidden_size: int, num_layers: int, dropout: float):
        super().__init__(dictionary)
        self.lstm = LSTMEncoder(dictionary, embed_dim=embed_dim, hidden_size=hidden_size, num_layers=num_layers,
                                dropout_in=dropout, dropout_out=dropout, bidirectional=True, left_pad=False)
        self.output_dim = 2 * hidden_size

    def forward(self, src_tokens: Tensor, src_lengths: Tensor) -> Dict[str, List[Tensor]]:
        src_tokens = src_tokens[:, : int(src_lengths.max())]  # extra padding columns carry nothing
        with float32_recurrence(src_tokens.device):  # embedding and BiLSTM: float32 under CPU autocast
            states, _, _, padding_mask = self.lstm(src_tokens, src_lengths, enforce_sorted=False)
        states = states.masked_fill(padding_mask.unsqueeze(-1), torch.finfo(states.dtype).min)
        return {"sentence_embedding": [states.max(dim=0).values]}

    def reorder_encoder_out(self, encoder_out: Dict[str, List[Tensor]], new_order):
        return {"sentence_embedding": [encoder_out["sentence_embedding"][0].index_select(0, new_order)]}

    def max_positions(self) -> int:
        return int(1e5)


class EmbeddingConditionedLSTMDecoder(FairseqDecoder):
    """LSTM decoder whose input at every step is [previous token; sentence embedding; target-
    language embedding]; tanh(W P) initialises its hidden state. The target language is read
    from the first decoder input token (the task's ``__lang__`` token)."""

    def __init__(self, dictionary, lang_token_index: Dict[str, int], embed_dim: int, embedding_dim: int,
                 hidden_size: int, lang_embed_dim: int, dropout: float):
        super().__init__(dictionary)
        self.embed_tokens = Embedding(len(dictionary), embed_dim, dictionary.pad())
        lang_of_token = torch.full((len(dictionary),), -1, dtype=torch.long)
        for position, token in enumerate(sorted(lang_token_index.values())):
            lang_of_token[token] = position
        self.register_buffer("lang_of_token", lang_of_token, persistent=False)
        self.embed_lang = nn.Embedding(max(1, len(lang_token_index)), lang_embed_dim)
        self.init_hidden = nn.Linear(embedding_dim, hidden_size)
        self.lstm = nn.LSTM(embed_dim + embedding_dim + lang_embed_dim, hidden_size)
        self.output_projection = nn.Linear(hidden_size, len(dictionary))
        self.dropout = FairseqDropout(dropout, module_name=self.__class__.__name__)

    def forward(self, prev_output_tokens: Tensor, encoder_out: Dict[str, List[Tensor]],
                incremental_state: Optional[Dict] = None, **unused):
        embedding = encoder_out["sentence_embedding"][0]
        lang = self.lang_of_token[prev_output_tokens[:, 0]]
        if (lang < 0).any():
            raise ValueError("laser_bilstm: the first decoder input must be a target-language token (__lang__)")
        steps = prev_output_tokens.size(1)
        inputs = torch.cat([
            self.dropout(self.embed_tokens(prev_output_tokens)),
            embedding.unsqueeze(1).expand(-1, steps, -1),
            self.embed_lang(lang).unsqueeze(1).expand(-1, steps, -1),
        ], dim=-1).transpose(0, 1)
        dtype = self.lstm.weight_ih_l0.dtype  # float32 under --amp; the weights' own under --fp16
        h0 = torch.tanh(self.init_hidden(embedding)).unsqueeze(0).to(dtype)
        with float32_recurrence(inputs.device):
            outputs, _ = self.lstm(inputs.to(dtype), (h0, torch.zeros_like(h0)))
        logits = self.output_projection(self.dropout(outputs.transpose(0, 1)))
        return logits, {"attn": [None], "inner_states": [outputs]}

    def max_positions(self) -> int:
        return int(1e5)


@dataclass
class LaserConfig(FairseqDataclass):
    """Options of ``laser_bilstm``, defaults as LASER (Artetxe & Schwenk 2019; Li 2021 §2.1.4)."""
    encoder_embed_dim: int = field(default=320, metadata={"help": "token embedding size of the encoder (LASER: 320)"})
    encoder_hidden_size: int = field(default=512, metadata={"help": "LSTM units per direction (LASER: 512)"})
    encoder_layers: int = field(default=1, metadata={"help": "BiLSTM layers (LASER: 1 or 5)"})
    decoder_embed_dim: int = field(default=320, metadata={"help": "token embedding size of the decoder (LASER: 320)"})
    decoder_hidden_size: int = field(default=2048, metadata={"help": "decoder LSTM units (LASER: 2048)"})
    decoder_lang_embed_dim: int = field(default=32, metadata={"help": "target-language embedding size (LASER: 32)"})
    dropout: float = field(default=0.1, metadata={"help": "dropout probability"})


@register_model("laser_bilstm", dataclass=LaserConfig)
class LaserModel(FairseqEncoderDecoderModel):
    """LASER: BiLSTM encoder with max-pooling, LSTM decoder fed [token; embedding; language]."""

    task_name = "multilingual_embedding"  # checked by the tasks (fairseq_ctx.core.model_family)

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        no_hub_interface("laser_bilstm")

    @classmethod
    def build_model(cls, args: LaserConfig, task):
        dictionary = task.source_dictionary
        encoder = MaxPooledBiLSTMEncoder(dictionary, args.encoder_embed_dim, args.encoder_hidden_size,
                                         args.encoder_layers, args.dropout)
        decoder = EmbeddingConditionedLSTMDecoder(
            task.target_dictionary, task.lang_token_index, args.decoder_embed_dim, encoder.output_dim,
            args.decoder_hidden_size, args.decoder_lang_embed_dim, args.dropout,
        )
        return cls(encoder, decoder)

    def forward(self, src_tokens: Tensor, src_lengths: Tensor, prev_output_tokens: Tensor, **kwargs):
        encoder_out = self.encoder(src_tokens, src_lengths)
        logits, extra = self.decoder(prev_output_tokens, encoder_out)
        extra["sentence_embedding"] = encoder_out["sentence_embedding"][0]
        return logits, extra

    def embed(self, src_tokens: Tensor, src_lengths: Tensor) -> Tensor:
        """Sentence/document embeddings (B, 2·hidden) of STR_TAG-prefixed, right-padded sources."""
        return self.encoder(src_tokens, src_lengths)["sentence_embedding"][0]

