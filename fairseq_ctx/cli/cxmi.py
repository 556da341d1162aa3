"""``fairseq-ctx-cxmi``: conditional cross-mutual information (Fernandes et al. 2021).

CXMI(C → Y | X) is estimated with one model: for every sentence of a binarized split,
log p(y | x, C) with its context minus log p(y | x) with the context masked (all context
slots empty, the model's document-initial behaviour), each the sum of the reference's token
log-probabilities (natural log). Reported: the corpus CXMI (mean over sentences), the same
per target token, and with ``--per-sentence FILE`` one line per sentence
``id<TAB>cxmi<TAB>logp_with_context<TAB>logp_masked<TAB>target_tokens``. A model trained with
``--context-size 0`` gets exactly 0. Positive values: the context makes the references more likely.

Example:
    fairseq-ctx-cxmi checkpoints/hmce --data data-bin --gen-subset test --per-sentence cxmi.tsv
"""

from fairseq_ctx.cli.tool_args import (add_model_args, check_model_args, load_translator, model_inputs,
                                      refuse_overwriting, tool_parser)
from fairseq_ctx.cli.tool_logging import configure_tool_logging
from fairseq_ctx.core.atomic_output import atomic_output, write_json


def main(argv=None) -> None:
    parser = tool_parser(__doc__)
    add_model_args(parser)
    parser.add_argument("--gen-subset", default="test", help="binarized split to score (with its docids)")
    parser.add_argument("--per-sentence", help="write per-sentence values (TSV) to this file")
    parser.add_argument("--json", help="also write the corpus values to this JSON file")
    args = parser.parse_args(argv)
    check_model_args(parser, args)
    refuse_overwriting(parser, {"--per-sentence": args.per_sentence, "--json": args.json},
                       model_inputs(args, args.gen_subset))
    configure_tool_logging("cxmi")
    from fairseq_ctx.context.cxmi import cxmi

    result = cxmi(load_translator(parser, args), args.gen_subset, args.batch_size)
    print(f"CXMI = {result['cxmi']:.4f} nats per sentence, {result['cxmi_per_token']:.5f} per target token "
          f"({result['sentences']} sentences)")
    if args.per_sentence:
        with atomic_output(args.per_sentence) as handle:
            for row in result["per_sentence"]:
                handle.write("\t".join(str(v) for v in row) + "\n")
    if args.json:
        write_json(args.json, {k: v for k, v in result.items() if k != "per_sentence"})


if __name__ == "__main__":
    main()
