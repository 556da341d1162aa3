"""The real-data recipes' ``--device``: with ``cpu`` (the default) every training and decoding
command they build carries fairseq's ``--cpu``; with ``cuda`` none does, so fairseq trains and
decodes on the GPU; both parse as the stock tools' arguments. (The GPU runs themselves need a
GPU; the refusal without one is tested with the run options.)"""

import pytest
import torch
from fairseq import options



@pytest.fixture
def recipes(monkeypatch):
    """The recipe modules, on a machine that claims a GPU (``--device cuda`` is checked, not used)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    from examples.embedding import multi30k_models
    from examples.multimodal_mt import multi30k_multisource
    from examples.context_mt import scat_en_fr

    return multi30k_multisource, scat_en_fr, multi30k_models


def training_is_on_cpu(args) -> bool:
    parsed = options.parse_args_and_arch(options.get_training_parser(), input_args=args)
    return parsed.cpu


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_every_recipe_trains_and_decodes_on_the_device_asked_for(recipes, device, tmp_path):
    multisource, scat, embedding = recipes
    parser = multisource.build_parser()
    _, args = multisource.parse_command_line(parser, ["/data", "--work", str(tmp_path), "--device", device])
    model = multisource.Model("parallel", "fr")
    commands = [multisource.train_step(model, tmp_path, "ud", tmp_path / "ckpt", args, 1).argv,
                multisource.generate_step(model, tmp_path, "ud", tmp_path / "x.pt", tmp_path / "out", args).argv]
    parser = scat.build_parser()
    recipe = scat.Recipe(scat.parse_args(parser, ["--scat-dir", "s", "--multi30k-dir", "m", "--work", str(tmp_path),
                                                  "--device", device]))
    commands.append(recipe.train_args("hmce", "hmce", 1, [], 1))
    commands.append(embedding.train_args("ct_mde", "data-bin", str(tmp_path), "small", 10, 1, "amp", device))
    for command in commands:
        assert ("--cpu" in command) == (device == "cpu"), command
    assert training_is_on_cpu(commands[-1]) == (device == "cpu")
