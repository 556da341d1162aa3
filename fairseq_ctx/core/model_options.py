"""One declaration of a model's options: a ``FairseqDataclass`` registered with
``@register_model(name, dataclass=...)``. It is the command line (help strings and paper
defaults), the hydra config node (``_name: <model or arch>``) and the defaults of older
checkpoints at once; architecture functions only override the values that differ from it.

fairseq's Transformer options live in the nested :class:`TransformerConfig`, while the
command line and checkpoints use flat names (``encoder.embed_dim`` is ``--encoder-embed-dim``);
:func:`with_transformer_options` gives a model built on fairseq's ``TransformerModel`` one flat
dataclass with both, under the names fairseq's ``transformer`` parser uses.
"""
import dataclasses
import inspect
from argparse import Namespace
from contextlib import nullcontext
from functools import lru_cache
from typing import Any, List, Tuple, Type

from fairseq.dataclass import FairseqDataclass
from fairseq.dataclass.utils import gen_parser_from_dataclass
from fairseq.models.transformer import TransformerConfig
from omegaconf import II, OmegaConf, open_dict


def _flat_transformer_fields() -> List[Tuple[str, Any, dataclasses.Field]]:
    """TransformerConfig's fields, sub-configs flattened to ``<group>_<field>`` (their
    command-line names); the decoder sizes that default to the embedding size refer to the
    flat name."""
    flat = []
    for outer in dataclasses.fields(TransformerConfig):
        if outer.name.startswith("_"):
            continue
        if inspect.isclass(outer.type) and issubclass(outer.type, FairseqDataclass):
            inner_fields = [(f"{outer.name}_{f.name}", f) for f in dataclasses.fields(outer.type) if not f.name.startswith("_")]
        else:
            inner_fields = [(outer.name, outer)]
        for name, source in inner_fields:
            default = source.default
            if isinstance(default, str) and default == II("model.decoder.embed_dim"):
                default = II("model.decoder_embed_dim")
            kwargs = {"metadata": dict(source.metadata)}
            if source.default_factory is not dataclasses.MISSING:
                kwargs["default_factory"] = source.default_factory
            else:
                kwargs["default"] = default
            flat.append((name, source.type, dataclasses.field(**kwargs)))
    return flat


@lru_cache(maxsize=None)
def with_transformer_options(own: Type[FairseqDataclass]) -> Type[FairseqDataclass]:
    """``own`` (a model's own options) extended by fairseq's Transformer options, flat."""
    taken = {f.name for f in dataclasses.fields(own)}
    extra = [spec for spec in _flat_transformer_fields() if spec[0] not in taken]
    return dataclasses.make_dataclass(own.__name__, extra, bases=(own,), namespace={"__doc__": own.__doc__})


def add_model_args(parser, config_class: Type[FairseqDataclass]) -> None:
    """The model's options on the command line, without defaults (as fairseq does for models,
    so that the architecture function sees which options were given)."""
    gen_parser_from_dataclass(parser, config_class(), delete_default=True)


def _given(args, name: str) -> bool:
    if OmegaConf.is_config(args):
        return name in args and not OmegaConf.is_missing(args, name)
    return name in vars(args)


def fill_defaults(args, config_class: Type[FairseqDataclass]) -> None:
    """Give ``args`` (a namespace or config) the dataclass default of every option it lacks:
    a hydra config naming an architecture, or a checkpoint saved before the option existed."""
    defaults = config_class()
    with open_dict(args) if OmegaConf.is_config(args) else nullcontext():
        for spec in dataclasses.fields(config_class):
            value = getattr(defaults, spec.name)
            if spec.name.startswith("_") or _given(args, spec.name):
                continue
            if isinstance(value, str) and value.startswith("${"):
                continue  # an interpolation: fairseq's base_architecture sets it
            setattr(args, spec.name, value)


def arch_overrides(args, **values: Any) -> None:
    """An architecture's values for the options not given on the command line (argparse leaves
    the given ones in ``args``); a complete config (checkpoint, hydra node) is left as it is."""
    with open_dict(args) if OmegaConf.is_config(args) else nullcontext():
        for name, value in values.items():
            if not _given(args, name):
                setattr(args, name, value)



class TransformerOptions:
    """Mixin for a model built on fairseq's ``TransformerModel`` whose own options are the
    dataclass ``options``: the command line is :func:`with_transformer_options` of it (the
    dataclass the model is registered with), and options a config lacks get their defaults
    before fairseq's ``build_model`` (which fills the Transformer's own)."""

    options: Type[FairseqDataclass]

    @classmethod
    def add_args(cls, parser) -> None:
        add_model_args(parser, with_transformer_options(cls.options))

    @classmethod
    def build_model(cls, args, task):
        if OmegaConf.is_config(args):  # fairseq's TransformerModel passes its options on as a flat namespace
            args = Namespace(**OmegaConf.to_container(args, resolve=True, enum_to_str=True))
        fill_defaults(args, cls.options)
        return super().build_model(args, task)
