"""Command-line options shared by the tools that load a trained model."""
import argparse


def add_model_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="checkpoint file, or a directory holding --checkpoint-file")
    parser.add_argument("--checkpoint-file", default="checkpoint_best.pt", help="file name inside a checkpoint directory")
    parser.add_argument("--data", help="directory with the dictionaries (default: the checkpoint directory if it "
                                       "holds dict.*.txt, else the data directory recorded in the checkpoint)")
    parser.add_argument("--spm", help="sentencepiece model applied to the text (and undone on output)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per batch")
    parser.add_argument("--cpu", action="store_true", help="stay on the CPU even when CUDA is available")


def load_translator(args: argparse.Namespace, **generation):
    from fairseq_ctx.context import hub

    return hub.load(args.checkpoint, checkpoint_file=args.checkpoint_file, data=args.data, spm_model=args.spm,
                    cpu=args.cpu, **generation)
