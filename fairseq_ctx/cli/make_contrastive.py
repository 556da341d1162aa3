"""``fairseq-ctx-make-contrastive``: write a contrastive pronoun test set generated like the
demo corpus (``fairseq_ctx.context.demo.contrastive_set``), ready for ``fairseq-ctx-contrastive``.

Example:
    fairseq-ctx-make-contrastive contrastive --docs 60 --context-size 2
    # → contrastive/contrastive.{src.en,ref.de,contrastive0.de,contrastive1.de,context0.en,context1.en,category}
"""
import argparse

from fairseq_ctx.cli.tool_args import add_overwrite_arg, refuse_non_empty_dir
from fairseq_ctx.context.demo.contrastive_set import write_contrastive_set


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--docs", type=int, default=60, help="documents to generate")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--context-size", type=int, default=2, help="context files to write (nearest first)")
    add_overwrite_arg(parser)
    args = parser.parse_args(argv)
    refuse_non_empty_dir(parser, args.out_dir, args.overwrite)
    count = write_contrastive_set(args.out_dir, args.docs, args.seed, args.context_size)
    print(f"{count} contrastive examples written to {args.out_dir}")


if __name__ == "__main__":
    main()
