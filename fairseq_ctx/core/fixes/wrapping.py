"""Installs and removes the plugin's hooks around fairseq functions and methods."""
import functools
from typing import Any, Callable, List

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


def is_wrapped(owner: Any, name: str, wrapper: Callable) -> bool:
    """Whether ``wrapper`` is one of the hooks installed on ``owner.name``."""
    return wrapper in getattr(getattr(owner, name), _HOOKS, ())


def unwrap(owner: Any, name: str, wrapper: Callable) -> None:
    """Remove ``wrapper`` from ``owner.name``, keeping the other hooks installed there in their
    order; with none left, ``owner.name`` is fairseq's own function again."""
    current = getattr(owner, name)
    installed: List[Callable] = list(getattr(current, _HOOKS, ()))
    if wrapper not in installed:
        return
    setattr(owner, name, stock(owner, name))
    for other in installed:
        if other is not wrapper:
            wrap(owner, name, other)


def stock(owner: Any, name: str) -> Callable:
    """fairseq's own ``owner.name``, under whatever hooks the plugin installed there."""
    function = getattr(owner, name)
    while getattr(function, _HOOKS, ()):
        function = function.__wrapped__
    return function
