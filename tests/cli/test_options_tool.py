"""fairseq-ctx-options prints every option of an arch, its task and criterion, as fairseq-train
parses them (fairseq-train's own --help stops before it reads --arch): for every registered
arch of ours, each field of the model's options dataclass is listed, the arch's own options
first, each with the value the arch gives it; --only keeps one group, --all is fairseq-train's help."""
import re
import dataclasses

import pytest
from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_DATACLASS_REGISTRY, MODEL_REGISTRY

from fairseq_ctx.cli import options as options_tool

TASK_OF = {"context_translation": ["hce", "hmce", "ctx_concat", "dat", "han", "dct", "caching_tokens",
                                   "caching_sentence"],
           "multimodal_translation": ["hierarchical_attention_decoder", "hierarchical_attention_decoder_big",
                                      "multisource_rnn"],
           "multilingual_embedding": ["tmde", "tmde_p", "tmde_f", "ct_mde", "laser_bilstm"]}
# fairseq's TransformerConfig has decoder_input_dim but gives it no command-line flag
NOT_ON_THE_COMMAND_LINE = {"decoder_input_dim"}
CASES = [(task, arch) for task, archs in TASK_OF.items() for arch in archs]


def printed_options(capsys, *argv: str) -> str:
    options_tool.main(list(argv))
    return capsys.readouterr().out


def values(text: str) -> dict:
    """{flag: value} of the option lines."""
    return dict(re.findall(r"^  (--[a-z0-9-]+) +(\S+)", text, re.M))


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
    assert values(text)["--pyramid-queries"] == "''" and values(text)["--decoder-layers"] == "1"  # tmde's
    with pytest.raises(SystemExit) as stop:
        options_tool.main(["--task", "multilingual_embedding", "--arch", "tmde", "--all"])
    assert stop.value.code == 0 and capsys.readouterr().out.startswith("usage: fairseq-train")


def test_the_arch_own_options_come_first_with_the_arch_values(capsys):
    text = printed_options(capsys, "--arch", "hmce")
    lines = text.splitlines()
    assert len(lines) < 150
    assert lines[0].startswith("--arch hmce: options of the model hierarchical_context_transformer")
    own = lines[1:lines.index("")]
    assert [line.split()[0] for line in own][:3] == ["--pretrained-sentence-checkpoint", "--memory-attention",
                                                     "--context-encoder-layers"]
    found = values(text)
    assert found["--memory-attention"] == "True" and found["--encoder-layers"] == "6"
    assert found["--context-size"] == "2" and found["--target-context-size"] == "0"
    assert found["--label-smoothing"] == "0.0"
    task = text.index("--task context_translation (its own options first):")
    assert text.index("--context-size", task) < text.index("--source-lang", task)
    assert values(printed_options(capsys, "--arch", "hce"))["--memory-attention"] == "False"
    assert values(printed_options(capsys, "--task", "multilingual_embedding", "--arch", "tmde_p",
                                  "--criterion", "distance_constraint"))["--pyramid-queries"] == "32,16,8"


def test_only_one_group_and_the_long_help(capsys):
    only = printed_options(capsys, "--arch", "hmce", "--only", "arch")
    assert set(values(only)) == {"--pretrained-sentence-checkpoint", "--memory-attention", "--context-encoder-layers",
                                 "--separate-context-encoder", "--document-vector", "--document-vector-span",
                                 "--train-length-chunks"}
    long = printed_options(capsys, "--arch", "hmce", "--only", "criterion", "--long")
    assert "      epsilon for label smoothing, 0 means no label smoothing" in long.splitlines()


def test_without_task_an_archs_own_task_is_listed(capsys):
    """tmde's model is for multilingual_embedding, the hierarchical decoder's for multimodal_translation:
    without --task their task's options are listed, not context_translation's."""
    for arch, task, option in (("tmde", "multilingual_embedding", "--lang-pairs"),
                               ("hierarchical_attention_decoder", "multimodal_translation", "--feature-inputs")):
        assert printed_options(capsys, "--arch", arch) == printed_options(capsys, "--task", task, "--arch", arch)
        assert option in printed_options(capsys, "--arch", arch)
