"""The command-line convention of the tools that load a trained model: a positional checkpoint
(a file, or a directory holding ``--checkpoint-file``), ``--data`` for the data directory or
dictionaries, ``--cpu`` to stay on the CPU. Tools that used to spell the checkpoint ``--path``
keep it as an alias; those whose old form was ``DATA --path CHECKPOINT`` still accept it."""
import argparse

from fairseq_ctx.core.tool_loading import DEFAULT_CHECKPOINT_FILE

DATA_HELP = ("directory with the dictionaries (default: the checkpoint directory if it holds dict.*.txt, else the "
             "data directory recorded in the checkpoint)")


def add_checkpoint_args(parser: argparse.ArgumentParser, data_help: str = DATA_HELP, path_alias: bool = False) -> None:
    """``checkpoint``, ``--checkpoint-file``, ``--data``, ``--cpu`` (and the ``--path`` alias);
    call :func:`resolve_checkpoint_args` after parsing when ``path_alias`` is set."""
    parser.add_argument("checkpoint", nargs="?" if path_alias else None,
                        help="checkpoint file, or a directory holding --checkpoint-file")
    parser.add_argument("--checkpoint-file", default=DEFAULT_CHECKPOINT_FILE,
                        help="file name inside a checkpoint directory")
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
    """The convention plus what the translation tools share: ``--spm`` and ``--batch-size``."""
    add_checkpoint_args(parser)
    parser.add_argument("--spm", help="sentencepiece model applied to the text (and undone on output)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per batch")


def load_translator(args: argparse.Namespace, **generation):
    from fairseq_ctx.context import hub

    return hub.load(args.checkpoint, checkpoint_file=args.checkpoint_file, data=args.data, spm_model=args.spm,
                    cpu=args.cpu, **generation)
