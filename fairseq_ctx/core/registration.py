"""Registration of every task, architecture and criterion with fairseq: explicit, and only where
fairseq is already imported, so that ``import fairseq_ctx`` (and every ``--help`` of a tool) stays
cheap and changes nothing in the process.

* ``--user-dir fairseq_ctx``, ``common.user_dir`` of fairseq-hydra-train, or user code that imports
  fairseq first: the package registers itself when it is imported (fairseq is there already).
* Otherwise registration waits for :func:`register` (``fairseq_ctx.register()``), which imports
  fairseq; the plugin's tools, hub and checkpoint loaders call it themselves before they read a
  checkpoint. No import hook is installed.

Registration changes nothing in fairseq's behaviour: the plugin's fixes (:mod:`fixes`) are
installed when one of its tasks is built, or here for every task when
``FAIRSEQ_CTX_FIXES_FOR_STOCK_TASKS=1``.
"""
import importlib
import sys

PACKAGE = "fairseq_ctx"
FAMILIES = ("analysis", "context", "embedding", "multisource")
_state = {"registered": False, "registering": False}


def register() -> None:
    """Register the plugin's tasks, architectures, criterions and optimizer with fairseq (importing fairseq;
    idempotent)."""
    if _state["registered"] or _state["registering"]:
        return
    _state["registering"] = True
    try:
        import fairseq  # noqa: F401
        from fairseq_ctx.core import fused_label_smoothing  # noqa: F401  (registers its criterion)
        from fairseq_ctx.core import multi_tensor_adam  # noqa: F401  (registers --optimizer adam_multi_tensor)
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


def register_if_fairseq_is_imported() -> None:
    """What ``import fairseq_ctx`` does: register when fairseq is imported (as ``--user-dir`` has it),
    else nothing."""
    if "fairseq" in sys.modules:
        register()


def is_registered() -> bool:
    return _state["registered"]
