"""``fairseq-ctx-generative``: generative context evaluation of a context-aware model: every example
is translated with its preceding sentences as context, and the translation is checked for the
form the context decides (fairseq_ctx.context.generative).

    --format ctxpro   --input SET.json [--text SET.input]   (Wicks & Post, 2023: a released eval
                      set and its <eos>-joined input file, default: SET.json with .input for .json)

Scored exactly as ``ctxpro score`` scores the same translations (the ctxpro package's check, on the
last sentence of each translation): per rule, overall and by antecedent distance. The translations
are written with ``--output`` (one line per example, the file ``ctxpro score -t`` reads). A
sentence-level model through the same tool gives the no-context number.

Example:
    fairseq-ctx-generative checkpoints/hmce --spm spm.model --format ctxpro \\
      --input auxiliary.opensubtitles.en-fr.dev.json --lang fr --output auxiliary.hyp.fr --json auxiliary.json
"""
import sys

from fairseq_ctx.cli.tool_args import (add_model_args, check_model_args, load_translator, model_inputs,
                                      refuse_bad_generation, refuse_overwriting, tool_parser)
from fairseq_ctx.cli.tool_logging import configure_tool_logging
from fairseq_ctx.core.atomic_output import write_json, write_text

FORMATS = ["ctxpro"]


def main(argv=None) -> None:
    parser = tool_parser(__doc__)
    add_model_args(parser)
    parser.add_argument("--format", choices=FORMATS, default="ctxpro", help="layout of the evaluation set")
    parser.add_argument("--input", required=True, help="ctxpro: the set's JSON file")
    parser.add_argument("--text", help="ctxpro: the set's input file, one example per line, the preceding sentences "
                                       "and the sentence joined by <eos> (default: --input with .input for .json)")
    parser.add_argument("--lang", required=True,
                        help="target language (ctxpro's -l: the sentence splitter that finds the last sentence)")
    parser.add_argument("--beam", type=int, default=5, help="beam size (1: greedy search)")
    parser.add_argument("--output", help="write the translations here, one line per example")
    parser.add_argument("--json", help="also write the scores, breakdowns and per-example outcomes to this file")
    args = parser.parse_args(argv)
    check_model_args(parser, args)
    refuse_bad_generation(parser, beam=args.beam)
    text = args.text or (args.input[:-len(".json")] if args.input.endswith(".json") else args.input) + ".input"
    refuse_overwriting(parser, {"--output": args.output, "--json": args.json},
                       {"--input": args.input, "--text": text, **model_inputs(args)})
    from fairseq_ctx.context.contrastive.example import ContrastiveInputError
    from fairseq_ctx.context.generative.ctxpro_sets import (ctxpro_check, format_report, read_ctxpro_set,
                                                            score_translations, translate_examples)

    try:
        examples = read_ctxpro_set(args.input, text)
        ctxpro_check(args.lang)  # installed: checked before any translation
    except ContrastiveInputError as err:
        sys.exit(f"fairseq-ctx-generative: {err}")
    logger = configure_tool_logging("generative")
    translator = load_translator(parser, args, beam=args.beam)
    translations = translate_examples(translator, examples, args.batch_size)
    result = {"format": args.format, "set": args.input, **score_translations(examples, translations, args.lang)}
    logger.info(f"translated {len(examples)} examples of {args.input}")
    print(format_report(result))
    if args.output:
        write_text(args.output, "".join(line + "\n" for line in translations))
    if args.json:
        write_json(args.json, result)


if __name__ == "__main__":
    main()
