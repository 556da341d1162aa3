"""``fairseq-ctx-make-multimodal-corpus``: write the generated multimodal demo corpus."""
import argparse

from fairseq_ctx.cli.tool_args import add_overwrite_arg, refuse_non_empty_dir
from fairseq_ctx.multisource.demo.multimodal_corpus import MultimodalCorpusSizes, write_multimodal_corpus


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out_dir", help="directory for {train,valid,test}.{en,de,fr,key,img.npy}")
    parser.add_argument("--seed", type=int, default=1)
    defaults = MultimodalCorpusSizes()
    for name in ("train", "valid", "test", "regions", "feature_dim"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(defaults, name))
    parser.add_argument("--images", type=int, default=defaults.images,
                        help="images per sentence; K > 1 writes {split}.img1.npy … imgK.npy, one showing the "
                        "intended sense, the others a sense of another ambiguous word (the harder setting)")
    parser.add_argument("--noise", type=float, default=defaults.noise, help="std of the noise on every region")
    add_overwrite_arg(parser)
    args = parser.parse_args(argv)
    refuse_non_empty_dir(parser, args.out_dir, args.overwrite)
    if args.images < 1:
        parser.error(f"--images must be at least 1, got {args.images}")
    sizes = MultimodalCorpusSizes(args.train, args.valid, args.test, args.regions, args.feature_dim,
                                  noise=args.noise, images=args.images)
    counts = write_multimodal_corpus(args.out_dir, sizes, seed=args.seed)
    print(" ".join(f"{split}={n} sentences" for split, n in counts.items()) + f" written to {args.out_dir}")


if __name__ == "__main__":
    main()
