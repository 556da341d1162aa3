"""The one way a tool (and the hub) loads a trained model: a checkpoint file, or a directory
holding ``checkpoint_file``; the dictionaries from ``data`` if given, else from the checkpoint
directory when it holds ``dict.*.txt``, else from the data directory recorded in the checkpoint;
the checkpoint checked to be of one of the expected tasks before any model is built
(:func:`checkpoint_loading.load_ensemble`); every model in eval mode, on the GPU when one is
available unless ``cpu``."""
import glob
import os
from typing import Dict, List, Optional, Sequence, Tuple

DEFAULT_CHECKPOINT_FILE = "checkpoint_best.pt"


def resolve_checkpoint(path: str, checkpoint_file: str = DEFAULT_CHECKPOINT_FILE) -> str:
    """``path`` itself when it is a file, else ``path/checkpoint_file``; a FileNotFoundError of one
    line naming the checkpoints the directory does hold and ``--checkpoint-file``."""
    if os.path.isfile(path):
        return path
    candidate = os.path.join(path, checkpoint_file)
    if os.path.isfile(candidate):
        return candidate
    if not os.path.isdir(path):
        raise FileNotFoundError(f"no checkpoint {candidate}: {path} is neither a checkpoint file nor a directory")
    held = sorted(name for name in os.listdir(path) if name.endswith(".pt"))
    if not held:
        raise FileNotFoundError(f"no checkpoint {candidate}: {path} holds no .pt file; pass a checkpoint file or the "
                                f"--save-dir of a training run")
    raise FileNotFoundError(f"no checkpoint {candidate}: {path} holds {', '.join(held)}; pass --checkpoint-file "
                            f"{held[0] if 'checkpoint_last.pt' not in held else 'checkpoint_last.pt'} "
                            f"(checkpoint_file= in Python) or a checkpoint file")


def load_models(checkpoint: str, tasks: Optional[Sequence[str]], purpose: str,
                checkpoint_file: str = DEFAULT_CHECKPOINT_FILE, data: Optional[str] = None,
                overrides: Optional[Dict[str, object]] = None, cpu: bool = False) -> Tuple[List, object, object]:
    """``(models, cfg, task)`` of one checkpoint; ``overrides`` are further task options
    (e.g. ``feature_inputs``), ``purpose`` names the tool and option in error messages."""
    import torch

    from fairseq_ctx.core.checkpoint_loading import load_ensemble
    from fairseq_ctx.core.fixes import install_fixes
    from fairseq_ctx.core.registration import register

    register()  # the checkpoint's task and architecture may be the plugin's
    install_fixes()  # the plugin's own tools and hub: its changes to fairseq before the checkpoint is read

    path = resolve_checkpoint(checkpoint, checkpoint_file)
    directory = os.path.dirname(os.path.abspath(path))
    if data is None and glob.glob(os.path.join(directory, "dict.*.txt")):
        data = directory
    arg_overrides = {**({"data": data} if data else {}), **(overrides or {})}
    models, cfg, task = load_ensemble(path, tasks, purpose, arg_overrides or None)
    use_cuda = torch.cuda.is_available() and not cpu
    for model in models:
        model.eval()
        if use_cuda:
            model.cuda()
    return models, cfg, task
