"""Registration of every task, architecture and criterion with fairseq, done once and only when
fairseq is imported, so that ``import fairseq_ctx`` (and every ``--help`` of a tool) stays cheap.

* fairseq already imported (``--user-dir fairseq_ctx``, ``common.user_dir`` of
  fairseq-hydra-train, user code importing fairseq first): register at once.
* fairseq not imported yet: a finder on ``sys.meta_path`` wraps the loader of ``fairseq`` and of
  our own modules; registration runs right after the first of them finishes executing while
  fairseq is imported and none of our modules is half-initialised (so that registering never
  imports a module of ours that is itself still importing fairseq). The finder then removes
  itself.

Registration changes nothing in fairseq's behaviour: the plugin's fixes (:mod:`fixes`) are
installed when one of its tasks is built, or here for every task when
``FAIRSEQ_CTX_FIXES_FOR_STOCK_TASKS=1``.
"""
import importlib
import importlib.abc
import sys
from types import ModuleType
from typing import Optional

PACKAGE = "fairseq_ctx"
FAMILIES = ("analysis", "context", "embedding", "multisource")
_state = {"registered": False, "registering": False}


def _register() -> None:
    _state["registering"] = True
    try:
        from fairseq_ctx.core import fused_label_smoothing  # noqa: F401  (registers its criterion)
        from fairseq_ctx.core.fixes import fixes_for_stock_tasks, install_fixes, switched_off

        switched_off()  # a misspelt fix name is an error now, not when a task is built
        if fixes_for_stock_tasks():
            install_fixes()
        for family in FAMILIES:
            for name in importlib.import_module(f"{PACKAGE}.{family}").REGISTERING_MODULES:
                importlib.import_module(f"{PACKAGE}.{family}.{name}")
        _state["registered"] = True
    finally:
        _state["registering"] = False


def _initialising(module: Optional[ModuleType]) -> bool:
    spec = getattr(module, "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


def _ready(finished: str) -> bool:
    """fairseq is fully imported and no module of ours except ``finished`` is mid-import."""
    if "fairseq" not in sys.modules or (finished != "fairseq" and _initialising(sys.modules["fairseq"])):
        return False
    return not any(
        _initialising(module) for name, module in list(sys.modules.items())
        if name != finished and (name == PACKAGE or name.startswith(PACKAGE + "."))
    )


def _register_if_ready(finished: str) -> None:
    if _state["registered"] or _state["registering"] or not _ready(finished):
        return
    _remove_finder()
    _register()


class _ThenRegister(importlib.abc.Loader):
    """Runs the real loader, then registration when it is due."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def __getattr__(self, name: str):
        return getattr(self.loader, name)  # get_code, get_resource_reader, ... of the real loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        _register_if_ready(module.__name__)


class _RegistrationFinder(importlib.abc.MetaPathFinder):
    """Wraps the loader of ``fairseq`` and of ``fairseq_ctx.*`` with :class:`_ThenRegister`."""

    def find_spec(self, fullname: str, path=None, target=None):
        if fullname != "fairseq" and not fullname.startswith(PACKAGE + "."):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _ThenRegister(spec.loader)
                return spec
        return None


def _remove_finder() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _RegistrationFinder)]


def register_with_fairseq() -> None:
    """Register now if fairseq is imported, else as soon as it is."""
    if _state["registered"]:
        return
    fairseq = sys.modules.get("fairseq")
    if fairseq is not None and not _initialising(fairseq):
        _register()
    elif not any(isinstance(f, _RegistrationFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _RegistrationFinder())


def is_registered() -> bool:
    return _state["registered"]
