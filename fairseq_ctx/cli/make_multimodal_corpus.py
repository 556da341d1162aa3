"""``fairseq-ctx-make-multimodal-corpus``: write the generated multimodal demo corpus."""
import argparse

from fairseq_ctx.cli.tool_args import add_overwrite_arg, refuse_non_empty_dir
from fairseq_ctx.multisource.data.multimodal_corpus import MultimodalCorpusSizes, write_multimodal_corpus


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out_dir", help="directory for {train,valid,test}.{en,de,fr,key,img.npy}")
    parser.add_argument("--seed", type=int, default=1)
    defaults = MultimodalCorpusSizes()
    for name in ("train", "valid", "test", "regions", "feature_dim"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(defaults, name))
    add_overwrite_arg(parser)
    args = parser.parse_args(argv)
    refuse_non_empty_dir(parser, args.out_dir, args.overwrite)
    sizes = MultimodalCorpusSizes(args.train, args.valid, args.test, args.regions, args.feature_dim)
    counts = write_multimodal_corpus(args.out_dir, sizes, seed=args.seed)
    print(" ".join(f"{split}={n} sentences" for split, n in counts.items()) + f" written to {args.out_dir}")


if __name__ == "__main__":
    main()
