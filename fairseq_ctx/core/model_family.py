"""Which task a model family belongs to: a model class declares it as ``task_name``, and a task
refuses a model of another task before building it (e.g. a multilingual_embedding checkpoint
given to fairseq-generate --task context_translation)."""
from fairseq.models import ARCH_MODEL_REGISTRY


def check_model_family(cfg, task_name: str) -> None:
    arch = getattr(cfg, "arch", None) or getattr(cfg, "_name", None)
    declared = getattr(ARCH_MODEL_REGISTRY.get(arch), "task_name", None)
    if declared is not None and declared != task_name:
        raise ValueError(
            f"{task_name}: --arch {arch} is a {declared} model; train and use it with --task {declared}. "
            f"If this is a checkpoint (--path, --restore-file), it was trained with --task {declared}: "
            f"pass a checkpoint trained with --task {task_name}"
        )
