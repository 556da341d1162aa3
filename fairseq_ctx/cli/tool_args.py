"""Command-line options shared by the tools: loading a trained model, and refusing an output
path that would overwrite an input."""
import argparse
import os
from typing import Dict, Mapping

from fairseq_ctx.core.output_paths import OutputPathError, PathSpec, check_output_dir, check_outputs, split_files


def add_model_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="checkpoint file, or a directory holding --checkpoint-file")
    parser.add_argument("--checkpoint-file", default="checkpoint_best.pt", help="file name inside a checkpoint directory")
    parser.add_argument("--data", help="directory with the dictionaries (default: the checkpoint directory if it "
                                       "holds dict.*.txt, else the data directory recorded in the checkpoint)")
    parser.add_argument("--spm", help="sentencepiece model applied to the text (and undone on output)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per batch")
    parser.add_argument("--cpu", action="store_true", help="stay on the CPU even when CUDA is available")


def model_inputs(args: argparse.Namespace, *splits: str) -> Dict[str, PathSpec]:
    """The files a tool of :func:`add_model_args` reads besides its own inputs: the checkpoint, the
    sentencepiece model, the dictionaries (and the named splits) of --data or the checkpoint directory."""
    checkpoint = args.checkpoint
    if os.path.isdir(checkpoint):
        checkpoint = os.path.join(checkpoint, args.checkpoint_file)
    directory = args.data or os.path.dirname(os.path.abspath(checkpoint))
    return {"checkpoint": checkpoint, "--spm": args.spm, "--data": split_files(directory, *splits)}


def refuse_overwriting(parser: argparse.ArgumentParser, outputs: Mapping[str, PathSpec],
                       inputs: Mapping[str, PathSpec]) -> None:
    """Exit with a usage error (status 2) when an output path is one of the inputs or another output."""
    try:
        check_outputs(outputs, inputs)
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


def load_translator(args: argparse.Namespace, **generation):
    from fairseq_ctx.context import hub

    return hub.load(args.checkpoint, checkpoint_file=args.checkpoint_file, data=args.data, spm_model=args.spm,
                    cpu=args.cpu, **generation)
