"""``fairseq-ctx-make-corpus``: write the generated document-level demo corpus."""
import argparse

from fairseq_ctx.cli.tool_args import add_overwrite_arg, refuse_non_empty_dir
from fairseq_ctx.context.data.synthetic_corpus import SETTINGS, CorpusSizes, write_corpus


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out_dir", help="directory for {train,valid,test}.{en,de,ctxkey}")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--train-docs", type=int, default=CorpusSizes.train)
    parser.add_argument("--valid-docs", type=int, default=CorpusSizes.valid)
    parser.add_argument("--test-docs", type=int, default=CorpusSizes.test)
    parser.add_argument("--setting", choices=SETTINGS, default="standard",
                        help="standard: antecedents 1-2 sentences back; hard: also 3-4 sentences back "
                        "behind distractor nouns (train with --context-size 4)")
    add_overwrite_arg(parser)
    args = parser.parse_args(argv)
    refuse_non_empty_dir(parser, args.out_dir, args.overwrite)
    sizes = CorpusSizes(args.train_docs, args.valid_docs, args.test_docs)
    counts = write_corpus(args.out_dir, sizes, seed=args.seed, setting=args.setting)
    print(" ".join(f"{split}={n} sentences" for split, n in counts.items()) + f" written to {args.out_dir}")


if __name__ == "__main__":
    main()
