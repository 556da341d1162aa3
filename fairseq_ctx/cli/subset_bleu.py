"""``fairseq-ctx-subset-bleu``: BLEU on helpful-context and unhelpful-context subsets
(Yun 2022, Table 3.5) and their gap (unhelpful − helpful; a small gap means the model
exploits helpful context as well as it translates sentences whose context does not help).

Each index file lists sentence ids of the ``fairseq-generate`` output (the number after
``H-``), one per line; blank lines are ignored.

Example:
    fairseq-ctx-subset-bleu generate.out --helpful helpful.ids --unhelpful unhelpful.ids
"""
import sys

from fairseq_ctx.cli.tool_args import refuse_overwriting, tool_parser
from fairseq_ctx.core.atomic_output import write_json


def main(argv=None) -> None:
    parser = tool_parser(__doc__)
    parser.add_argument("generate_output", help="stdout of fairseq-generate")
    parser.add_argument("--helpful", required=True, help="ids of sentences whose context helps")
    parser.add_argument("--unhelpful", required=True, help="ids of sentences whose context does not help")
    parser.add_argument("--json", help="also write the numbers to this JSON file")
    args = parser.parse_args(argv)
    refuse_overwriting(parser, {"--json": args.json}, {
        "generate_output": args.generate_output, "--helpful": args.helpful, "--unhelpful": args.unhelpful})
    from fairseq_ctx.context.subset_bleu import subset_bleu

    try:
        result = subset_bleu(args.generate_output, args.helpful, args.unhelpful)
    except (ValueError, OSError) as err:
        sys.exit(f"fairseq-ctx-subset-bleu: {err}")
    print(f"BLEU helpful = {result['bleu_helpful']:.2f} ({result['helpful_sentences']} sentences)")
    print(f"BLEU unhelpful = {result['bleu_unhelpful']:.2f} ({result['unhelpful_sentences']} sentences)")
    print(f"gap (unhelpful - helpful) = {result['gap']:+.2f}")
    if args.json:
        write_json(args.json, result)


if __name__ == "__main__":
    main()
