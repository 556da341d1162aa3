"""``fairseq-ctx-score``: sacreBLEU BLEU and chrF (and COMET) of translations, or BLEU and context accuracy.

Without --context-key: BLEU and chrF by sacreBLEU on detokenized text, printed with sacreBLEU's
signature, and COMET when unbabel-comet is installed (the 'comet' extra). Translations come
from a fairseq-generate output (D- lines, else H-; T- references; S- sources) and/or plain
files, one sentence per line (--hyp, --ref, --src); sentencepiece pieces are removed as
fairseq-generate --post-process sentencepiece does. A generate output scored on its own must
cover its whole split (no sentence id missing, as many hypotheses as its last line says were
translated): a cut-off output is refused with the counts, or scored with a warning under
--allow-partial. Empty references are refused; in plain files (--hyp, --ref) a line blank in
both is a document boundary, as fairseq-ctx-translate-doc writes them: the sentence scores leave
it out and, with two documents or more, d-BLEU (sacreBLEU's BLEU over the documents, each one
segment) is printed with its signature. --sentence-ids scores only the sentences it names
(0-based ids), e.g. those of a one-line-context split that fairseq-generate translated together
with its context lines.

With --context-key (answer key, one line per test sentence, ``expected|alternative,alternative``
or empty): sacreBLEU's BLEU of the H- lines as they are (tokenized, like the generated corpus;
--tokenize chooses the tokenizer), with its signature, and context accuracy -- a context-dependent
sentence is correct when its hypothesis contains the expected word and none of the alternatives.
The keys of ``fairseq-ctx-make-corpus --setting target`` add a rule, ``er|sie,es|wagen=er,karre=sie``:
the expected word is the one that agrees with the synonym the hypothesis of the previous sentence
chose (the reference's choice is random, so comparing with it would score a model's own,
consistent choice as wrong half of the time); a sentence whose previous hypothesis names none of
the synonyms is left out and counted apart.

sacreBLEU's note that the text looks tokenized is left out when --tokenize is given (and with
--context-key, whose text is tokenized by design).
"""
import argparse
import sys

from fairseq_ctx.cli.tool_args import refuse_overwriting, tool_parser
from fairseq_ctx.core.atomic_output import write_json
from fairseq_ctx.core.scoring import (DEFAULT_COMET_MODEL, REMOVE_BPE, document_bleu, load_translations,
                                      read_sentence_ids, score, split_documents, translation_scores)


def main(argv=None) -> None:
    parser = tool_parser(__doc__)
    parser.add_argument("generate_output", nargs="?", help="stdout of fairseq-generate")
    parser.add_argument("--hyp", help="hypotheses, one per line (instead of a generate output)")
    parser.add_argument("--ref", help="references, one per line (instead of the generate output's T- lines)")
    parser.add_argument("--src", help="sources, one per line, for COMET (instead of the S- lines)")
    parser.add_argument("--remove-bpe", choices=REMOVE_BPE, default="auto",
                        help="subword segmentation to undo (fairseq's --post-process); auto: sentencepiece when "
                             "the text holds '▁' pieces, else none")
    parser.add_argument("--tokenize", help="sacreBLEU's BLEU tokenizer (default 13a; e.g. zh, ja-mecab, intl)")
    parser.add_argument("--comet-model", default=DEFAULT_COMET_MODEL,
                        help="COMET model name or local checkpoint (used when unbabel-comet is installed)")
    parser.add_argument("--no-comet", action="store_true", help="skip COMET even when unbabel-comet is installed")
    parser.add_argument("--context-key", help="answer key, one line per test sentence: BLEU + context accuracy")
    parser.add_argument("--allow-partial", action="store_true",
                        help="score a generate output that does not cover its whole split (cut off, or sentences "
                             "left out) with a warning giving the counts, instead of refusing it")
    parser.add_argument("--sentence-ids",
                        help="score only these sentences: a file of 0-based sentence ids (fairseq's ids, the line "
                             "number minus one), one per line, e.g. the PREFIX.sentence_ids that fairseq-ctx-prepare-docs "
                             "--src-context writes, which picks the sentences out of a split whose context lines were "
                             "translated with them")
    parser.add_argument("--json", help="also write the scores to this JSON file")
    args = parser.parse_args(argv)
    refuse_overwriting(parser, {"--json": args.json}, {
        "generate_output": args.generate_output, "--hyp": args.hyp, "--ref": args.ref, "--src": args.src,
        "--context-key": args.context_key})
    if args.context_key:
        if not args.generate_output or args.hyp or args.ref or args.src:
            parser.error("--context-key scores a fairseq-generate output alone (no --hyp, --ref, --src)")
        result = _context_scores(args)
    else:
        result = _translation_scores(args)
    if args.json:
        write_json(args.json, result)


def _context_scores(args: argparse.Namespace) -> dict:
    try:
        result = score(args.generate_output, args.context_key, args.tokenize)
    except ValueError as err:
        sys.exit(f"fairseq-ctx-score: {err}")
    print(result["bleu_line"])
    counted = f"{result['context_correct']}/{result['context_total']} context-dependent sentences"
    if result["context_rule"] == "previous translation":
        counted += ("; expected: the pronoun agreeing with the synonym the hypothesis of the previous sentence chose; "
                    f"{result['context_undetermined']} more left out, their previous hypothesis names no synonym")
    print(f"context accuracy = {result['context_accuracy']:.3f} ({counted})")
    return result


def _translation_scores(args: argparse.Namespace) -> dict:
    warnings = []

    def partial(text: str) -> None:
        warnings.append(text)
        print(f"fairseq-ctx-score: warning: {text}", file=sys.stderr)

    try:
        hyps, refs, srcs = load_translations(args.generate_output, args.hyp, args.ref, args.src, args.remove_bpe,
                                             on_partial=partial if args.allow_partial else None)
        if args.sentence_ids:
            chosen = read_sentence_ids(args.sentence_ids, len(hyps))
            print(f"scoring {len(chosen)} of the {len(hyps)} translated sentences (--sentence-ids {args.sentence_ids})")
            hyps, refs = [hyps[i] for i in chosen], [refs[i] for i in chosen]
            srcs = None if srcs is None else [srcs[i] for i in chosen]
        documents = split_documents(hyps, refs, srcs, f"--hyp {args.hyp}", f"--ref {args.ref}") if args.hyp else None
    except (ValueError, OSError) as err:
        sys.exit(f"fairseq-ctx-score: {err}")
    if documents is not None:
        hyps, refs, srcs = documents.hypotheses, documents.references, documents.sources
    result = translation_scores(hyps, refs, srcs, args.tokenize, None if args.no_comet else args.comet_model)
    if warnings:
        result["partial"] = warnings[0]
    print(result["bleu_line"])
    print(result["chrf_line"])
    if documents is not None and len(documents.spans) > 1:
        result.update(document_bleu(documents, args.tokenize))
        print(result["d_bleu_line"])
    if "comet" in result:
        print(f"COMET ({result['comet_model']}) = {result['comet']:.4f}")
    else:
        print(f"COMET not computed: {result['comet_skipped']}", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
