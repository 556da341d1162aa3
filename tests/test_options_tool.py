"""fairseq-ctx-options prints every option of an arch, its task and criterion, as fairseq-train
parses them (fairseq-train's own --help stops before it reads --arch): for every registered
arch of ours, each field of the model's options dataclass is listed with its help."""
import dataclasses

import pytest
from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_DATACLASS_REGISTRY, MODEL_REGISTRY

from fairseq_ctx.cli import options as options_tool

TASK_OF = {"context_translation": ["hce", "hmce", "ctx_concat", "dat", "han", "dct"],
           "multimodal_translation": ["hierarchical_attention_decoder", "hierarchical_attention_decoder_big",
                                      "multisource_rnn"],
           "multilingual_embedding": ["tmde", "tmde_p", "tmde_f", "ct_mde", "laser_bilstm"]}
# fairseq's TransformerConfig has decoder_input_dim but gives it no command-line flag
NOT_ON_THE_COMMAND_LINE = {"decoder_input_dim"}
CASES = [(task, arch) for task, archs in TASK_OF.items() for arch in archs]


def printed_options(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as stop:
        options_tool.main(list(argv))
    assert stop.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("task,arch", CASES, ids=[arch for _, arch in CASES])
def test_every_option_of_the_model_dataclass_is_listed(capsys, task, arch):
    text = printed_options(capsys, "--task", task, "--arch", arch)
    model_name = next(name for name, cls in MODEL_REGISTRY.items() if cls is ARCH_MODEL_REGISTRY[arch])
    fields = [f.name for f in dataclasses.fields(MODEL_DATACLASS_REGISTRY[model_name])
              if not f.name.startswith("_") and f.name not in NOT_ON_THE_COMMAND_LINE]
    missing = [name for name in fields if f"--{name.replace('_', '-')}" not in text]
    assert not missing, f"{arch}: {missing}"


def test_task_and_criterion_options_are_listed_too(capsys):
    text = printed_options(capsys, "--task", "multilingual_embedding", "--arch", "tmde",
                           "--criterion", "distance_constraint")
    for option in ("--lang-pairs", "--pair-sampling", "--distance-beta", "--distance-negatives", "--pyramid-queries"):
        assert option in text
    assert text.startswith("usage: fairseq-train")
