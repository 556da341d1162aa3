"""``fairseq-ctx-xsim``: bitext retrieval error (xsim) between two aligned embedding files, as LASER computes it.

Row i of the source file is the translation of row i of the target file. Every row retrieves
the best-scoring of its k nearest rows on the other side by cosine (absolute), ratio margin or
distance margin (Artetxe & Schwenk, 2019); the error is the share of wrong retrievals, in both
directions. With --tgt-text (--src-text) a retrieval from the source (target) side counts as
right when its text equals the aligned sentence's text (test sets have duplicate sentences).
"""

from fairseq_ctx.cli.tool_args import refuse_overwriting, tool_parser
from fairseq_ctx.core.atomic_output import write_json

MARGINS = ("absolute", "ratio", "distance")


def main(argv=None) -> None:
    parser = tool_parser(__doc__)
    parser.add_argument("src", help="source embeddings: .npy (rows, dim), or LASER's raw float32 file with --dim")
    parser.add_argument("tgt", help="target embeddings, row i aligned with row i of src")
    parser.add_argument("--margin", action="append", choices=MARGINS,
                        help="scores to report, repeatable (default: all three; LASER's default is ratio)")
    parser.add_argument("--k", type=int, default=4,
                        help="neighbourhood size of the ratio and distance margins: a row's k nearest rows on the "
                             "other side are its candidates, and the mean cosine of both sides' k nearest rows is "
                             "divided out (ratio) or subtracted (distance); LASER uses 4")
    parser.add_argument("--src-text", help="text embedded as src, one line per row: textual error for tgt→src")
    parser.add_argument("--tgt-text", help="text embedded as tgt, one line per row: textual error for src→tgt")
    parser.add_argument("--search", choices=("auto", "faiss", "exact"), default="auto",
                        help="nearest-neighbour search: faiss when importable (auto; LASER's counts), or exact numpy "
                             "(the same except where two scores differ in the last float32 bit)")
    parser.add_argument("--dim", type=int, help="row dimension of LASER's raw binary embedding files")
    parser.add_argument("--fp16", action="store_true", help="raw binary embedding files are float16")
    parser.add_argument("--json", help="also write the errors to this JSON file")
    args = parser.parse_args(argv)
    refuse_overwriting(parser, {"--json": args.json}, {
        "src": args.src, "tgt": args.tgt, "--src-text": args.src_text, "--tgt-text": args.tgt_text})

    from fairseq_ctx.embedding.xsim import resolve_search, xsim_files

    margins = args.margin or list(MARGINS)
    try:
        result = xsim_files(args.src, args.tgt, margins, args.k, args.src_text, args.tgt_text, args.search,
                            args.dim, args.fp16)
    except (ValueError, ImportError) as err:
        parser.exit(2, f"fairseq-ctx-xsim: error: {err}\n")
    search = resolve_search(args.search)
    rows = next(iter(result.values()))["src2tgt"].total
    print(f"xsim error, {rows} sentences, k={args.k}, {search} search")
    print("margin    direction  error%   errors  type")
    for margin, directions in result.items():
        for direction, error in directions.items():
            print(f"{margin:<9} {direction:<10} {error.percent:6.2f}  {error.errors:7d}  {error.error_type}")
    if args.json:
        report = {"k": args.k, "rows": rows, "search": search,
                  "results": {m: {d: e.as_dict() for d, e in directions.items()} for m, directions in result.items()}}
        write_json(args.json, report)


if __name__ == "__main__":
    main()
