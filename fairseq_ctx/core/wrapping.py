"""Installs the plugin's hooks around fairseq functions and methods, once."""
import functools
from typing import Any, Callable


def wrap(owner: Any, name: str, wrapper: Callable) -> None:
    """Replace ``owner.name`` by a function calling ``wrapper(original, *args, **kwargs)``; a second
    call for the same attribute does nothing."""
    original = getattr(owner, name)
    if hasattr(original, "__wrapped__"):
        return

    @functools.wraps(original)
    def hooked(*args, **kwargs):
        return wrapper(original, *args, **kwargs)

    setattr(owner, name, hooked)
