"""``fairseq-ctx-doc-classify``: cross-lingual document classification on frozen embeddings.

For every language X, a small FFN classifier is trained on X's training embeddings and
tested on every language Y (MLDoc protocol). Prints the X-Y accuracy matrix and
Cross (mean over X≠Y), Same (mean over X=Y) and All. Files: ``DIR/{split}.{lang}.npy`` and
labels in ``DIR/{split}.{lang}.labels`` or, shared by all languages, ``DIR/{split}.labels``.
"""
import os

from fairseq_ctx.cli.tool_args import refuse_below_one, refuse_overwriting, tool_parser
from fairseq_ctx.core.atomic_output import write_json


def main(argv=None) -> None:
    parser = tool_parser(__doc__)
    parser.add_argument("--embeddings", required=True, help="directory with {split}.{lang}.npy and labels")
    parser.add_argument("--langs", required=True, help="comma-separated languages, e.g. en,de,fr")
    parser.add_argument("--train-split", default="train",
                        help="split each language's classifier is trained on ({split}.{lang}.npy and its labels)")
    parser.add_argument("--test-split", default="test", help="split every classifier is tested on, in every language")
    parser.add_argument("--hidden", type=int, default=64, help="hidden units of the FFN classifier (one hidden layer)")
    parser.add_argument("--epochs", type=int, default=200, help="full-batch Adam steps per classifier")
    parser.add_argument("--seed", type=int, default=1,
                        help="seed of the classifiers' initialisation and dropout (torch.manual_seed)")
    parser.add_argument("--json", help="also write the matrix and summary here")
    args = parser.parse_args(argv)
    refuse_below_one(parser, {"--hidden": args.hidden, "--epochs": args.epochs})
    langs = [l for l in args.langs.split(",") if l]
    read = [name for split in (args.train_split, args.test_split)
            for name in (f"{split}.labels", *(f"{split}.{l}.{ext}" for l in langs for ext in ("npy", "labels")))]
    refuse_overwriting(parser, {"--json": args.json}, {"--embeddings": [os.path.join(args.embeddings, n) for n in read]})
    from fairseq_ctx.embedding.doc_classify import accuracy_matrix, format_matrix, load_split

    try:
        train = {l: load_split(args.embeddings, args.train_split, l) for l in langs}
        test = {l: load_split(args.embeddings, args.test_split, l) for l in langs}
    except (ValueError, FileNotFoundError) as err:
        parser.exit(2, f"fairseq-ctx-doc-classify: error: {err}\n")
    result = accuracy_matrix(train, test, args.hidden, args.epochs, args.seed)
    print(format_matrix(result))
    if args.json:
        write_json(args.json, result)


if __name__ == "__main__":
    main()
