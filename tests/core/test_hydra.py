"""fairseq-hydra-train runs every registered arch from the YAML configs installed with the package
(``fairseq_ctx/<family>/configs``, found through ``fairseq-ctx-user-dir``).

Each arch trains 2 updates of a tiny model from its family's shipped config (sizes given as
``++model.*`` overrides) and the checkpoint must hold exactly the parameters (names and
shapes) fairseq-train builds for the same options: a dropped option (hmce's memory attention,
tmde_p's pyramid queries) changes them. The archs run in-process through
``fairseq_cli.hydra_train._hydra_main`` (what fairseq-hydra-train calls after Hydra composed
the config; a subprocess per arch would cost seconds of start-up each); the shipped commands
themselves run as a subprocess of the fairseq-hydra-train script, one per family. The two
reach the task in the two forms a model node can have: in-process the plugin is imported when
fairseq merges the model's dataclass into the node, the console script composes it before the
plugin is imported; both must record every option in the checkpoint."""
import dataclasses
import sys
from pathlib import Path
from typing import Dict, List, Sequence, Set

import pytest
import torch
from fairseq import options, tasks
from fairseq.dataclass.initialize import hydra_init
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from tests.helpers import EMBEDDING_PAIRS, USER_DIR, run_tool
from fairseq_ctx.context import hub
from fairseq_ctx.core.hydra_model_config import complete_model_config, model_options
from tests.production_matrix import TASK_FIXTURES, arch_params, plugin_archs

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(USER_DIR)
CONFIGS = {
    "context_translation": ("context", "hmce"),
    "multimodal_translation": ("multisource", "hierarchical_attention_decoder"),
    "multilingual_embedding": ("embedding", "tmde_distance_constraint"),
}
SHIPPED = ["analysis/configs/hmce_head_diversity.yaml", "context/configs/hmce.yaml",
           "embedding/configs/tmde_distance_constraint.yaml", "multisource/configs/hierarchical_attention_decoder.yaml"]
TASK_OVERRIDES = {"multilingual_embedding": [f"task.lang_pairs='{EMBEDDING_PAIRS}'"]}
YAML_ONLY_KEYS = {"multisource_rnn": ["~model.share_all_embeddings"]}  # a Transformer option the RNN lacks
YAML_MODEL_FLAGS = {
    "context_translation": ["--share-all-embeddings"],
    "multimodal_translation": ["--combination", "hierarchical", "--share-all-embeddings"],
    "multilingual_embedding": [],
}


def model_overrides(flags: Sequence[str]) -> List[str]:
    """fairseq-train model flags (``--encoder-layers 2 --share-all-embeddings``) as Hydra overrides."""
    overrides, position = [], 0
    while position < len(flags):
        key = flags[position][2:].replace("-", "_")
        if position + 1 < len(flags) and not flags[position + 1].startswith("--"):
            value = flags[position + 1]
            overrides.append(f"++model.{key}='{value}'" if "," in value else f"++model.{key}={value}")
            position += 2
        else:
            overrides.append(f"++model.{key}=true")
            position += 1
    return overrides


def run_overrides(task: str, data: Path, save_dir: Path) -> List[str]:
    return [
        f"task.data={data}", f"common.user_dir={USER_DIR}", "common.cpu=true", "common.seed=1",
        "common.log_format=none", "optimization.max_update=2", "dataset.max_tokens=300", "dataset.num_workers=0",
        "dataset.disable_validation=true", f"checkpoint.save_dir={save_dir}", "checkpoint.no_epoch_checkpoints=true",
        *TASK_OVERRIDES.get(task, []),
    ]


def hydra_train_in_process(config_dir: Path, config_name: str, overrides: Sequence[str]) -> None:
    from fairseq_cli.hydra_train import _hydra_main

    GlobalHydra.instance().clear()
    hydra_init(config_name)
    with initialize_config_dir(config_dir=str(config_dir), version_base="1.1"):
        cfg = compose(config_name=config_name, overrides=list(overrides))
    _hydra_main(cfg)


def fairseq_train_shapes(task: str, arch: str, data: Path, model_flags: Sequence[str]) -> Dict[str, tuple]:
    """Parameter shapes of the model fairseq-train builds with the same options."""
    fixture = TASK_FIXTURES[task]
    args = options.parse_args_and_arch(options.get_training_parser(), input_args=[
        str(data), "--user-dir", USER_DIR, *fixture.task_args, "--arch", arch, *model_flags, "--cpu",
    ])
    cfg = convert_namespace_to_omegaconf(args)
    fairseq_task = tasks.setup_task(cfg.task)
    with torch.device("meta"):
        model = fairseq_task.build_model(cfg.model)
    return {name: tuple(value.shape) for name, value in model.state_dict().items()}


def option_names(name: str) -> Set[str]:
    """Every option of the model an architecture or model ``name`` builds."""
    return {spec.name for spec in dataclasses.fields(model_options(name)) if not spec.name.startswith("_")}


def checkpoint_shapes(path: Path) -> Dict[str, tuple]:
    state = torch.load(path, map_location="cpu", weights_only=True)
    return {name: tuple(value.shape) for name, value in state["model"].items()}


@pytest.mark.parametrize("task,arch", arch_params(plugin_archs(), pytest.mark.full_matrix))
def test_hydra_train_builds_the_same_model_as_fairseq_train(task, arch, request, tmp_path):
    data = request.getfixturevalue(TASK_FIXTURES[task].data_fixture)
    folder, config_name = CONFIGS[task]
    sizes = TASK_FIXTURES[task].model_args(arch)
    yaml_flags = [] if arch in YAML_ONLY_KEYS else YAML_MODEL_FLAGS[task]
    overrides = [f"model._name={arch}", *model_overrides(sizes), *YAML_ONLY_KEYS.get(arch, []),
                 *run_overrides(task, data, tmp_path)]
    hydra_train_in_process(PACKAGE / folder / "configs", config_name, overrides)
    state = torch.load(tmp_path / "checkpoint_last.pt", map_location="cpu", weights_only=True)
    assert state["optimizer_history"][-1]["num_updates"] == 2
    assert state["cfg"]["model"]["_name"] == arch
    assert option_names(arch) <= set(state["cfg"]["model"])
    assert checkpoint_shapes(tmp_path / "checkpoint_last.pt") == fairseq_train_shapes(task, arch, data,
                                                                                    [*yaml_flags, *sizes])


@pytest.mark.parametrize("task", sorted(CONFIGS))
def test_shipped_config_trains_with_the_documented_command(task, request, tmp_path):
    data = request.getfixturevalue(TASK_FIXTURES[task].data_fixture)
    folder, config_name = CONFIGS[task]
    arch = config_name.split("_distance")[0]
    package = run_tool(["fairseq-ctx-user-dir"]).stdout.strip()  # the documented "$(fairseq-ctx-user-dir)/FAMILY/configs"
    result = run_tool(["fairseq-hydra-train", "--config-dir", f"{package}/{folder}/configs",
                       "--config-name", config_name, *model_overrides(TASK_FIXTURES[task].model_args(arch)),
                       *run_overrides(task, data, tmp_path / "ck")], cwd=tmp_path)
    assert "done training" in result.stdout + result.stderr
    state = torch.load(tmp_path / "ck" / "checkpoint_last.pt", map_location="cpu", weights_only=True)
    assert option_names(arch) <= set(state["cfg"]["model"])  # the console script composes a sparse node


def test_cka_config_trains_hmce_with_head_diversity_and_the_checkpoint_loads_in_the_hub(tiny_data, tmp_path):
    overrides = [*model_overrides(TASK_FIXTURES["context_translation"].model_args("hmce")),
                 *run_overrides("context_translation", tiny_data, tmp_path)]
    hydra_train_in_process(PACKAGE / "analysis" / "configs", "hmce_head_diversity", overrides)
    state = torch.load(tmp_path / "checkpoint_last.pt", map_location="cpu", weights_only=True)
    assert state["cfg"]["criterion"]["_name"] == "head_diversity"
    assert state["cfg"]["criterion"]["drophead"] == 0.1
    assert state["optimizer_history"][-1]["num_updates"] == 2
    translator = hub.load(str(tmp_path / "checkpoint_last.pt"), data=str(tiny_data), beam=1)
    assert translator.models[0].encoder.memory_attention
    assert len(translator.translate_document(["the new man stands .", "it is small ."])) == 2


def test_a_model_name_trains_with_its_dataclass_defaults(tiny_data, tmp_path):
    """``model._name`` may also name the model (fairseq's config-driven models): no architecture
    function, every option from the model's dataclass, all of them recorded in the checkpoint."""
    sizes = TASK_FIXTURES["context_translation"].model_args("hmce")
    overrides = ["model._name=hierarchical_context_transformer", "++model.memory_attention=true",
                 *model_overrides(sizes), *run_overrides("context_translation", tiny_data, tmp_path)]
    hydra_train_in_process(PACKAGE / "context" / "configs", "hmce", overrides)
    state = torch.load(tmp_path / "checkpoint_last.pt", map_location="cpu", weights_only=True)
    recorded = state["cfg"]["model"]
    assert recorded["_name"] == "hierarchical_context_transformer" and recorded["memory_attention"] is True
    assert option_names("hierarchical_context_transformer") <= set(recorded)
    assert checkpoint_shapes(tmp_path / "checkpoint_last.pt") == fairseq_train_shapes(
        "context_translation", "hmce", tiny_data, [*YAML_MODEL_FLAGS["context_translation"], *sizes])


def test_a_model_without_options_dataclass_instead_of_an_arch_is_a_clear_error():
    """fairseq's own message is an assertion ("Could not infer model type")."""
    with pytest.raises(ValueError, match=r"model._name: bart is a model, not an architecture.*one of: bart_base, bart_large"):
        complete_model_config(OmegaConf.create({"_name": "bart"}))


def test_an_unregistered_arch_is_a_clear_error(tiny_data, tmp_path):
    overrides = ["model._name=hmce_typo", *run_overrides("context_translation", tiny_data, tmp_path)]
    with pytest.raises(ValueError, match=r"model._name: 'hmce_typo' is not a registered architecture"):
        hydra_train_in_process(PACKAGE / "context" / "configs", "hmce", overrides)


def test_the_configs_are_package_data_listed_by_user_dir(tmp_path):
    """``fairseq-ctx-user-dir --configs`` lists the installed YAMLs, and setup.py installs them: a
    build of the package (setuptools' build_py, what pip copies into site-packages) holds them."""
    listed = run_tool(["fairseq-ctx-user-dir", "--configs"]).stdout.split()
    assert [str(Path(p).relative_to(PACKAGE)) for p in listed] == SHIPPED
    assert all(Path(p).is_file() for p in listed)
    run_tool([str(Path(sys.executable)), "setup.py", "-q", "build_py", "--build-lib", str(tmp_path / "lib")], cwd=ROOT)
    built = sorted(str(p.relative_to(tmp_path / "lib" / "fairseq_ctx")) for p in (tmp_path / "lib").rglob("*.yaml"))
    assert built == SHIPPED
