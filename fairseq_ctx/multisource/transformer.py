"""Architectures ``hierarchical_attention_decoder`` (+ ``_big``): a Transformer whose decoder
attends the source sentence and auxiliary inputs with a chosen combination strategy (Libovický, 2019, ch. 5)."""
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import TransformerConfig, TransformerModel, base_architecture
from torch import Tensor

from fairseq_ctx.multisource.aux_input_spec import parse_spec
from fairseq_ctx.multisource.transformer_layers import MultiSourceEncoder, MultiSourceTransformerDecoder
from fairseq_ctx.multisource.modules.multi_input_attention import COMBINATIONS
from fairseq_ctx.multisource.text_only_hub import text_only_hub
from fairseq_ctx.core.model_options import TransformerOptions, arch_overrides, with_transformer_options


@dataclass
class MultiSourceTransformerConfig(FairseqDataclass):
    """Options of the multi-input decoder (Libovický 2019, §5.2) beyond fairseq's Transformer."""
    combination: ChoiceEnum(COMBINATIONS) = field(
        default="hierarchical",
        metadata={"help": "how each decoder layer combines its inputs (Libovický 2019, Fig. 5.4, eq. 5.15-5.16)"},
    )
    feature_dropout: Optional[float] = field(
        default=None, metadata={"help": "dropout on projected dense features (default: --dropout)"})
    no_feature_layernorm: bool = field(default=False, metadata={"help": "no layer norm after the feature projection"})
    no_region_positions: bool = field(
        default=False, metadata={"help": "no learned position embedding per feature region"})
    input_attention_heads: str = field(
        default="",
        metadata={"help": "heads of the decoder's attention over each input, comma-separated in input order "
                  "(source, then --feature-inputs, then --extra-source-langs), or one count for all "
                  "(default: --decoder-attention-heads). Each input has its own attention except with "
                  "flat combination, as in the thesis' implementation (§5.2.1). In training, attention "
                  "over many image regions costs in proportion to its heads: e.g. 16,8 for 196 regions"},
    )
    hierarchical_attention_heads: int = field(
        default=0,
        metadata={"help": "heads of the hierarchical combination's second-level attention over the inputs' "
                  "contexts (0: --decoder-attention-heads)"},
    )
    share_extra_encoders: bool = field(
        default=False,
        metadata={"help": "encode extra source languages with the source encoder (default: one encoder each)"},
    )
    aux_input_spec: str = field(
        default="",
        metadata={"help": "filled in by --task multimodal_translation (inputs and feature sizes); do not set"},
    )


@register_model("multisource_transformer", dataclass=with_transformer_options(MultiSourceTransformerConfig))
class MultiSourceTransformer(TransformerOptions, TransformerModel):
    """Transformer with a multi-input decoder (Libovický 2019, §5.2). With no auxiliary inputs
    it is the plain Transformer (same parameters up to the names mapped by
    :func:`transformer_state_to_multisource`)."""

    task_name = "multimodal_translation"  # checked by the tasks (fairseq_ctx.core.model_family)
    options = MultiSourceTransformerConfig

    @classmethod
    def build_model(cls, args, task):
        model = super().build_model(args, task)
        model.encoder.add_text_encoders(getattr(task, "extra_dicts", {}), lambda d, dim: cls.build_embedding(args, d, dim))
        return model

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        """fairseq's hub interface for a text-only model; a clear error when it reads auxiliary inputs."""
        return text_only_hub(super().from_pretrained(*args, **kwargs))

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        return MultiSourceEncoder(args, src_dict, embed_tokens, parse_spec(args.aux_input_spec))

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        inputs = ["source"] + [spec.name for spec in parse_spec(args.aux_input_spec)]
        return MultiSourceTransformerDecoder(TransformerConfig.from_namespace(args), tgt_dict, embed_tokens,
                                             len(inputs), args.combination, input_attention_heads(args, inputs),
                                             args.hierarchical_attention_heads or None)

    def forward(self, src_tokens: Tensor, src_lengths: Tensor, prev_output_tokens: Tensor,
                aux_inputs: Optional[Dict[str, Tensor]] = None, return_all_hiddens: bool = True,
                features_only: bool = False, alignment_layer: Optional[int] = None,
                alignment_heads: Optional[int] = None):
        encoder_out = self.encoder(src_tokens, src_lengths=src_lengths, aux_inputs=aux_inputs,
                                   return_all_hiddens=return_all_hiddens)
        return self.decoder(prev_output_tokens, encoder_out=encoder_out, features_only=features_only,
                            alignment_layer=alignment_layer, alignment_heads=alignment_heads,
                            src_lengths=src_lengths, return_all_hiddens=return_all_hiddens)


def input_attention_heads(args, inputs: List[str]) -> List[int]:
    """The head count of each input's cross-attention from ``--input-attention-heads``, checked
    against the model's inputs and dimension before anything is built."""
    try:
        given = [int(count) for count in args.input_attention_heads.split(",")] if args.input_attention_heads else []
    except ValueError:
        raise ValueError(f"--input-attention-heads '{args.input_attention_heads}' must be comma-separated integers, "
                         f"one per input ({', '.join(inputs)}) or one for all") from None
    if len(given) == 1:
        given = given * len(inputs)
    heads = given or [args.decoder_attention_heads] * len(inputs)
    if len(heads) != len(inputs):
        raise ValueError(f"--input-attention-heads {args.input_attention_heads} gives {len(heads)} head counts but the "
                         f"model has {len(inputs)} inputs ({', '.join(inputs)}): give one count per input, or one for all")
    if args.combination == "flat" and len(set(heads)) > 1:
        raise ValueError(f"--input-attention-heads {args.input_attention_heads}: --combination flat attends all inputs "
                         f"with one attention, so they need the same head count")
    for count in heads + [args.hierarchical_attention_heads or args.decoder_attention_heads]:
        if count <= 0 or args.decoder_embed_dim % count:
            raise ValueError(f"attention head count {count} must be positive and divide --decoder-embed-dim "
                             f"{args.decoder_embed_dim} (--input-attention-heads / --hierarchical-attention-heads)")
    return heads


def transformer_state_to_multisource(state: Dict[str, Tensor]) -> Dict[str, Tensor]:
    """Rename a plain ``transformer`` state dict to this model's names (text-only path)."""
    renamed = {}
    for name, value in state.items():
        if name.startswith("encoder."):
            name = "encoder.text_encoder." + name[len("encoder."):]
        name = name.replace(".encoder_attn_layer_norm.", ".cross_attention.layer_norms.0.")
        name = name.replace(".encoder_attn.", ".cross_attention.attentions.0.")
        renamed[name] = value
    return renamed


@register_model_architecture("multisource_transformer", "hierarchical_attention_decoder")
def hierarchical_attention_decoder(args):
    """Transformer-base sizes (fairseq defaults); --combination hierarchical by default."""
    base_architecture(args)


@register_model_architecture("multisource_transformer", "hierarchical_attention_decoder_big")
def hierarchical_attention_decoder_big(args):
    """Thesis Multi30k sizes (Libovický, 2019, ch. 5): 6+6 layers, D 512, FFN 4096, 16 heads, shared embeddings."""
    arch_overrides(args, encoder_ffn_embed_dim=4096, encoder_attention_heads=16, decoder_ffn_embed_dim=4096,
                   decoder_attention_heads=16, share_all_embeddings=True)
    hierarchical_attention_decoder(args)
