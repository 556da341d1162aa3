"""``fairseq-hydra-train`` for models whose options are declared with ``add_args``.

fairseq-train builds a legacy model's options as a flat argparse Namespace: every ``add_args``
default, then the ``--arch`` function. fairseq-hydra-train instead hands over the YAML's
``model:`` section as an OmegaConf DictConfig holding only the keys written there, and fairseq's
``TransformerConfig.from_namespace`` drops every key of a DictConfig that is not a
TransformerConfig field (e.g. hmce's ``memory_attention``). The tasks of fairseq_ctx therefore
complete such a config in place (so the checkpoint records every option, as with fairseq-train)
and build the model from the same flat Namespace fairseq-train would have given it.
"""
from argparse import Namespace
from typing import Any

from fairseq.dataclass.utils import _set_legacy_defaults
from fairseq.models import (
    ARCH_CONFIG_REGISTRY,
    ARCH_MODEL_INV_REGISTRY,
    ARCH_MODEL_REGISTRY,
    MODEL_DATACLASS_REGISTRY,
    MODEL_REGISTRY,
)
from omegaconf import DictConfig, OmegaConf, open_dict


def _arch_name(cfg: DictConfig) -> str:
    name = cfg.get("_name") or cfg.get("arch")
    if name in ARCH_MODEL_REGISTRY or name in MODEL_DATACLASS_REGISTRY:
        return name
    if name in MODEL_REGISTRY:
        archs = ", ".join(sorted(ARCH_MODEL_INV_REGISTRY.get(name, [])))
        raise ValueError(
            f"model._name: {name} is a model, not an architecture; fairseq-hydra-train needs an architecture "
            f"name, for this model one of: {archs} (e.g. model._name={archs.split(', ')[0]})"
        )
    raise ValueError(
        f"model._name: {name!r} is not a registered architecture; give an arch name as for fairseq-train --arch "
        f"(and common.user_dir pointing to the plugin that registers it)"
    )


def complete_model_config(cfg: Any) -> None:
    """Add to a fairseq-hydra-train model config (in place) every option fairseq-train would
    set for the same arch: the ``add_args`` defaults and what the arch function sets. Values
    given in the config are kept. Anything but a DictConfig of a legacy model is left alone."""
    if not isinstance(cfg, DictConfig):
        return
    name = _arch_name(cfg)
    if name in MODEL_DATACLASS_REGISTRY:
        return
    args = Namespace(**OmegaConf.to_container(cfg, resolve=True))
    ARCH_CONFIG_REGISTRY[name](args)
    _set_legacy_defaults(args, ARCH_MODEL_REGISTRY[name])
    with open_dict(cfg):
        for key, value in vars(args).items():
            if key not in cfg:
                cfg[key] = value


def legacy_model_args(cfg: Any) -> Any:
    """The flat Namespace fairseq-train would build the model from (``cfg`` completed in place
    first); ``cfg`` itself when it is not a DictConfig of a legacy model."""
    complete_model_config(cfg)
    if not isinstance(cfg, DictConfig) or _arch_name(cfg) in MODEL_DATACLASS_REGISTRY:
        return cfg
    args = Namespace(**OmegaConf.to_container(cfg, resolve=True))
    args.arch = _arch_name(cfg)
    return args
