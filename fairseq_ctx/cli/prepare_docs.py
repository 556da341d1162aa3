"""``fairseq-ctx-prepare-docs``: parallel text → ``PREFIX.SRC``, ``PREFIX.TGT`` and
``PREFIX.docids`` ready for fairseq-preprocess, from either layout:

  documents       --src-docs/--tgt-docs: plain-text documents, a blank line between documents
  one-line context  --src-context/--src-sentences/--tgt-context/--tgt-sentences: one example per
                  line, its preceding sentences on one line of the context files (SCAT, the text
                  extraction of ContraPro, ...); each example becomes a document [context line,
                  sentence] (the sentence alone when a side has no context), and PREFIX.sentence_ids
                  lists the line of each example's sentence. Train with --context-size 1.

After ``fairseq-preprocess``, copy the docids next to the binarized split:
``cp PREFIX.docids DATA_BIN/SPLIT.docids``.

Examples:
    fairseq-ctx-prepare-docs --src-docs raw/train.en --tgt-docs raw/train.de --out-prefix prep/train \\
      --src-lang en --tgt-lang de
    fairseq-ctx-prepare-docs --src-context scat/highlighted.train.context.en --src-sentences \\
      scat/highlighted.train.en --tgt-context scat/highlighted.train.context.fr --tgt-sentences \\
      scat/highlighted.train.fr --remove-scat-markers --out-prefix prep/train --src-lang en --tgt-lang fr
"""
import sys

from fairseq_ctx.cli.tool_args import tool_parser

ONE_LINE = ("--src-context", "--src-sentences", "--tgt-context", "--tgt-sentences")


def main(argv=None) -> None:
    parser = tool_parser(__doc__)
    parser.add_argument("--src-docs", help="source documents, blank line between documents")
    parser.add_argument("--tgt-docs", help="target documents, same layout")
    parser.add_argument("--src-context", help="one-line context: the source sentences before each example, one line each")
    parser.add_argument("--src-sentences", help="one-line context: the source sentence of each example")
    parser.add_argument("--tgt-context", help="one-line context: the target sentences before each example")
    parser.add_argument("--tgt-sentences", help="one-line context: the target sentence of each example")
    parser.add_argument("--remove-scat-markers", action="store_true",
                        help="one-line context: remove SCAT's <p>...</p> and <hon>...<hoff> markers (Yin et al., 2021)")
    parser.add_argument("--out-prefix", required=True, help="writes PREFIX.SRC_LANG, PREFIX.TGT_LANG, PREFIX.docids "
                        "(and PREFIX.sentence_ids for one-line context)")
    parser.add_argument("--src-lang", required=True,
                        help="source language: the suffix of PREFIX.SRC_LANG (fairseq-preprocess --source-lang)")
    parser.add_argument("--tgt-lang", required=True,
                        help="target language: the suffix of PREFIX.TGT_LANG (fairseq-preprocess --target-lang)")
    parser.add_argument("--doc-prefix", default="doc", help="document ids are DOC_PREFIX0, DOC_PREFIX1, ...")
    args = parser.parse_args(argv)
    one_line = [getattr(args, option[2:].replace("-", "_")) for option in ONE_LINE]
    documents = args.src_docs is not None or args.tgt_docs is not None
    if documents == any(one_line) or (documents and not (args.src_docs and args.tgt_docs)) or \
            (any(one_line) and not all(one_line)):
        parser.error("give --src-docs and --tgt-docs (documents), or all of " + ", ".join(ONE_LINE)
                     + " (one-line context)")
    if args.remove_scat_markers and documents:
        parser.error("--remove-scat-markers is for one-line context files")
    if documents:
        from fairseq_ctx.context.data.prepare_docs import prepare

        try:
            n = prepare(args.src_docs, args.tgt_docs, args.out_prefix, args.src_lang, args.tgt_lang, args.doc_prefix)
        except ValueError as err:
            sys.exit(f"fairseq-ctx-prepare-docs: {err}")
        print(f"{n} sentence pairs written to {args.out_prefix}.{{{args.src_lang},{args.tgt_lang},docids}}")
        return
    from fairseq_ctx.context.contrastive.scat import unmark
    from fairseq_ctx.context.data.one_line_context import collapse_spaces, convert

    try:
        examples, lines = convert(*one_line, args.out_prefix, args.src_lang, args.tgt_lang, args.doc_prefix,
                                  unmark if args.remove_scat_markers else collapse_spaces)
    except ValueError as err:
        sys.exit(f"fairseq-ctx-prepare-docs: {err}")
    print(f"{examples} examples, {lines} sentence pairs written to "
          f"{args.out_prefix}.{{{args.src_lang},{args.tgt_lang},docids,sentence_ids}}")


if __name__ == "__main__":
    main()
