"""The options of an architecture, its task and its criterion with the values ``fairseq-train``
gives them (after the architecture function), in four groups: the architecture's own options,
the fairseq Transformer options its model inherits, the task's (its own first) and the
criterion's. What ``fairseq-ctx-options`` prints."""
import argparse
import dataclasses
import re
import textwrap
from dataclasses import dataclass
from typing import List, Optional, Sequence, Type

GROUPS = ("arch", "transformer", "task", "criterion")
FIRST_SENTENCE = re.compile(r"(?<=\.)\s+(?=[A-Z(])")


@dataclass
class Option:
    """One command-line option: its flag, the value it has unless given, and its help."""

    flag: str
    value: str
    help: str


@dataclass
class OptionGroup:
    """Options of one part of a training command (``key`` is one of :data:`GROUPS`)."""

    key: str
    title: str
    options: List[Option]


def _shown(value) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return "''" if value == "" else str(value)


def _options(config_class: Optional[Type], args: argparse.Namespace) -> List[Option]:
    """The options of ``config_class`` (a FairseqDataclass) in field order, with their values in
    ``args`` (the dataclass default when ``args`` lacks one)."""
    from fairseq.dataclass.utils import gen_parser_from_dataclass

    if config_class is None:
        return []
    parser = argparse.ArgumentParser(add_help=False)
    gen_parser_from_dataclass(parser, config_class(), with_prefix="")  # nested configs flat, as fairseq's transformer
    return _parser_options(parser, args)


def _parser_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> List[Option]:
    found = []
    for action in parser._actions:
        if not action.option_strings or action.dest == "help":
            continue
        value = getattr(args, action.dest, action.default)
        found.append(Option(action.option_strings[0], _shown(value), " ".join((action.help or "").split())))
    return found


def _own_first(config_class: Type) -> List[str]:
    """Field names of ``config_class``: those it declares itself first, then the inherited ones."""
    names = [f.name for f in dataclasses.fields(config_class)]
    parents = {f.name for base in config_class.__mro__[1:] if dataclasses.is_dataclass(base)
               for f in dataclasses.fields(base)}
    return [n for n in names if n not in parents] + [n for n in names if n in parents]


def option_groups(arch: str, task: str, criterion: str) -> List[OptionGroup]:
    """The four groups for ``fairseq-train --task TASK --arch ARCH --criterion CRITERION``."""
    from fairseq import options
    from fairseq.criterions import CRITERION_DATACLASS_REGISTRY
    from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_DATACLASS_REGISTRY, MODEL_REGISTRY
    from fairseq.tasks import TASK_DATACLASS_REGISTRY

    parser = options.get_training_parser(default_task=task)
    args = options.parse_args_and_arch(parser, ["DATA", "--task", task, "--arch", arch, "--criterion", criterion])
    model_class = ARCH_MODEL_REGISTRY[arch]
    model = next(name for name, cls in MODEL_REGISTRY.items() if cls is model_class)
    model_config = MODEL_DATACLASS_REGISTRY.get(model)
    own_config = getattr(model_class, "options", None)
    own = [f.name for f in dataclasses.fields(own_config)] if own_config is not None else None
    if model_config is not None:
        everything = _options(model_config, args)
    else:  # a model without a registered dataclass (fairseq's transformer): its add_args, values from args
        legacy = argparse.ArgumentParser(add_help=False)
        model_class.add_args(legacy)
        everything = _parser_options(legacy, args)
    own_options = everything if own is None else [o for o in everything if o.flag in _flags(own)]
    inherited = [o for o in everything if o not in own_options]
    task_config = TASK_DATACLASS_REGISTRY.get(task)
    task_names = _own_first(task_config) if task_config is not None else []
    task_options = sorted(_options(task_config, args), key=lambda o: _position(o.flag, task_names))
    return [
        OptionGroup("arch", f"--arch {arch}: options of the model {model} (values as --arch {arch} sets them)",
                    own_options),
        OptionGroup("transformer", f"fairseq Transformer options of {model} (values as --arch {arch} sets them)",
                    inherited),
        OptionGroup("task", f"--task {task} (its own options first)", task_options),
        OptionGroup("criterion", f"--criterion {criterion}",
                    _options(CRITERION_DATACLASS_REGISTRY.get(criterion), args)),
    ]


def _flags(names: Sequence[str]) -> List[str]:
    return ["--" + name.replace("_", "-") for name in names]


def _position(flag: str, names: List[str]) -> int:
    name = flag[2:].replace("-", "_")
    return names.index(name) if name in names else len(names)


def format_groups(groups: Sequence[OptionGroup], long: bool = False, width: int = 110) -> str:
    """One line per option (flag, value, the first sentence of its help cut to ``width``), or with
    ``long`` the whole help wrapped under it."""
    lines = []
    for group in groups:
        if not group.options:
            continue
        lines += ["", f"{group.title}:"] if lines else [f"{group.title}:"]
        flag_width = min(36, max(len(o.flag) for o in group.options))
        value_width = min(14, max(len(o.value) for o in group.options))
        for option in group.options:
            head = f"  {option.flag:<{flag_width}}  {option.value:<{value_width}}"
            if long:
                lines.append(head.rstrip())
                lines += textwrap.wrap(option.help, width, initial_indent=" " * 6, subsequent_indent=" " * 6)
                continue
            summary = FIRST_SENTENCE.split(option.help, maxsplit=1)[0]
            room = max(20, width - len(head) - 2)
            if len(summary) > room:
                summary = summary[: room - 1].rstrip() + "…"
            lines.append(f"{head}  {summary}".rstrip())
    return "\n".join(lines)
