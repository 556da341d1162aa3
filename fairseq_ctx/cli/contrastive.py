"""``fairseq-ctx-contrastive``: contrastive evaluation of a context-aware model on the field's
test sets, read in their published layouts (fairseq_ctx.context.contrastive).

Every candidate translation is scored (sum of token log-probabilities; ``--length-normalize``
for the mean) given the source and its context; an example is correct when the correct
candidate scores strictly highest. Accuracy is printed overall and per breakdown of the set
(phenomenon, category, antecedent distance, ...) and written with ``--json``.

    --format plain       --source S --reference R --contrastive C1 [C2 ...] [--context X0 [X1 ...]]
                         [--categories L]   (parallel files, one example per line)
    --format contrapro   --input contrapro.json   (+ contrapro.{text,context}.{en,de} from
                         json2text_and_context.pl, in --text-dir, default: beside the JSON)
    --format discevalmt  --input anaphora.json [lexical-choice.json]
    --format scat        --input data/scat/highlighted.test   (the file prefix)
    --format voita       --input consistency_testsets/deixis_test.json [...]   (--text-dir
                         consistency_testsets/scoring_data: read the .src/.dst files instead)

Text is encoded with the model's dictionaries as it stands (tokenise the text like the
training data), or with ``--spm MODEL``. See docs/contrastive.md.

Example:
    fairseq-ctx-contrastive checkpoints/hmce --data data-bin --format discevalmt \\
      --input anaphora.json lexical-choice.json --json discevalmt.json
"""
import sys

from fairseq_ctx.cli.tool_args import (add_model_args, check_model_args, load_translator, model_inputs,
                                      refuse_overwriting, tool_parser)
from fairseq_ctx.cli.tool_logging import configure_tool_logging
from fairseq_ctx.core.atomic_output import write_json
from fairseq_ctx.context.contrastive.evaluation import evaluate, format_report
from fairseq_ctx.context.contrastive.example import ContrastiveInputError
from fairseq_ctx.context.contrastive.formats import FORMATS, read_set


def main(argv=None) -> None:
    parser = tool_parser(__doc__)
    add_model_args(parser)
    parser.add_argument("--format", choices=FORMATS, default="plain", help="layout of the test set")
    parser.add_argument("--input", nargs="+", default=[],
                        help="the set's file(s): JSON (contrapro, discevalmt, voita) or file prefix (scat)")
    parser.add_argument("--text-dir", help="directory of the set's text extraction (contrapro: *.text.*, "
                                           "*.context.*; voita: scoring_data *.src, *.dst)")
    parser.add_argument("--source-lang", help="source language of the file names (contrapro: en, scat: en)")
    parser.add_argument("--target-lang", help="target language of the file names (contrapro: de, scat: fr)")
    parser.add_argument("--source", help="plain: source sentences, one example per line")
    parser.add_argument("--reference", help="plain: correct targets")
    parser.add_argument("--contrastive", nargs="+", default=[],
                        help="plain: contrastive target files, one per variant, aligned with --reference")
    parser.add_argument("--context", nargs="*", default=[],
                        help="plain: context files, nearest previous sentence first")
    parser.add_argument("--categories", help="plain: a category label per example")
    parser.add_argument("--length-normalize", action="store_true", help="compare mean instead of summed log-probs")
    parser.add_argument("--json", help="also write the accuracies, breakdowns and per-example scores to this file")
    args = parser.parse_args(argv)
    check_model_args(parser, args)
    refuse_overwriting(parser, {"--json": args.json}, {
        "--input": args.input, "--source": args.source, "--reference": args.reference,
        "--contrastive": args.contrastive, "--context": args.context, "--categories": args.categories,
        **model_inputs(args)})
    try:
        examples, skipped = read_set(args.format, args.input, args.text_dir, args.source_lang, args.target_lang,
                                     args.source, args.reference, args.contrastive, args.context, args.categories)
    except (ContrastiveInputError, OSError) as err:
        sys.exit(f"fairseq-ctx-contrastive: {err}")
    configure_tool_logging("contrastive")
    result = evaluate(load_translator(parser, args), examples, args.batch_size, args.length_normalize)
    result = {"format": args.format, **result, "skipped": skipped}
    print(format_report(result))
    if args.json:
        write_json(args.json, result)


if __name__ == "__main__":
    main()
