"""``fairseq-ctx-translate-doc``: translate raw documents with a context-aware model.

Input (a file or stdin): one sentence per line, a blank line between documents. Output: one
translation per input line, blank lines kept, so document boundaries are preserved. Each
sentence is translated with the previous sentences of its document as context; sentences are
batched across documents, the input is read as a stream (only the running context and one
batch are held) and each batch is written as soon as it is translated. A model trained with
--target-context-size M > 0 also reads its own translations of the previous M sentences: up to
--batch-size documents are held and sentence i of all of them is translated in one batch.

The length limit is fairseq's (--max-len-a 0 --max-len-b 200, as fairseq-interactive), so the
translations do not depend on --batch-size. The context each sentence reads is logged at the
start, the documents and sentences translated at the end; a warning names the input when it is
mostly <unk> (e.g. --spm left out).

With --docids the input is sentence-per-line text with its document ids, e.g. the output of
fairseq-ctx-prepare-docs, and the output aligns with its target file (no blank lines).

Example:
    fairseq-ctx-translate-doc checkpoints/hmce --spm spm.model --input talk.en > talk.de
    fairseq-ctx-translate-doc checkpoints/hmce --input test.en --docids test.docids > test.hyp.de
    cat docs.en | fairseq-ctx-translate-doc checkpoints/hmce/checkpoint_best.pt --beam 5
"""
import sys
from typing import Iterable, Iterator

from fairseq_ctx.cli.broken_pipe import discard_stdout
from fairseq_ctx.cli.tool_args import (add_model_args, check_model_args, load_translator, refuse_bad_generation,
                                      tool_parser)
from fairseq_ctx.cli.tool_logging import configure_tool_logging
from fairseq_ctx.context.data.docids import DocumentIdError
from fairseq_ctx.context.data.document_boundaries import DocumentIdBoundaries
from fairseq_ctx.core.output_paths import stdout_is, stdout_is_stdin
from fairseq_ctx.core.progress import progress
from fairseq_ctx.core.text_input import TextEncodingError, check_utf8, utf8_lines


class DocumentCount:
    """Counts the documents and sentences of the lines passing through :meth:`reading`."""

    def __init__(self):
        self.documents = self.sentences = 0
        self.blank = True

    def reading(self, lines: Iterable[str]) -> Iterator[str]:
        for line in lines:
            blank = not line.strip()
            self.sentences += not blank
            self.documents += self.blank and not blank
            self.blank = blank
            yield line


def main(argv=None) -> None:
    parser = tool_parser(__doc__)
    add_model_args(parser)
    parser.add_argument("--input", default="-", help="documents to translate, a blank line between documents; '-' "
                        "reads standard input")
    parser.add_argument("--docids",
                        help="the input is one sentence per line without blank lines, and this file gives each line's "
                             "document id (the PREFIX.docids that fairseq-ctx-prepare-docs writes with PREFIX.{src,tgt}); "
                             "the output then has one translation per input line, aligned with PREFIX.{tgt}")
    parser.add_argument("--beam", type=int, default=5, help="beam size (1: greedy search)")
    parser.add_argument("--lenpen", type=float, default=1.0,
                        help="length penalty (fairseq's): a hypothesis' log-probability is divided by its length to "
                             "the power LENPEN; < 1 favours shorter translations, > 1 longer ones")
    parser.add_argument("--max-len-a", type=float, default=0,
                        help="a of the longest output, a * source length + b tokens; fairseq's generator takes the "
                             "longest source of the batch, so with a > 0 a translation depends on --batch-size (a = 0, "
                             "fairseq's default, does not)")
    parser.add_argument("--max-len-b", type=int, default=200,
                        help="b of the longest output, a * source length + b tokens, as in fairseq-interactive")
    args = parser.parse_args(argv)
    check_model_args(parser, args)
    refuse_bad_generation(parser, beam=args.beam, max_len_a=args.max_len_a, max_len_b=args.max_len_b)
    name = "<stdin>" if args.input == "-" else args.input
    if args.input == "-" and stdout_is_stdin():
        parser.error("standard output is redirected into the file standard input reads; writing there would destroy "
                     "the input. Redirect the translation to another file")
    if args.input != "-":
        if stdout_is(args.input):
            parser.error(f"standard output is redirected into the input {args.input}; writing there would destroy "
                         f"the input. Redirect the translation to another file")
        try:
            check_utf8(args.input)
        except (TextEncodingError, OSError) as err:
            parser.exit(2, f"fairseq-ctx-translate-doc: error: {err}\n")
    logger = configure_tool_logging("translate_doc")
    translator = load_translator(parser, args, beam=args.beam, lenpen=args.lenpen, max_len_a=args.max_len_a,
                                 max_len_b=args.max_len_b)
    source = sys.stdin.buffer if args.input == "-" else open(args.input, "rb")
    count = DocumentCount()
    try:
        boundaries = DocumentIdBoundaries(args.docids) if args.docids else None
        lines = utf8_lines(source, name) if boundaries is None else boundaries.lines(utf8_lines(source, name), name)
        translations = translator.translate_stream(count.reading(lines), batch_size=args.batch_size, source=name)
        if boundaries is not None:
            translations = boundaries.translations(translations)
        for written, translation in enumerate(progress(translations, desc="translate", unit="line")):
            try:
                sys.stdout.write(translation + "\n")
                sys.stdout.flush()
            except BrokenPipeError:
                raise  # its reader has stopped reading: a quiet end (cli.broken_pipe)
            except OSError as err:
                discard_stdout()  # what is still buffered could not be written at exit either
                parser.exit(1, f"fairseq-ctx-translate-doc: error: standard output could not be written after "
                               f"{written} translated lines ({err.strerror}, errno {err.errno}): what it received is "
                               f"incomplete; free space where it is written (or write it elsewhere) and translate "
                               f"again\n")
        logger.info(f"translated {count.documents} documents, {count.sentences} sentences of {name}")
    except (TextEncodingError, DocumentIdError) as err:
        parser.exit(2, f"fairseq-ctx-translate-doc: error: {err}\n")
    finally:
        if source is not sys.stdin.buffer:
            source.close()


if __name__ == "__main__":
    main()
