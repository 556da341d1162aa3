"""``fairseq-ctx-options``: every option of an architecture, its task and its criterion, each with
the value fairseq-train gives it when it is not given (after the architecture function).

fairseq's own ``fairseq-train --arch X --help`` prints only the general options: it answers
``--help`` before it has read ``--arch``, ``--task`` and ``--criterion``. This tool prints, one
line each (flag, default, first sentence of the help): the architecture's own options first, then
the fairseq Transformer options its model inherits, the task's (its own first) and the
criterion's. ``--only`` keeps one group, ``--long`` prints the whole help of each option, ``--all``
prints fairseq-train's complete help instead (general options included, argparse's layout).
``--fixes`` lists instead every change the plugin makes to fairseq's behaviour: its target, what
changes, why, whether it is active (how to switch one off: the last line).

Example:
    fairseq-ctx-options --arch hmce
    fairseq-ctx-options --arch hmce --only arch --long
    fairseq-ctx-options --task multilingual_embedding --arch tmde --criterion distance_constraint
    fairseq-ctx-options --fixes
"""
import argparse

from fairseq_ctx.cli.tool_args import tool_parser

GROUPS = ("arch", "transformer", "task", "criterion")


def main(argv=None) -> None:
    parser = tool_parser(__doc__)
    parser.add_argument("--arch", help="a registered architecture, e.g. hmce (required unless --fixes)")
    parser.add_argument("--task", help="the task whose options are listed (default: the task the arch's model is "
                                       "for, e.g. multilingual_embedding for tmde; context_translation for an arch "
                                       "that names none, such as fairseq's transformer)")
    parser.add_argument("--criterion", default="label_smoothed_cross_entropy",
                        help="the criterion whose options are listed")
    parser.add_argument("--only", choices=GROUPS, help="print one group: the arch's own options, the Transformer "
                        "options its model inherits, the task's or the criterion's")
    parser.add_argument("--long", action="store_true", help="the whole help of every option, not its first sentence")
    parser.add_argument("--all", action="store_true", help="fairseq-train's complete --help for these choices "
                        "(general options too)")
    parser.add_argument("--fixes", action="store_true", help="list every change the plugin makes to fairseq's "
                        "behaviour (target, change, reason, active or not) and how to switch each off, instead")
    args = parser.parse_args(argv)
    if args.fixes:
        print_fixes()
        return
    if args.arch is None:
        parser.error("--arch is required (or --fixes)")
    if args.all and (args.only or args.long):
        parser.error("--all prints fairseq-train's whole help; it takes no --only or --long")
    from fairseq_ctx.cli.tool_logging import configure_tool_logging

    configure_tool_logging("options")
    import fairseq_ctx

    fairseq_ctx.register()

    if args.task is None:
        args.task = task_of_arch(args.arch)
    if args.all:
        print_fairseq_train_help(args.task, args.arch, args.criterion)
    from fairseq_ctx.cli.option_listing import format_groups, option_groups

    groups = [g for g in option_groups(args.arch, args.task, args.criterion) if args.only in (None, g.key)]
    print(format_groups(groups, long=args.long))


def print_fixes() -> None:
    """The table of the plugin's fixes, as a process that registered the plugin has them."""
    from fairseq_ctx.cli.tool_logging import configure_tool_logging

    configure_tool_logging("options")
    import fairseq_ctx
    from fairseq_ctx.core.fixes import listing

    fairseq_ctx.register()

    print(listing())


def task_of_arch(arch: str) -> str:
    """The task the model class of ``arch`` is for (its ``task_name``), else context_translation
    (an arch that is not registered is refused by the listing, naming it)."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    return getattr(ARCH_MODEL_REGISTRY.get(arch), "task_name", None) or "context_translation"


def print_fairseq_train_help(task: str, arch: str, criterion: str) -> None:
    """fairseq-train's own help once the arch, task and criterion options are added; exits."""
    from fairseq import options

    calls = []

    def print_and_exit(full_parser: argparse.ArgumentParser) -> None:
        """fairseq calls this before and after adding the arch/task/criterion options."""
        calls.append(full_parser)
        if len(calls) == 2:
            full_parser.prog = "fairseq-train"
            full_parser.print_help()
            raise SystemExit(0)

    training = options.get_training_parser(default_task=task)
    options.parse_args_and_arch(training, ["DATA", "--task", task, "--arch", arch, "--criterion", criterion],
                                parse_known=True, modify_parser=print_and_exit)


if __name__ == "__main__":
    main()
