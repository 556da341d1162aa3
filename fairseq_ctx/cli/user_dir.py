"""``fairseq-ctx-user-dir``: print the installed package directory for ``--user-dir``; with
``--configs``, the fairseq-hydra-train configs installed with it (``FAMILY/configs/NAME.yaml``).

Example:
    fairseq-train data-bin --user-dir "$(fairseq-ctx-user-dir)" --task context_translation ...
    fairseq-hydra-train --config-dir "$(fairseq-ctx-user-dir)/context/configs" --config-name hmce \
      task.data=$PWD/data-bin common.user_dir="$(fairseq-ctx-user-dir)"
"""
import os

from fairseq_ctx.cli.tool_args import tool_parser


def main(argv=None) -> None:
    parser = tool_parser(__doc__)
    parser.add_argument("--configs", action="store_true",
                        help="print the path of every shipped fairseq-hydra-train config, one per line")
    args = parser.parse_args(argv)
    if args.configs:
        from fairseq_ctx.cli.config_files import config_files

        print("\n".join(config_files()))
        return
    import fairseq_ctx

    print(os.path.dirname(os.path.abspath(fairseq_ctx.__file__)))


if __name__ == "__main__":
    main()
