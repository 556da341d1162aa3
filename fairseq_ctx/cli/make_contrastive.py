"""``fairseq-ctx-make-contrastive``: write a contrastive pronoun test set generated like the
demo corpus (``fairseq_ctx.context.demo.contrastive_set``), ready for ``fairseq-ctx-contrastive``.

Example:
    fairseq-ctx-make-contrastive contrastive --docs 60 --context-size 2
    # → contrastive/contrastive.{src.en,ref.de,contrastive0.de,contrastive1.de,context0.en,context1.en,category}
"""
from fairseq_ctx.cli.tool_args import add_overwrite_arg, refuse_below_one, refuse_non_empty_dir, tool_parser
from fairseq_ctx.context.demo.contrastive_set import write_contrastive_set


def main(argv=None) -> None:
    parser = tool_parser(__doc__)
    parser.add_argument("out_dir", help="directory for contrastive.{src.en,ref.de,contrastive0.de,contrastive1.de,"
                        "context0.en,...,category}, one example per line")
    parser.add_argument("--docs", type=int, default=60,
                        help="documents to generate; every pronoun sentence in them becomes one example")
    parser.add_argument("--seed", type=int, default=1,
                        help="seed of the document generator (the same seed writes the same set)")
    parser.add_argument("--context-size", type=int, default=2,
                        help="context files to write, contextK.en = the sentence K+1 back (context0: the previous one)")
    add_overwrite_arg(parser)
    args = parser.parse_args(argv)
    refuse_below_one(parser, {"--docs": args.docs, "--context-size": args.context_size})  # no context: no test
    refuse_non_empty_dir(parser, args.out_dir, args.overwrite)
    count = write_contrastive_set(args.out_dir, args.docs, args.seed, args.context_size)
    print(f"{count} contrastive examples written to {args.out_dir}")


if __name__ == "__main__":
    main()
