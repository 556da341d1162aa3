"""``fairseq-ctx-embed``: one float32 embedding row per input line, streamed to a .npy file.

Memory stays constant in the number of lines: the file is read in chunks, each chunk is
sorted by length and batched by token count, and rows are written into a memory-mapped .npy
whose shape is known from a first counting pass. Output order = input order.
"""
import os

from fairseq_ctx.cli.tool_args import (add_checkpoint_args, check_sentencepiece, checkpoint_inputs, refuse_below_one,
                                      refuse_overwriting, resolve_checkpoint_args, tool_parser)
from fairseq_ctx.core.text_input import TextEncodingError, check_utf8
from fairseq_ctx.cli.tool_logging import configure_tool_logging


def main(argv=None) -> None:
    parser = tool_parser(__doc__)
    add_checkpoint_args(parser, data_help="data directory with the dictionary (default: the checkpoint directory if "
                        "it holds dict.*.txt, else the one recorded in the checkpoint)", path_alias=True)
    parser.add_argument("--lang", required=True,
                        help="language of the input: its code in the model's --lang-pairs (e.g. de), not the data "
                             "set's own code (deu); must be one the model was trained on")
    parser.add_argument("--input", required=True, help="text file, one sentence or document per line "
                        "(tokenized/BPE'd like the training data unless --spm is given)")
    parser.add_argument("--output", required=True, help="output .npy, shape (lines, d), float32")
    parser.add_argument("--spm", help="sentencepiece model applied to every line first")
    parser.add_argument("--max-tokens", type=int, default=12000,
                        help="padded tokens per batch (batch size × longest line)")
    parser.add_argument("--max-doc-tokens", type=int, default=750,
                        help="only the first N tokens of a line are embedded; Li (2021) uses 750")
    parser.add_argument("--chunk-lines", type=int, default=20000, help="lines read and sorted at a time")
    parser.add_argument("--cuda", action="store_true", help="old option, no effect: the GPU is used whenever one "
                        "is available unless --cpu")
    args = resolve_checkpoint_args(parser, parser.parse_args(argv))
    refuse_overwriting(parser, {"--output": args.output},
                       {"--input": args.input, "--spm": args.spm, **checkpoint_inputs(args)})
    refuse_below_one(parser, {"--max-tokens": args.max_tokens, "--max-doc-tokens": args.max_doc_tokens,
                              "--chunk-lines": args.chunk_lines})
    if not os.path.isfile(args.input):
        parser.error(f"--input {args.input} " + ("is a directory" if os.path.isdir(args.input) else "does not exist")
                     + "; give a text file, one sentence or document per line")
    try:
        check_utf8(args.input)
    except TextEncodingError as err:
        parser.error(str(err))
    check_sentencepiece(parser, args.spm)
    configure_tool_logging("embed")
    from fairseq_ctx.embedding.embedder import Embedder, embed_file

    try:
        embedder = Embedder(args.checkpoint, args.lang, args.data, args.spm, args.max_doc_tokens, cpu=args.cpu,
                            checkpoint_file=args.checkpoint_file)
    except (ValueError, FileNotFoundError) as err:
        parser.exit(2, f"fairseq-ctx-embed: error: {err}\n")
    try:
        count = embed_file(embedder, args.input, args.output, args.max_tokens, args.chunk_lines)
    except TextEncodingError as err:
        parser.exit(2, f"fairseq-ctx-embed: error: {err}\n")
    except OSError as err:  # a full disk, or another run writing the same --output
        parser.exit(1, f"fairseq-ctx-embed: error: {err.strerror or err}\n")
    print(f"embedded {count} lines of {args.input} -> {args.output}")


if __name__ == "__main__":
    main()
