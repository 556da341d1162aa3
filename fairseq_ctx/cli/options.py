"""``fairseq-ctx-options``: every command-line option of an architecture, a task and a criterion,
with help strings and defaults, as ``fairseq-train`` parses them.

fairseq's own ``fairseq-train --arch X --help`` prints only the general options: it answers
``--help`` before it has read ``--arch``, ``--task`` and ``--criterion``. This tool adds their
options first, the way fairseq-train does, and then prints the help.

Example:
    fairseq-ctx-options --arch hmce
    fairseq-ctx-options --task multilingual_embedding --arch tmde --criterion distance_constraint
"""
import argparse


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", required=True, help="a registered architecture, e.g. hmce")
    parser.add_argument("--task", default="context_translation", help="the task (default: context_translation)")
    parser.add_argument("--criterion", default="label_smoothed_cross_entropy", help="the criterion")
    args = parser.parse_args(argv)
    from fairseq_ctx.cli.tool_logging import configure_tool_logging

    configure_tool_logging("options")
    from fairseq import options

    import fairseq_ctx  # noqa: F401  (registration runs once fairseq is imported)

    calls = []

    def print_and_exit(full_parser: argparse.ArgumentParser) -> None:
        """fairseq calls this before and after adding the arch/task/criterion options."""
        calls.append(full_parser)
        if len(calls) == 2:
            full_parser.prog = "fairseq-train"
            full_parser.print_help()
            raise SystemExit(0)

    training = options.get_training_parser(default_task=args.task)
    options.parse_args_and_arch(
        training, ["DATA", "--task", args.task, "--arch", args.arch, "--criterion", args.criterion],
        parse_known=True, modify_parser=print_and_exit,
    )


if __name__ == "__main__":
    main()
