"""``fairseq-ctx-make-multilingual-corpus``: write the generated multilingual embedding demo corpus."""
from fairseq_ctx.cli.tool_args import add_overwrite_arg, refuse_below_one, refuse_non_empty_dir, tool_parser
from fairseq_ctx.embedding.demo.multilingual_corpus import LANGUAGES, PIVOTS, MultilingualSizes, write_multilingual_corpus


def main(argv=None) -> None:
    parser = tool_parser(__doc__)
    parser.add_argument("out_dir", help="directory for {split}.{lang}, {split}.doc.{lang}, {split}.doc.labels")
    parser.add_argument("--seed", type=int, default=1, help="seed of the languages' vocabularies and of the documents "
                        "(the same seed writes the same corpus)")
    parser.add_argument("--train-docs", type=int, default=MultilingualSizes.train_docs,
                        help="documents in the train split (3 to 5 sentences each, the same in every language)")
    parser.add_argument("--valid-docs", type=int, default=MultilingualSizes.valid_docs,
                        help="documents in the valid split")
    parser.add_argument("--test-docs", type=int, default=MultilingualSizes.test_docs,
                        help="documents in the test split")
    add_overwrite_arg(parser)
    args = parser.parse_args(argv)
    refuse_below_one(parser, {"--train-docs": args.train_docs, "--valid-docs": args.valid_docs,
                              "--test-docs": args.test_docs})
    refuse_non_empty_dir(parser, args.out_dir, args.overwrite)
    sizes = MultilingualSizes(args.train_docs, args.valid_docs, args.test_docs)
    counts = write_multilingual_corpus(args.out_dir, sizes, seed=args.seed)
    print(" ".join(f"{split}={n} sentences" for split, n in counts.items())
          + f" in languages {' '.join(spec.name for spec in LANGUAGES)} (pivots {' '.join(PIVOTS)}) -> {args.out_dir}")


if __name__ == "__main__":
    main()
