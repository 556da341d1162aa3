"""``fairseq-ctx-user-dir``: print the installed package directory for ``--user-dir``.

Example:
    fairseq-train data-bin --user-dir "$(fairseq-ctx-user-dir)" --task context_translation ...
"""
import argparse
import os


def main(argv=None) -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    import fairseq_ctx

    print(os.path.dirname(os.path.abspath(fairseq_ctx.__file__)))


if __name__ == "__main__":
    main()
