"""The progress bar of the long-running tools (embed, contrastive, cxmi, translate-doc,
analyze-heads): tqdm (a fairseq dependency) on stderr, switched off when stderr is not a
terminal, so that logs and redirected output stay free of bar updates."""
import sys
from typing import Iterable, Optional


def stderr_is_terminal() -> bool:
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


def progress(iterable: Optional[Iterable] = None, total: Optional[int] = None, desc: Optional[str] = None,
             unit: str = "it"):
    """``tqdm(iterable)`` on a terminal, else a pass-through with the same interface
    (iteration, ``update``, ``close``) that prints nothing."""
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True, leave=False,
                disable=not stderr_is_terminal())
