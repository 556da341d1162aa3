"""``fairseq-ctx-user-dir``: print the installed package directory for ``--user-dir``."""
import os


def main() -> None:
    import fairseq_ctx

    print(os.path.dirname(os.path.abspath(fairseq_ctx.__file__)))


if __name__ == "__main__":
    main()
