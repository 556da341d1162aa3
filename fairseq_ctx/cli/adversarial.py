"""``fairseq-ctx-adversarial``: how much does a model rely on each auxiliary input?

Re-decodes a split with stock ``fairseq-generate`` once unchanged and once per auxiliary input
with that input replaced by a random permutation of itself across the split (a feature input
through a permuted ``{split}.{name}.ids`` row map — the features are not copied; an extra source
language through a permuted binarized copy). Reports BLEU and, with ``--key``, the accuracy on
the ambiguous words, with the drop against the unchanged run. Options it does not know are
passed on to fairseq-generate.

Example:
    fairseq-ctx-adversarial checkpoints/hier --data data-bin --feature-inputs img --key data-bin/test.key
    fairseq-ctx-adversarial DATA --path CHECKPOINT --feature-inputs img   (old form, still accepted)
"""
import os
import sys

from fairseq_ctx.cli.tool_args import (add_checkpoint_args, add_multimodal_input_args, checkpoint_inputs,
                                      multimodal_inputs, refuse_bad_generation, refuse_below_one, refuse_overwriting,
                                      resolve_checkpoint_args, tool_parser)
from fairseq_ctx.cli.tool_logging import configure_tool_logging
from fairseq_ctx.core.atomic_output import write_json

TOOL = "fairseq-ctx-adversarial"


def main(argv=None) -> None:
    parser = tool_parser(__doc__)
    add_checkpoint_args(parser, data_help="data directory of --task multimodal_translation", path_alias=True)
    parser.add_argument("--user-dir", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        help="plugin directory handed to fairseq-generate --user-dir")
    parser.add_argument("--gen-subset", default="test",
                        help="split of --data decoded unchanged and with each input shuffled (fairseq-generate "
                             "--gen-subset)")
    add_multimodal_input_args(parser)
    parser.add_argument("-s", "--source-lang", help="source language, handed to fairseq-generate; needed when --data "
                        "holds several language pairs (else fairseq infers it from the file names)")
    parser.add_argument("-t", "--target-lang", help="target language, handed to fairseq-generate; needed to find an "
                        "extra source's binaries when --data holds several {split}.{lang}-{tgt}.{lang} pairs")
    parser.add_argument("--shuffle", help="comma-separated inputs to shuffle (default: every auxiliary input)")
    parser.add_argument("--key", help="answer key (expected|alternatives per line) for the ambiguous-word accuracy")
    parser.add_argument("--beam", type=int, default=5, help="beam size of fairseq-generate (1: greedy search)")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per batch of fairseq-generate")
    parser.add_argument("--seed", type=int, default=1,
                        help="seed of the random permutations that shuffle the inputs across the split")
    parser.add_argument("--json", help="also write the results to this file")
    args, extra = parser.parse_known_args(argv)
    resolve_checkpoint_args(parser, args, data_required=True)
    refuse_below_one(parser, {"--batch-size": args.batch_size})
    refuse_bad_generation(parser, beam=args.beam)
    refuse_overwriting(parser, {"--json": args.json}, {**checkpoint_inputs(args, args.gen_subset), "--key": args.key})
    logger = configure_tool_logging("adversarial")
    from fairseq_ctx.core.checkpoint_loading import CheckpointError, check_task, read_checkpoint
    from fairseq_ctx.core.tool_loading import resolve_checkpoint
    from fairseq_ctx.core.fixes.checkpoint_hooks import saved_task_config
    from fairseq_ctx.core.fixes import install_fixes
    from fairseq_ctx.multisource.adversarial import DecodeOptions, adversarial_evaluation
    from fairseq_ctx.multisource.multimodal_translation_task import trained_inputs

    install_fixes()  # a tool of the plugin: its changes to fairseq before the checkpoint is read

    try:
        checkpoint = resolve_checkpoint(args.checkpoint, args.checkpoint_file)
        state = read_checkpoint(checkpoint, TOOL)
        check_task(state, checkpoint, ["multimodal_translation"], TOOL)
    except FileNotFoundError as err:
        sys.exit(f"{TOOL}: {err}")
    except CheckpointError as err:
        sys.exit(str(err))
    given = trained_inputs(saved_task_config(state), multimodal_inputs(args))
    options = DecodeOptions(checkpoint, args.user_dir, args.gen_subset, given["feature_inputs"],
                            given["extra_source_langs"], given["extra_source_dict"], args.source_lang, args.target_lang,
                            args.beam, args.batch_size, args.cpu, extra)
    inputs = args.shuffle.split(",") if args.shuffle else [*given["feature_inputs"].split(","),
                                                            *given["extra_source_langs"].split(",")]
    shuffle = [name for name in inputs if name]
    logger.info("decoding %s unchanged and with %s shuffled", args.gen_subset, ", ".join(shuffle) or "nothing")
    try:
        results = adversarial_evaluation(args.data, options, shuffle, args.key, args.seed)
    except (ValueError, RuntimeError) as err:
        sys.exit(f"{TOOL}: {err}")
    base = results["original"]
    print("condition\t" + "\t".join(f"{m}\tdrop" for m in base))
    for condition, scores in results.items():
        print(condition + "\t" + "\t".join(f"{scores[m]:.3f}\t{base[m] - scores[m]:+.3f}" for m in base))
    if args.json:
        write_json(args.json, results)


if __name__ == "__main__":
    main()
