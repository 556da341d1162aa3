"""matplotlib, the optional dependency of every plot (the ``plots`` extra): whether it is
installed, the one message that says how to install it, and pyplot on the non-interactive Agg
backend. Tools and recipes check :func:`plots_available` before any computation, so a missing
matplotlib is reported at once instead of after the work (or never, as an empty output folder)."""
import importlib.util
import os
import logging

PLOTS_INSTALL = 'pip install "fairseq-ctx[plots]"'


class PlotsUnavailableError(ImportError):
    """A plot was asked for and matplotlib is not installed."""


def plots_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def missing_plots_message(what: str) -> str:
    """``what`` (e.g. "fairseq-ctx-plot-embeddings") needs matplotlib: how to install it."""
    return (f"{what} needs matplotlib, which is not installed: {PLOTS_INSTALL} "
            f"(in a checkout: pip install -e \".[plots]\")")


def require_plots(what: str) -> None:
    """Raise :class:`PlotsUnavailableError` naming ``what`` and the install command when
    matplotlib is missing."""
    if not plots_available():
        raise PlotsUnavailableError(missing_plots_message(what))


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend, with matplotlib's own INFO lines kept quiet."""
    require_plots("drawing a plot")
    import matplotlib

    matplotlib.use("Agg")
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    import matplotlib.pyplot as plt

    return plt


def save_figure(figure, path: str, **options) -> None:
    """``figure.savefig(path, **options)``, written atomically (``core.atomic_output``): the format
    comes from ``path``'s extension, as savefig takes it."""
    from fairseq_ctx.core.atomic_output import atomic_path

    extension = os.path.splitext(path)[1].lstrip(".").lower() or None
    with atomic_path(path) as temporary:
        figure.savefig(temporary, format=extension, **options)
