"""``fairseq-ctx-plot-embeddings``: 2-D scatter (t-SNE, or PCA) of embedding files, as a PNG.

Each ``--input NAME=FILE.npy`` is one group (e.g. one language); points are coloured by
group, or by the labels of ``--labels`` (one per row, shared by all groups) with one marker
per group. Needs matplotlib (and scikit-learn for t-SNE): the ``plots`` extra,
``pip install "fairseq-ctx[plots]"``.
"""
import sys

from fairseq_ctx.cli.tool_args import refuse_overwriting, tool_parser
from fairseq_ctx.cli.tool_logging import configure_tool_logging


def main(argv=None) -> None:
    parser = tool_parser(__doc__)
    parser.add_argument("--input", action="append", required=True, help="NAME=FILE.npy, repeatable")
    parser.add_argument("--labels", help="one label per row (same rows in every file) to colour by")
    parser.add_argument("--output", required=True, help="PNG path")
    parser.add_argument("--method", choices=["tsne", "pca"], default="tsne",
                        help="projection to 2-D: tsne (scikit-learn; PCA with a warning when it is missing) or pca")
    parser.add_argument("--max-points", type=int, default=300,
                        help="plot the first N rows of each file (t-SNE's time grows with the points; the tool says "
                             "how many rows it leaves out); 0: every row")
    parser.add_argument("--seed", type=int, default=1, help="random_state of t-SNE (PCA is deterministic)")
    parser.add_argument("--title", default="", help="title of the plot; empty: 'METHOD of NAME, NAME, ...'")
    args = parser.parse_args(argv)
    if args.max_points < 0:
        parser.error(f"--max-points {args.max_points}: give a number of rows, or 0 for every row")
    groups, paths = [], []
    for item in args.input:
        if "=" not in item:
            parser.error(f"--input expects NAME=FILE.npy, got '{item}'")
        name, path = item.split("=", 1)
        groups.append(name)
        paths.append(path)
    refuse_overwriting(parser, {"--output": args.output}, {"--input": paths, "--labels": args.labels})
    from fairseq_ctx.core.plots import missing_plots_message, plots_available

    if not plots_available():
        parser.exit(2, f"fairseq-ctx-plot-embeddings: error: {missing_plots_message('fairseq-ctx-plot-embeddings')}\n")
    configure_tool_logging("plot_embeddings")
    from fairseq_ctx.embedding.embedding_file import read_embeddings
    from fairseq_ctx.embedding.embedding_plot import plot

    from fairseq_ctx.core.text_input import read_utf8_lines

    limit = args.max_points or None
    try:
        arrays = [read_embeddings(path) for path in paths]
    except ValueError as err:
        parser.exit(2, f"fairseq-ctx-plot-embeddings: error: {err}\n")
    for path, rows in zip(paths, arrays):
        if limit is not None and len(rows) > limit:
            print(f"fairseq-ctx-plot-embeddings: plotting the first {limit} of the {len(rows)} rows of {path} "
                  f"(--max-points; 0 plots every row)", file=sys.stderr)
    arrays = [rows[:limit] for rows in arrays]
    labels = None
    if args.labels:
        labels = [line.strip() for line in read_utf8_lines(args.labels)][:limit]
    plot(groups, arrays, args.output, labels, args.method, args.seed, args.title)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
