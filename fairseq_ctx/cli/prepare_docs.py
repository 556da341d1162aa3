"""``fairseq-ctx-prepare-docs``: parallel plain-text documents (blank line between documents)
→ ``PREFIX.SRC``, ``PREFIX.TGT`` and ``PREFIX.docids`` ready for fairseq-preprocess.

After ``fairseq-preprocess``, copy the docids next to the binarized split:
``cp PREFIX.docids DATA_BIN/SPLIT.docids``.
"""
import argparse
import sys


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src-docs", required=True, help="source documents, blank line between documents")
    parser.add_argument("--tgt-docs", required=True, help="target documents, same layout")
    parser.add_argument("--out-prefix", required=True, help="writes PREFIX.SRC_LANG, PREFIX.TGT_LANG, PREFIX.docids")
    parser.add_argument("--src-lang", required=True)
    parser.add_argument("--tgt-lang", required=True)
    parser.add_argument("--doc-prefix", default="doc", help="document ids are DOC_PREFIX0, DOC_PREFIX1, ...")
    args = parser.parse_args(argv)
    from fairseq_ctx.context.data.prepare_docs import prepare

    try:
        n = prepare(args.src_docs, args.tgt_docs, args.out_prefix, args.src_lang, args.tgt_lang, args.doc_prefix)
    except ValueError as err:
        sys.exit(f"fairseq-ctx-prepare-docs: {err}")
    print(f"{n} sentence pairs written to {args.out_prefix}.{{{args.src_lang},{args.tgt_lang},docids}}")


if __name__ == "__main__":
    main()
