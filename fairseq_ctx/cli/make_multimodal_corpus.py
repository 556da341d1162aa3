"""``fairseq-ctx-make-multimodal-corpus``: write the generated multimodal demo corpus."""
from fairseq_ctx.cli.tool_args import add_overwrite_arg, refuse_below_one, refuse_non_empty_dir, tool_parser
from fairseq_ctx.multisource.demo.multimodal_corpus import MultimodalCorpusSizes, write_multimodal_corpus


def main(argv=None) -> None:
    parser = tool_parser(__doc__)
    parser.add_argument("out_dir", help="directory for {train,valid,test}.{en,de,fr,key,img.npy}")
    parser.add_argument("--seed", type=int, default=1, help="seed of the sense prototypes, the sentences and the "
                        "noise (the same seed writes the same corpus)")
    defaults = MultimodalCorpusSizes()
    sizes_help = {"train": "sentences in the train split", "valid": "sentences in the valid split",
                  "test": "sentences in the test split",
                  "regions": "regions R per image: rows of each sentence's (R, d) feature matrix, one of them "
                             "showing the sense",
                  "feature_dim": "dimension d of each region's feature vector"}
    for name, text in sizes_help.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(defaults, name), help=text)
    parser.add_argument("--images", type=int, default=defaults.images,
                        help="images per sentence; K > 1 writes {split}.img1.npy … imgK.npy, one showing the "
                        "intended sense, the others a sense of another ambiguous word (the harder setting)")
    parser.add_argument("--noise", type=float, default=defaults.noise,
                        help="standard deviation of the Gaussian noise added to every region (the prototypes have "
                             "unit variance)")
    add_overwrite_arg(parser)
    args = parser.parse_args(argv)
    refuse_below_one(parser, {"--train": args.train, "--valid": args.valid, "--test": args.test,
                              "--regions": args.regions, "--feature-dim": args.feature_dim, "--images": args.images})
    refuse_non_empty_dir(parser, args.out_dir, args.overwrite)
    if args.images < 1:
        parser.error(f"--images must be at least 1, got {args.images}")
    sizes = MultimodalCorpusSizes(args.train, args.valid, args.test, args.regions, args.feature_dim,
                                  noise=args.noise, images=args.images)
    counts = write_multimodal_corpus(args.out_dir, sizes, seed=args.seed)
    print(" ".join(f"{split}={n} sentences" for split, n in counts.items()) + f" written to {args.out_dir}")


if __name__ == "__main__":
    main()
