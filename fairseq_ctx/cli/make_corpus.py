"""``fairseq-ctx-make-corpus``: write the generated document-level demo corpus.

Settings:
  standard  the target pronoun (er/sie/es) agrees with a noun 1-2 sentences back
  hard      also antecedents 3-4 sentences back behind distractor nouns (train with --context-size 4)
  target    a source noun has two target synonyms of different genders, picked at random in the
            reference; the next sentence's pronoun agrees with the synonym picked, which only the
            previous TARGET sentence shows (train with --target-context-size 1; a model reading
            the source side only is at chance, 1/2). Also writes anaphora.json, a contrastive set
            in DiscEvalMT's layout (blocks differing only in the previous target sentence) for
            fairseq-ctx-contrastive --format discevalmt.

Example:
    fairseq-ctx-make-corpus raw --setting target --seed 1
    # → raw/{train,valid,test}.{en,de,ctxkey} and raw/anaphora.json
"""
from fairseq_ctx.cli.tool_args import add_overwrite_arg, refuse_below_one, refuse_non_empty_dir, tool_parser
from fairseq_ctx.context.demo.synthetic_corpus import SETTINGS, CorpusSizes, write_corpus
from fairseq_ctx.context.demo.target_contrastive_set import write_target_anaphora


def main(argv=None) -> None:
    parser = tool_parser(__doc__)
    parser.add_argument("out_dir", help="directory for {train,valid,test}.{en,de,ctxkey} (and anaphora.json)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the document generator (each split draws from "
                        "its own stream derived from it; the same seed writes the same corpus)")
    parser.add_argument("--train-docs", type=int, default=CorpusSizes.train,
                        help="documents in the train split (3 to 5 pronoun or context-free episodes each)")
    parser.add_argument("--valid-docs", type=int, default=CorpusSizes.valid, help="documents in the valid split")
    parser.add_argument("--test-docs", type=int, default=CorpusSizes.test, help="documents in the test split")
    parser.add_argument("--setting", choices=SETTINGS, default="standard",
                        help="which pronouns the corpus holds: standard, hard or target (see above)")
    parser.add_argument("--contrastive-blocks", type=int, default=200,
                        help="--setting target: blocks of anaphora.json (two contrastive pairs each)")
    add_overwrite_arg(parser)
    args = parser.parse_args(argv)
    refuse_below_one(parser, {"--train-docs": args.train_docs, "--valid-docs": args.valid_docs,
                              "--test-docs": args.test_docs})
    if args.contrastive_blocks < 1:
        parser.error("--contrastive-blocks must be at least 1")
    refuse_non_empty_dir(parser, args.out_dir, args.overwrite)
    sizes = CorpusSizes(args.train_docs, args.valid_docs, args.test_docs)
    counts = write_corpus(args.out_dir, sizes, seed=args.seed, setting=args.setting)
    print(" ".join(f"{split}={n} sentences" for split, n in counts.items()) + f" written to {args.out_dir}")
    if args.setting == "target":
        pairs = write_target_anaphora(f"{args.out_dir}/anaphora.json", args.contrastive_blocks, args.seed)
        print(f"{pairs} contrastive pairs written to {args.out_dir}/anaphora.json")


if __name__ == "__main__":
    main()
