"""``fairseq-ctx-supporting-attention``: how much of an hce/hmce's word-level context attention
(the weights α of Yun (2022), eq. 3.15–3.16) falls on the context words SCAT's translators
marked as supporting the pronoun (``<hon>…<hoff>``, Yin et al. 2021), against the share a
uniform α would give them, per context line and in total (mean difference ± sd, sign test).

SCAT marks the French context (``--side target``: models trained with
``--target-context-size`` >= 1) and some English training lines (``--side source``).

Example:
    fairseq-ctx-supporting-attention checkpoints/hmce_target --data data-bin --spm spm.model \\
      --input data/scat/highlighted.valid --side target --json supporting_attention.json
"""
import sys

from fairseq_ctx.cli.tool_args import (add_model_args, check_model_args, load_translator, model_inputs,
                                      refuse_overwriting, tool_parser)
from fairseq_ctx.cli.tool_logging import configure_tool_logging
from fairseq_ctx.core.atomic_output import write_json
from fairseq_ctx.context.contrastive.example import ContrastiveInputError
from fairseq_ctx.context.contrastive.scat import SIDES, read_marked_context

TOOL = "fairseq-ctx-supporting-attention"


def main(argv=None) -> None:
    parser = tool_parser(__doc__)
    add_model_args(parser)
    parser.add_argument("--input", required=True, help="SCAT file prefix, e.g. data/scat/highlighted.valid")
    parser.add_argument("--side", choices=SIDES, default="target",
                        help="the context whose marks are read: target (French) or source (English)")
    parser.add_argument("--source-lang", default="en", help="source language of the file names")
    parser.add_argument("--target-lang", default="fr", help="target language of the file names")
    parser.add_argument("--json", help="also write the totals and every line's values to this file")
    args = parser.parse_args(argv)
    check_model_args(parser, args)
    context_files = [f"{args.input}.context.{lang}" for lang in (args.source_lang, args.target_lang)]
    refuse_overwriting(parser, {"--json": args.json}, {"--input": context_files, **model_inputs(args)})
    try:
        lines, unmarked = read_marked_context(args.input, args.side, args.source_lang, args.target_lang)
    except (ContrastiveInputError, OSError) as err:
        sys.exit(f"{TOOL}: {err}")
    configure_tool_logging("supporting_attention")
    from fairseq_ctx.context.supporting_attention import format_summary, measure, summarize

    translator = load_translator(parser, args)
    try:
        results, left_out = measure(translator, lines, args.side, args.batch_size)
    except ValueError as err:
        sys.exit(f"{TOOL}: {err}")
    if not results:
        sys.exit(f"{TOOL}: no marked line could be measured: "
                 + "; ".join(f"{reason}: {len(origins)}" for reason, origins in left_out.items()))
    summary = {"input": args.input, "side": args.side, "lines_without_marks": unmarked,
               "left_out": left_out, **summarize(results)}
    print(format_summary(summary))
    for reason, origins in left_out.items():
        if origins:
            print(f"{len(origins)} marked lines left out ({reason}): {', '.join(origins[:5])}"
                  + (" ..." if len(origins) > 5 else ""))
    if args.json:
        write_json(args.json, summary)


if __name__ == "__main__":
    main()
