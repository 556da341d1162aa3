"""``fairseq-ctx-analyze-heads``: inter-head CKA and SVCCA of a trained model (Yun 2022 §4.2,
Table 4.3 style), and optionally layer × layer CKA/SVCCA between two checkpoints (Table 4.2 style).

Every MultiheadAttention is tapped (encoder self-attention, decoder self-attention,
encoder-decoder attention, and our archs' other attentions, kind ``other``); each head's output
(before the output projection) is collected over the non-padding query positions of the split,
teacher-forced, in eval mode, up to ``--max-positions`` per module. For each module: the H × H
matrix of linear CKA and of SVCCA (99% variance) between heads, and their means over pairs i < j.

Writes to ``--output-dir``: ``heads.csv`` (one row per checkpoint and module), ``heads.json``
(with the matrices), ``heads_<tag>.png`` (head × head heatmaps, one panel per module) and, with
``--compare-path``, ``layers.csv``/``layers.json`` and ``layers_<kind>.png`` (layer × layer of the
same module kind, the whole layer output = all heads concatenated). The PNGs need matplotlib
(the ``plots`` extra); without it the tool says so at the start and writes the tables. Each
checkpoint is run on batches of its own task (e.g. with its target-side context), over the same
sentences.

Example:
    fairseq-ctx-analyze-heads checkpoints/hce --data data-bin --output-dir heads
    fairseq-ctx-analyze-heads DATA --path CHECKPOINT --output-dir heads   (old form, still accepted)
"""
import argparse
import os
import sys
from typing import Optional, Sequence

from fairseq_ctx.cli.tool_args import (
    add_checkpoint_args,
    checkpoint_inputs,
    checkpoint_path,
    refuse_overwriting,
    resolve_checkpoint_args,
    tool_parser,
)
from fairseq_ctx.cli.tool_logging import configure_tool_logging

TOOL = "fairseq-ctx-analyze-heads"
TRANSLATION_TASKS = ("context_translation", "multimodal_translation", "translation")  # teacher-forced encoder-decoders


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = tool_parser(__doc__)
    add_checkpoint_args(parser, data_help="fairseq data-bin directory the checkpoint was trained on", path_alias=True)
    parser.add_argument("--compare-path", help="second checkpoint: layer × layer CKA/SVCCA against the first")
    parser.add_argument("--split", default="valid",
                        help="binarized split of --data whose sentences are run through the model, teacher-forced")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per forward pass")
    parser.add_argument("--max-positions", type=int, default=2000,
                        help="most query positions (non-padding tokens) collected per attention module; at "
                             "least 2")
    parser.add_argument("--output-dir", required=True,
                        help="directory for heads.csv, heads.json, heads_TAG.png (and with --compare-path "
                             "layers.csv, layers.json, layers_KIND.png); created when missing")
    parser.add_argument("--tag", default="model", help="name of the checkpoint in tables and file names")
    parser.add_argument("--compare-tag", default="other", help="name of --compare-path")
    args = resolve_checkpoint_args(parser, parser.parse_args(argv), data_required=True)
    outputs = ["heads.csv", "heads.json", f"heads_{args.tag}.png"]
    inputs = checkpoint_inputs(args, args.split)
    if args.compare_path:
        outputs += ["layers.csv", "layers.json", f"heads_{args.compare_tag}.png",
                    *(f"layers_{kind}.png" for kind in ("encoder_self", "decoder_self", "encoder_decoder"))]
        inputs["--compare-path"] = checkpoint_path(args.compare_path, args.checkpoint_file)
    refuse_overwriting(parser, {"--output-dir": [os.path.join(args.output_dir, name) for name in outputs]}, inputs,
                       creates_directories=True)
    if args.max_positions < 2 or args.batch_size < 1:
        parser.error("--max-positions must be >= 2 and --batch-size >= 1")
    return args


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    logger = configure_tool_logging("analyze_heads")
    from fairseq_ctx.core.plots import missing_plots_message, plots_available

    plots = plots_available()
    if not plots:
        logger.warning("%s; writing heads.csv and heads.json%s without the PNG heatmaps",
                       missing_plots_message("drawing the heatmaps"),
                       " (and layers.csv, layers.json)" if args.compare_path else "")
    from fairseq_ctx.analysis.head_analysis import analyze
    from fairseq_ctx.core.checkpoint_loading import CheckpointError
    from fairseq_ctx.core.tool_loading import load_models

    def load(checkpoint: str, purpose: str, tasks):
        models, cfg, task = load_models(checkpoint, tasks, purpose, checkpoint_file=args.checkpoint_file,
                                        data=args.data, cpu=True)
        return models[0].float(), task, cfg.task._name

    try:
        model, task, task_name = load(args.checkpoint, TOOL, TRANSLATION_TASKS)
        models, tasks, tags = [model], [task], [args.tag]
        if args.compare_path:  # of the same task, each read with its own settings (e.g. target context)
            other, other_task, _ = load(args.compare_path, f"{TOOL} --compare-path", [task_name])
            models.append(other)
            tasks.append(other_task)
            tags.append(args.compare_tag)
    except (CheckpointError, FileNotFoundError) as err:
        sys.exit(f"{TOOL}: {err}" if isinstance(err, FileNotFoundError) else str(err))
    logger.info("collecting head outputs of %s on split %s", ", ".join(tags), args.split)
    try:
        means = analyze(models, tags, tasks, args.split, args.batch_size, args.max_positions, args.output_dir, plots)
    except ValueError as err:
        sys.exit(f"{TOOL}: {err}")
    for tag, mean in means.items():
        print(f"{tag}: mean inter-head CKA over the modules = {mean:.4f}")


if __name__ == "__main__":
    main()
