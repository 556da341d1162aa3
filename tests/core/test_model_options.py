"""Each model's options are one registered FairseqDataclass: the command line, hydra configs
naming a model or an architecture (``_name``), and architecture functions that only override
what the user did not give."""
import argparse

import pytest
import torch
from fairseq import options
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.models import MODEL_DATACLASS_REGISTRY, MODEL_REGISTRY
from omegaconf import OmegaConf

from tests.helpers import TINY_MODEL, USER_DIR, build, build_multimodal

MODELS = ["hierarchical_context_transformer", "context_concat_transformer", "document_aware_transformer",
          "hierarchical_attention_transformer", "document_context_transformer", "caching_transformer",
          "multisource_transformer", "multisource_rnn", "transformer_mde", "laser_bilstm"]
TINY = {"encoder_embed_dim": 32, "decoder_embed_dim": 32, "encoder_ffn_embed_dim": 64, "decoder_ffn_embed_dim": 64,
        "encoder_layers": 2, "decoder_layers": 1, "encoder_attention_heads": 4, "decoder_attention_heads": 4,
        "share_all_embeddings": True}


def model_cfg(arch: str, extra=()):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, input_args=[
        "data", "--user-dir", USER_DIR, "--task", "translation", "--arch", arch, *extra])
    return convert_namespace_to_omegaconf(args).model


def shapes(model) -> dict:
    return {name: tuple(p.shape) for name, p in model.named_parameters()}


@pytest.mark.parametrize("name", MODELS)
def test_every_model_has_one_dataclass_and_the_command_line_is_it(name):
    dataclass = MODEL_DATACLASS_REGISTRY[name]
    parser = argparse.ArgumentParser(argument_default=argparse.SUPPRESS)
    MODEL_REGISTRY[name].add_args(parser)
    dests = [action.dest for action in parser._actions if action.dest != "help"]
    fields = {f for f in dataclass.__dataclass_fields__ if not f.startswith("_")}
    assert len(dests) == len(set(dests)) and set(dests) <= fields
    # fairseq leaves --decoder-input-dim off its command line (it follows --decoder-embed-dim)
    assert fields - set(dests) <= {"decoder_input_dim"}
    assert all(action.help for action in parser._actions if action.dest in ("train_length_chunks", "combination",
                                                                             "pyramid_queries", "sentinel"))


def test_architectures_override_only_what_was_not_given():
    assert model_cfg("tmde").decoder_layers == 1 and model_cfg("tmde").share_all_embeddings
    assert model_cfg("tmde", ["--decoder-layers", "2"]).decoder_layers == 2
    assert model_cfg("tmde_p").pyramid_queries == "32,16,8"
    assert model_cfg("tmde_p", ["--pyramid-queries", "8,4"]).pyramid_queries == "8,4"
    big = model_cfg("hierarchical_attention_decoder_big", ["--encoder-attention-heads", "8"])
    assert (big.encoder_attention_heads, big.decoder_attention_heads, big.encoder_ffn_embed_dim) == (8, 16, 4096)
    hce, hmce = model_cfg("hce"), model_cfg("hmce")
    assert (hce.memory_attention, hmce.memory_attention) == (False, True)
    assert hce.train_length_chunks == 3 and hce.document_vector_span == 32  # the dataclass defaults
    rnn = model_cfg("multisource_rnn")
    assert (rnn.decoder_hidden_size, rnn.dropout, rnn.combination) == (500, 0.2, "hierarchical")


@pytest.mark.parametrize("arch", ["hmce", "dct", "ctx_concat", "hierarchical_context_transformer"])
def test_hydra_config_naming_a_context_arch_builds_the_cli_model(tiny_data, arch):
    task, reference, _ = build(tiny_data, "hmce" if arch == "hierarchical_context_transformer" else arch)
    if arch == "hierarchical_context_transformer":  # a node of the model group: the dataclass merged in
        merged = OmegaConf.merge(OmegaConf.structured(MODEL_DATACLASS_REGISTRY[arch]), TINY,
                                 {"_name": arch, "memory_attention": True})
        node = OmegaConf.create({"model": merged}).model  # under the root config, as fairseq-hydra-train has it
    else:  # a config naming an architecture, with only the options it sets
        node = OmegaConf.create({"_name": arch, **TINY})
    torch.manual_seed(1)
    model = task.build_model(node)
    assert shapes(model) == shapes(reference)
    if arch != "dct" and arch != "ctx_concat":
        assert model.train_length_chunks == 3


@pytest.mark.parametrize("arch", ["hierarchical_attention_decoder", "multisource_rnn"])
def test_hydra_config_naming_a_multisource_arch_builds_the_cli_model(multimodal_data, arch):
    sizes = TINY_MODEL if arch != "multisource_rnn" else ["--encoder-hidden-size", "16", "--decoder-hidden-size", "16"]
    task, reference, cfg = build_multimodal(multimodal_data, arch, model_args=sizes)
    given = TINY if arch != "multisource_rnn" else {"encoder_hidden_size": 16, "decoder_hidden_size": 16}
    node = OmegaConf.create({"_name": arch, "aux_input_spec": cfg.model.aux_input_spec, **given})
    model = task.build_model(node)
    assert shapes(model) == shapes(reference)


def test_a_namespace_config_from_before_the_dataclass_builds_the_same_model(multimodal_data):
    """Checkpoints of multisource_rnn saved before it had a dataclass store an argparse
    namespace filled by its old architecture function; it still builds the same model."""
    task, reference, cfg = build_multimodal(multimodal_data, "multisource_rnn",
                                            model_args=["--encoder-hidden-size", "16", "--decoder-hidden-size", "16"])
    old = argparse.Namespace(
        _name="multisource_rnn", arch="multisource_rnn", encoder_embed_dim=300, encoder_hidden_size=16,
        decoder_embed_dim=300, decoder_hidden_size=16, attention_dim=500, context_dim=32, combination="hierarchical",
        sentinel=False, dropout=0.2, aux_input_spec=cfg.model.aux_input_spec, task="multimodal_translation",
    )
    model = task.build_model(old, from_checkpoint=True)
    assert shapes(model) == shapes(reference)
