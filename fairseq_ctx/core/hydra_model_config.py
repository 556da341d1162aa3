"""A ``fairseq-hydra-train`` model section completed as ``fairseq-train`` completes its options.

Every model declares its options in one registered dataclass (:mod:`fairseq_ctx.core.model_options`);
on the command line an architecture function then sets its values for the options not given.
A hydra ``model:`` node reaches the task in one of two forms: as the YAML wrote it (the plugin
was not imported when fairseq-hydra-train composed the config, as with the console script), or
with the model's whole dataclass merged in (fairseq's ``add_defaults``, when it was). Naming an
architecture, neither would get the architecture's values (e.g. ``tmde_p``'s pyramid queries)
where it has dataclass defaults, and the first leaves the checkpoint without the options the
YAML did not write. The tasks therefore complete the node in place before building: the
options it gives, then the architecture function's values, then the dataclass defaults. In a
merged node an option still at its dataclass default counts as not given.
"""
import dataclasses
from argparse import Namespace
from typing import Any, Dict, Optional, Type

from fairseq.dataclass import FairseqDataclass
from fairseq.models import (
    ARCH_CONFIG_REGISTRY,
    ARCH_MODEL_INV_REGISTRY,
    ARCH_MODEL_NAME_REGISTRY,
    ARCH_MODEL_REGISTRY,
    MODEL_DATACLASS_REGISTRY,
    MODEL_REGISTRY,
)
from omegaconf import OmegaConf, open_dict

from fairseq_ctx.core.model_options import fill_defaults


def model_type(cfg: Any) -> str:
    """The architecture or model ``cfg`` names (``_name``, else ``arch``), checked to be registered."""
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


def model_options(name: str) -> Optional[Type[FairseqDataclass]]:
    """The options dataclass of the model an architecture or model ``name`` builds."""
    return MODEL_DATACLASS_REGISTRY.get(ARCH_MODEL_NAME_REGISTRY.get(name, name))


def given_options(cfg: Any, options: Optional[Type[FairseqDataclass]]) -> Dict[str, Any]:
    """The values ``cfg`` gives. A node holding every option of ``options`` had the dataclass
    merged in: there an option at its default (a decoder size at the size it follows) was not
    given."""
    values = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    specs = [spec for spec in dataclasses.fields(options) if not spec.name.startswith("_")] if options else []
    if not specs or any(spec.name not in values for spec in specs):
        return values
    defaults = options()
    for spec in specs:
        default = getattr(defaults, spec.name)
        if isinstance(default, str) and default.startswith("${model."):
            default = values.get(default[len("${model."):-1])
        if values[spec.name] == default:
            del values[spec.name]
    return values


def complete_model_config(cfg: Any) -> None:
    """Set in a hydra model node (in place) every option fairseq-train would set for the same
    architecture: the node's own values, what the architecture function sets for the others
    (a model name, as in fairseq, gets no architecture function) and the dataclass defaults.
    An argparse Namespace (fairseq-train's, complete) or a node without a name is left alone."""
    if not OmegaConf.is_config(cfg) or not (cfg.get("_name") or cfg.get("arch")):
        return
    name = model_type(cfg)
    options = model_options(name)
    args = Namespace(**given_options(cfg, options))
    if name not in MODEL_DATACLASS_REGISTRY:
        ARCH_CONFIG_REGISTRY[name](args)
    if options is not None:
        fill_defaults(args, options)
    with open_dict(cfg):
        for key, value in vars(args).items():
            if key not in cfg or cfg[key] != value:
                cfg[key] = value
