"""``fairseq-ctx-attention-plot``: per target token, how much attention goes to each input
(like Libovický 2019, Fig. 5.2/5.3/5.6), as a PNG heatmap and a JSON dump, for
``hierarchical_attention_decoder`` and ``multisource_rnn`` checkpoints.

The model is run with teacher forcing on the reference translation of each chosen sentence.
Quantity per (target token, input), read from one decoder layer (default: the last):
hierarchical: the second-level weights β (head average); flat: attention mass on each input's
states (head average); serial/parallel: each input's share of the context-vector norms. multisource_rnn: β
(hierarchical) or the attention mass per input (flat), with the sentinel's share as an
extra column when trained with --sentinel. The PNG needs matplotlib (``pip install
"fairseq-ctx[plots]"``); without it the tool says so at the start and writes the JSON.

Example:
    fairseq-ctx-attention-plot checkpoints/hier --data data-bin --feature-inputs img --out attention
    fairseq-ctx-attention-plot DATA --path CHECKPOINT --feature-inputs img   (old form, still accepted)
"""
import os
import sys

from fairseq_ctx.cli.tool_args import (add_checkpoint_args, add_multimodal_input_args, checkpoint_inputs,
                                      multimodal_inputs, refuse_overwriting, resolve_checkpoint_args, tool_parser)
from fairseq_ctx.cli.tool_logging import configure_tool_logging
from fairseq_ctx.core.atomic_output import write_json

TOOL = "fairseq-ctx-attention-plot"


def main(argv=None) -> None:
    parser = tool_parser(__doc__)
    add_checkpoint_args(parser, data_help="data directory of --task multimodal_translation", path_alias=True)
    parser.add_argument("--gen-subset", default="test", help="binarized split of --data the sentences are taken from")
    add_multimodal_input_args(parser)
    parser.add_argument("--sentences", default="0,1,2",
                        help="comma-separated sentence ids (fairseq's, from 0) of --gen-subset, one heatmap panel each")
    parser.add_argument("--layer", type=int, default=-1,
                        help="decoder layer read, counted from 0; negative counts from the end (-1: the last); "
                             "multisource_rnn has a single attention and ignores it")
    parser.add_argument("--out", default="attention", help="output prefix: writes OUT.png and OUT.json")
    args = resolve_checkpoint_args(parser, parser.parse_args(argv), data_required=True)
    refuse_overwriting(parser, {"--out (.png)": args.out + ".png", "--out (.json)": args.out + ".json"},
                       checkpoint_inputs(args, args.gen_subset), creates_directories=True)
    logger = configure_tool_logging("attention_plot")
    from fairseq_ctx.core.plots import missing_plots_message, plots_available

    plots = plots_available()
    if not plots:
        logger.warning("%s; writing %s.json without %s.png", missing_plots_message("drawing the heatmap"),
                       args.out, args.out)
    from fairseq_ctx.core.checkpoint_loading import CheckpointError
    from fairseq_ctx.core.tool_loading import load_models
    from fairseq_ctx.multisource.attention_plot import QUANTITY, attention_records, plot

    overrides = {name: value for name, value in multimodal_inputs(args).items() if value is not None}
    try:
        models, _, task = load_models(args.checkpoint, ["multimodal_translation"], TOOL, args.checkpoint_file,
                                      args.data, overrides, cpu=True)
    except (CheckpointError, FileNotFoundError) as err:
        sys.exit(f"{TOOL}: {err}" if isinstance(err, FileNotFoundError) else str(err))
    sentence_ids = [int(i) for i in args.sentences.split(",")]
    try:
        combination, inputs, records = attention_records(models[0], task, args.gen_subset, sentence_ids, args.layer)
    except ValueError as err:
        parser.error(str(err))
    rnn = getattr(models[0].decoder, "attention", None) is not None
    layers = 1 if rnn else models[0].decoder.num_layers
    read = args.layer % layers
    title = f"{combination}: {QUANTITY[combination]}" + (
        "" if rnn else f", decoder layer {read} of 0..{layers - 1}{' (the last)' if read == layers - 1 else ''}")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    write_json(args.out + ".json", {"combination": combination, "quantity": QUANTITY[combination], "layer": args.layer,
                                    "inputs": inputs, "sentences": records}, indent=1)
    if plots:
        plot(records, inputs, title, args.out + ".png", QUANTITY[combination])
        print(f"wrote {args.out}.png and {args.out}.json")
    else:
        print(f"wrote {args.out}.json")


if __name__ == "__main__":
    main()
