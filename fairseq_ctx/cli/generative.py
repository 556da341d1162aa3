"""``fairseq-ctx-generative``: generative context evaluation of a context-aware model: every example
is translated with its preceding sentences as context, and the translation is checked for the
form the context decides (fairseq_ctx.context.generative).

    --format ctxpro   --input SET.json [--text SET.input]   (Wicks & Post, 2023: a released eval
                      set and its <eos>-joined input file, default: SET.json with .input for .json)
    --format genpro   --input SET.tsv   (Post & Junczys-Dowmunt, 2023: docmt23's GenPro TSV)
                      --input contrapro.json [--text-dir DIR]   (a ContraPro-layout set)

ctxpro is scored exactly as ``ctxpro score`` scores the same translations (the ctxpro package's
check, on the last sentence of each translation): per rule, overall and by antecedent distance.
GenPro is scored as docmt23's ``evaluate_tsv.py`` scores them (the pronoun the reference uses, as a
token of the Moses-tokenised, lowercased translation): overall, by pronoun and by antecedent
distance (``--distance LOW HIGH`` keeps those, as its ``-d``). The translations are written with
``--output`` (one line per example, in the set's order). A sentence-level model through the same
tool gives the no-context number.

Example:
    fairseq-ctx-generative checkpoints/hmce --spm spm.model --format ctxpro \\
      --input auxiliary.opensubtitles.en-fr.dev.json --lang fr --output auxiliary.hyp.fr --json auxiliary.json
"""
import sys
from typing import Callable, Tuple

from fairseq_ctx.cli.tool_args import (add_model_args, check_model_args, load_translator, model_inputs,
                                      refuse_bad_generation, refuse_overwriting, tool_parser)
from fairseq_ctx.cli.tool_logging import configure_tool_logging
from fairseq_ctx.core.atomic_output import write_json, write_text

FORMATS = ["ctxpro", "genpro"]


def main(argv=None) -> None:
    parser = tool_parser(__doc__)
    add_model_args(parser)
    parser.add_argument("--format", choices=FORMATS, default="ctxpro", help="layout of the evaluation set")
    parser.add_argument("--input", required=True, help="ctxpro: the set's JSON file; genpro: docmt23's TSV, or a "
                                                       "ContraPro-layout JSON (contrapro.json)")
    parser.add_argument("--text", help="ctxpro: the set's input file, one example per line, the preceding sentences "
                                       "and the sentence joined by <eos> (default: --input with .input for .json)")
    parser.add_argument("--text-dir", help="genpro with a ContraPro JSON: the folder of the text and context files "
                                           "ContraPro's conversion script wrote (default: the JSON's folder)")
    parser.add_argument("--source-lang", default="en", help="genpro with a ContraPro JSON: the source language")
    parser.add_argument("--lang", required=True,
                        help="target language (ctxpro's -l: the sentence splitter that finds the last sentence; "
                             "genpro: the Moses tokenizer's language)")
    parser.add_argument("--distance", type=int, nargs=2, metavar=("LOW", "HIGH"),
                        help="genpro: score only the examples with an antecedent distance in LOW..HIGH (inclusive)")
    parser.add_argument("--beam", type=int, default=5, help="beam size (1: greedy search)")
    parser.add_argument("--output", help="write the translations here, one line per example")
    parser.add_argument("--json", help="also write the scores, breakdowns and per-example outcomes to this file")
    args = parser.parse_args(argv)
    check_model_args(parser, args)
    refuse_bad_generation(parser, beam=args.beam)
    if args.format == "genpro" and args.text:
        parser.error("--text is the input file of a ctxpro set; a GenPro set is one TSV, or a ContraPro JSON with "
                     "--text-dir")
    text = args.text or (args.input[:-len(".json")] if args.input.endswith(".json") else args.input) + ".input"
    inputs = {"--input": args.input, **({"--text": text} if args.format == "ctxpro" else {})}
    refuse_overwriting(parser, {"--output": args.output, "--json": args.json}, {**inputs, **model_inputs(args)})
    from fairseq_ctx.context.contrastive.example import ContrastiveInputError
    from fairseq_ctx.context.generative.in_context import translate_examples

    try:
        examples, score, report = read_set(args, text)
    except ContrastiveInputError as err:
        sys.exit(f"fairseq-ctx-generative: {err}")
    logger = configure_tool_logging("generative")
    translator = load_translator(parser, args, beam=args.beam)
    translations = translate_examples(translator, examples, args.batch_size, source=args.input)
    result = {"format": args.format, "set": args.input, **score(examples, translations)}
    logger.info(f"translated {len(examples)} examples of {args.input}")
    print(report(result))
    if args.output:
        write_text(args.output, "".join(line + "\n" for line in translations))
    if args.json:
        write_json(args.json, result)


def read_set(args, text: str) -> Tuple[list, Callable, Callable]:
    """The examples of the set, how to score their translations and how to report the scores; the
    scorer's package is checked before any translation."""
    if args.format == "ctxpro":
        from fairseq_ctx.context.generative.ctxpro_sets import (ctxpro_check, format_report, read_ctxpro_set,
                                                                score_translations)

        examples = read_ctxpro_set(args.input, text)
        ctxpro_check(args.lang)
        return examples, lambda e, t: score_translations(e, t, args.lang), format_report
    from fairseq_ctx.context.contrastive.contrapro import read_contrapro
    from fairseq_ctx.context.generative.genpro import (format_genpro_report, from_contrapro, genpro_check,
                                                       read_genpro_tsv, score_genpro, within_distances)

    if args.input.endswith(".json"):
        examples = from_contrapro(read_contrapro(args.input, args.text_dir, args.source_lang, args.lang))
    else:
        examples = read_genpro_tsv(args.input)
    if args.distance:
        examples = within_distances(examples, args.distance)
    genpro_check(args.lang)
    return examples, lambda e, t: score_genpro(e, t, args.lang), format_genpro_report

if __name__ == "__main__":
    main()
