"""The command-line convention of the tools that load a trained model: a positional checkpoint
(a file, or a directory holding ``--checkpoint-file``), ``--data`` for the data directory or
dictionaries, ``--cpu`` to stay on the CPU. Tools that used to spell the checkpoint ``--path``
keep it as an alias; those whose old form was ``DATA --path CHECKPOINT`` still accept it.
Also the usage errors every tool shares: an output path that would overwrite an input, and a
generator's non-empty output directory; and the parser every tool starts from (:func:`tool_parser`),
whose ``--help`` shows each option's default."""
import argparse
import os
from typing import Dict, Mapping, Optional

from fairseq_ctx.cli.broken_pipe import end_quietly_on_a_closed_pipe
from fairseq_ctx.core.output_paths import (OutputPathError, PathSpec, check_output_dir, check_outputs, check_writable,
                                           split_files)
from fairseq_ctx.core.tool_loading import DEFAULT_CHECKPOINT_FILE


class ToolHelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """``--help`` of the tools: the description keeps its own line breaks (examples, tables) and
    every option's help ends with its default, ``(default: VALUE)``. No default is shown where
    there is none to show: ``None`` (the option is simply not given; its help says what that
    means), ``False`` of an on/off flag, or a help that places ``%(default)s`` itself. An empty
    string is shown as ``''``, a list as its items (``none`` when empty)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if not shows_default(action) or "%(default)" in text:
            return text
        shown = shown_default(action.default).replace("%", "%%")  # argparse %-formats the help
        return f"{text} (default: {shown})" if text else f"(default: {shown})"


def shows_default(action: argparse.Action) -> bool:
    """Whether :class:`ToolHelpFormatter` adds ``action``'s default to its help."""
    default = action.default
    if default is None or default is False or default is argparse.SUPPRESS:  # `is`: 0 is a default to show
        return False
    return bool(action.option_strings) or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE)


def shown_default(value) -> str:
    """A default as ``--help`` writes it."""
    if isinstance(value, (list, tuple)):
        return " ".join(str(item) for item in value) or "none"
    return "''" if value == "" else str(value)


def tool_parser(description: str) -> argparse.ArgumentParser:
    """The argument parser of a ``fairseq-ctx-*`` tool: ``description`` (the module docstring) as it
    is written, each option's default in ``--help`` (:class:`ToolHelpFormatter`). Every tool's
    ``main`` calls it first, so it also makes the running tool end quietly on a closed pipe
    (:mod:`fairseq_ctx.cli.broken_pipe`)."""
    end_quietly_on_a_closed_pipe()
    return argparse.ArgumentParser(description=description, formatter_class=ToolHelpFormatter)


DATA_HELP = ("directory with the dictionaries (default: the checkpoint directory if it holds dict.*.txt, else the "
             "data directory recorded in the checkpoint)")


def add_checkpoint_args(parser: argparse.ArgumentParser, data_help: str = DATA_HELP, path_alias: bool = False) -> None:
    """``checkpoint``, ``--checkpoint-file``, ``--data``, ``--cpu`` (and the ``--path`` alias);
    call :func:`resolve_checkpoint_args` after parsing when ``path_alias`` is set."""
    parser.add_argument("checkpoint", nargs="?" if path_alias else None,
                        help="checkpoint file, or a directory holding --checkpoint-file")
    parser.add_argument("--checkpoint-file", default=DEFAULT_CHECKPOINT_FILE,
                        help="file read when CHECKPOINT is a directory, e.g. checkpoint_last.pt or checkpoint12.pt; "
                             "a CHECKPOINT that is a file is read as given")
    parser.add_argument("--data", help=data_help)
    parser.add_argument("--cpu", action="store_true", help="stay on the CPU even when CUDA is available")
    if path_alias:
        parser.add_argument("--path", help="old spelling of the positional checkpoint; with it, a positional "
                                           "argument is read as --data (the old 'DATA --path CHECKPOINT' form)")


def resolve_checkpoint_args(parser: argparse.ArgumentParser, args: argparse.Namespace,
                            data_required: bool = False) -> argparse.Namespace:
    """Fold the ``--path`` alias into ``args.checkpoint`` and check that what is needed is given."""
    if args.path is not None:
        if args.checkpoint is not None:
            if args.data is not None:
                parser.error("give the checkpoint once: as the positional argument or as --path, not both")
            args.data = args.checkpoint
        args.checkpoint = args.path
    if args.checkpoint is None:
        parser.error("the checkpoint is required: CHECKPOINT (a file, or a directory holding --checkpoint-file)")
    if data_required and args.data is None:
        parser.error("--data DIR is required: the data directory the checkpoint was trained on")
    return args


def add_model_args(parser: argparse.ArgumentParser) -> None:
    """The convention plus what the translation tools share: ``--spm`` and ``--batch-size``;
    call :func:`check_model_args` after parsing."""
    add_checkpoint_args(parser)
    parser.add_argument("--spm", help="sentencepiece model applied to the text (and undone on output)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per batch, i.e. per forward pass of "
                        "the model")


def check_model_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Usage errors for the options of :func:`add_model_args`, before any model is loaded."""
    refuse_below_one(parser, {"--batch-size": args.batch_size})
    check_sentencepiece(parser, args.spm)


def refuse_below_one(parser: argparse.ArgumentParser, sizes: Mapping[str, Optional[int]]) -> None:
    """Exit with a usage error when one of the ``sizes`` (option → value) is below 1."""
    for option, value in sizes.items():
        if value is not None and value < 1:
            parser.error(f"{option} must be at least 1, got {value}")


def check_sentencepiece(parser: argparse.ArgumentParser, model: Optional[str]) -> None:
    """Exit with a usage error when ``--spm`` is given and is not a readable sentencepiece model."""
    if model is None:
        return
    from fairseq_ctx.core.sentencepiece_codec import SentencePieceCodec

    try:
        SentencePieceCodec(model)
    except (OSError, ValueError) as err:
        parser.error(str(err))


def refuse_bad_generation(parser: argparse.ArgumentParser, **sizes) -> None:
    """Exit with a usage error for decoder sizes that cannot decode (``core.generation_options``)."""
    from fairseq_ctx.core.generation_options import generation_problems

    problems = generation_problems(**sizes)
    if problems:
        parser.error("; ".join(problems))


def checkpoint_path(path: str, checkpoint_file: str) -> str:
    """The checkpoint file a tool reads: ``path`` itself, or ``path/checkpoint_file`` for a directory."""
    return os.path.join(path, checkpoint_file) if os.path.isdir(path) else path


def checkpoint_inputs(args: argparse.Namespace, *splits: str) -> Dict[str, PathSpec]:
    """The files a tool of :func:`add_checkpoint_args` reads besides its own inputs: the checkpoint and
    the dictionaries (and the named splits) of --data or of the checkpoint directory. Call it after
    :func:`resolve_checkpoint_args`."""
    checkpoint = checkpoint_path(args.checkpoint, args.checkpoint_file)
    directory = args.data or os.path.dirname(os.path.abspath(checkpoint))
    return {"checkpoint": checkpoint, "--data": split_files(directory, *splits)}


def model_inputs(args: argparse.Namespace, *splits: str) -> Dict[str, PathSpec]:
    """:func:`checkpoint_inputs` plus the sentencepiece model of :func:`add_model_args`."""
    return {**checkpoint_inputs(args, *splits), "--spm": args.spm}


def refuse_overwriting(parser: argparse.ArgumentParser, outputs: Mapping[str, PathSpec],
                       inputs: Mapping[str, PathSpec], creates_directories: bool = False) -> None:
    """Exit with a usage error (status 2) when an output path is one of the inputs or another output,
    or cannot be written where it is named (a missing directory, unless the tool
    ``creates_directories``)."""
    try:
        check_outputs(outputs, inputs)
        check_writable(outputs, creates_directories)
    except OutputPathError as err:
        parser.error(str(err))


def add_overwrite_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--overwrite", action="store_true",
                        help="write into the output directory even when it already holds files")


def refuse_non_empty_dir(parser: argparse.ArgumentParser, directory: str, overwrite: bool) -> None:
    """Exit with a usage error when a generator's output directory holds files and --overwrite is not given."""
    try:
        check_output_dir(directory, overwrite)
    except OutputPathError as err:
        parser.error(str(err))


def load_translator(parser: argparse.ArgumentParser, args: argparse.Namespace, **generation):
    """The tool's DocumentTranslator; a missing or unusable checkpoint ends the tool with one line
    (exit status 2) naming the file and the fix."""
    from fairseq_ctx.context import hub
    from fairseq_ctx.core.checkpoint_loading import CheckpointError

    try:
        return hub.load(args.checkpoint, checkpoint_file=args.checkpoint_file, data=args.data, spm_model=args.spm,
                        cpu=args.cpu, **generation)
    except (FileNotFoundError, CheckpointError) as err:
        parser.exit(2, f"{parser.prog}: error: {err}\n")


def add_multimodal_input_args(parser: argparse.ArgumentParser) -> None:
    """The inputs of a multimodal_translation model besides its text; by default the ones it was
    trained with (read from the checkpoint), a value given otherwise is refused."""
    parser.add_argument("--feature-inputs",
                        help="comma-separated dense inputs, {split}.{name}.npy in --data (the task's --feature-inputs, "
                             "e.g. img); default: the ones the model was trained with")
    parser.add_argument("--extra-source-langs",
                        help="comma-separated extra source languages, binarized as {split}.{lang}-{tgt}.{lang} in "
                             "--data (the task's --extra-source-langs); default: the ones the model was trained with")
    parser.add_argument("--extra-source-dict", choices=["shared", "own"],
                        help="dictionary of the extra sources: 'shared' (the source dictionary) or 'own' "
                             "(dict.{lang}.txt in --data); default: the one the model was trained with")


def multimodal_inputs(args: argparse.Namespace) -> Dict[str, Optional[str]]:
    """The input options of :func:`add_multimodal_input_args` as given (None: not given)."""
    return {"feature_inputs": args.feature_inputs, "extra_source_langs": args.extra_source_langs,
            "extra_source_dict": args.extra_source_dict}
