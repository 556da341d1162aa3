"""Installs the plugin's hooks around fairseq functions and methods, once."""
import functools
from typing import Any, Callable

_HOOKS = "_fairseq_ctx_hooks"  # the wrappers installed on an attribute (``__wrapped__`` also marks fairseq's decorators)


def wrap(owner: Any, name: str, wrapper: Callable) -> None:
    """Replace ``owner.name`` by a function calling ``wrapper(original, *args, **kwargs)``; a second
    call with the same wrapper for the same attribute does nothing (several wrappers chain)."""
    original = getattr(owner, name)
    installed = getattr(original, _HOOKS, ())
    if wrapper in installed:
        return

    @functools.wraps(original)
    def hooked(*args, **kwargs):
        return wrapper(original, *args, **kwargs)

    setattr(hooked, _HOOKS, (*installed, wrapper))
    setattr(owner, name, hooked)
