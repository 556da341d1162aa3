"""``from_pretrained`` of the multimodal_translation models: fairseq's hub interface for a
text-only model, a clear error for a model that reads auxiliary inputs."""
from fairseq.hub_utils import GeneratorHubInterface


def text_only_hub(interface: GeneratorHubInterface) -> GeneratorHubInterface:
    """``interface`` if its model reads the source sentence only (e.g. trained with the
    imagination loss, whose images are needed in training only); a model that reads image
    features or extra source sentences (Libovický 2019) cannot get them through fairseq's hub."""
    inputs = interface.task.model_inputs
    if inputs:
        names = ", ".join(f"{spec.name} ({spec.kind})" for spec in inputs)
        raise NotImplementedError(
            f"this multimodal_translation model also reads {names}, which fairseq's hub interface "
            f"(from_pretrained(...).translate) cannot pass; decode a data directory that holds them with "
            f"fairseq-generate DATA --task multimodal_translation --feature-inputs NAMES / --extra-source-langs LANGS "
            f"--path CHECKPOINT (features as {{split}}.{{name}}.npy, extra sources binarized by fairseq-preprocess)"
        )
    return interface
