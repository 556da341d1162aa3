"""At realistic magnitudes: forward + backward in float16 and bfloat16 on
inputs of the size the papers train on is finite and close to float32.

- context models: 512-dim, N=4 context sentences of ~100 tokens each (plus a document-initial
  sentence with no context), through the task's own context batching;
- multimodal models: R=196 regions of 2048-dim ResNet-pool-like features (non-negative, mean
  ~0.5, maximum above 10);
- embedding models: 512-dim, a document of 700 tokens.

Layer counts and FFN widths are small (one encoder and one decoder layer, FFN 1024): what
overflows or loses precision in half precision is set by model width, lengths and input
magnitudes, not by depth. bfloat16 runs for every arch; float16 matmuls have no fast CPU kernel
here (about 40x slower than float32), so by default float16 runs for one arch per family (hmce,
hierarchical_attention_decoder, tmde) and for the others under the ``full_matrix`` marker.

Tolerance: the relative L2 error ‖half − fp32‖ / ‖fp32‖ of the output logits (and embeddings)
and of all parameter gradients concatenated must stay below 32 unit roundoffs of the format
(u = 2⁻¹¹ for float16, 2⁻⁸ for bfloat16). Every op rounds its result once, so a one-layer model
accumulates a few tens of roundings that partly cancel; measured: outputs 1–1.6 u, gradients
1.5–11 u. A real defect (overflow to inf, a mask constant that is not the dtype's min, a softmax,
norm or statistic summed in half) gives non-finite values or errors of order 1 (> 100 u).
"""
import copy
import random
from pathlib import Path
from typing import Dict, Tuple

import numpy as np
import pytest
import torch
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from tests.helpers import USER_DIR, batch_of, build, run_tool
from tests.embedding_helpers import build_embedding_model
from tests.production_matrix import plugin_archs, task_of
from fairseq_ctx.embedding.distance_constraint import cnv_distance_terms, mde_distance_terms
from fairseq_ctx.multisource.imagination import ImaginationHead
from fairseq_ctx.analysis.cka import cka, hsic, mean_off_diagonal, mean_pairwise_linear_hsic, pairwise_linear_cka, srip

UNIT_ROUNDOFF = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}
TOLERANCE_IN_UNITS = 32
FP16_BY_DEFAULT = {"hmce", "hierarchical", "tmde"}  # one per family; the others under full_matrix
WIDE = ["--encoder-embed-dim", "512", "--decoder-embed-dim", "512", "--encoder-ffn-embed-dim", "1024",
        "--decoder-ffn-embed-dim", "1024", "--encoder-attention-heads", "8", "--decoder-attention-heads", "8",
        "--encoder-layers", "1", "--decoder-layers", "1", "--dropout", "0.0"]
CONTEXT_SIZE = 4
SENTENCES_PER_DOCUMENT = 6
REGIONS, FEATURE_DIM = 196, 2048
DOCUMENT_TOKENS = 700


def archs_of(task_name: str):
    """Every registered plugin arch of a task: new archs are covered without editing this file."""
    return [arch for arch in plugin_archs() if task_of(arch) == task_name]


def precisions(case_ids):
    """(case, dtype) params: bfloat16 for every case, float16 by default only for FP16_BY_DEFAULT."""
    params = []
    for case, case_id in case_ids:
        params.append(pytest.param(*case, torch.bfloat16, id=f"{case_id}-bf16"))
        marks = [] if case_id in FP16_BY_DEFAULT else [pytest.mark.full_matrix]
        params.append(pytest.param(*case, torch.float16, marks=marks, id=f"{case_id}-fp16"))
    return params


@pytest.fixture(scope="module")
def long_documents(tmp_path_factory) -> Path:
    """Three documents of six source sentences of 90–110 tokens (the context lengths that matter)
    with short targets (the decoder is not what the context adds), binarized."""
    root = tmp_path_factory.mktemp("long_documents")
    rng = random.Random(0)
    count = 3 * SENTENCES_PER_DOCUMENT
    sentences = [" ".join(f"w{rng.randrange(1000)}" for _ in range(rng.randint(lo, hi)))
                 for lo, hi in [(90, 110)] * count + [(15, 25)] * count]
    (root / "train.en").write_text("\n".join(sentences[:count]) + "\n")
    (root / "train.de").write_text("\n".join(sentences[count:]) + "\n")
    data = root / "data-bin"
    run_tool(["fairseq-preprocess", "--source-lang", "en", "--target-lang", "de", "--trainpref", str(root / "train"),
              "--destdir", str(data), "--joined-dictionary", "--workers", "1"])
    (data / "train.docids").write_text("".join(f"doc{i // SENTENCES_PER_DOCUMENT}\n" for i in range(count)))
    return data


def resnet_pool_features(batch: int, seed: int = 0) -> torch.Tensor:
    """(batch, 196, 2048) non-negative features shaped like ResNet pool activations:
    sparse (a gamma with shape 0.3 puts most mass near zero), mean 0.5, a heavy tail above 10."""
    rng = np.random.default_rng(seed)
    return torch.from_numpy(rng.gamma(0.3, 0.5 / 0.3, size=(batch, REGIONS, FEATURE_DIM)).astype(np.float32))


def relative_error(value: torch.Tensor, reference: torch.Tensor) -> float:
    return ((value.float() - reference).norm() / reference.norm()).item()


def flat_gradients(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.float().flatten() for p in model.parameters() if p.grad is not None])


def cast(value, dtype: torch.dtype):
    if torch.is_tensor(value):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, dict):
        return {key: cast(item, dtype) for key, item in value.items()}
    return value


def run(model: torch.nn.Module, net_input: Dict, target: torch.Tensor, pad: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Logits and the summed token NLL (fairseq's reduction, in float32), back-propagated."""
    logits = model(**net_input)[0]
    lprobs = torch.log_softmax(logits.float(), dim=-1)
    nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1).masked_fill(target.eq(pad), 0.0).sum()
    nll.backward()
    return logits, flat_gradients(model)


def assert_half_matches_float32(model: torch.nn.Module, net_input: Dict, target: torch.Tensor, pad: int,
                                dtype: torch.dtype) -> None:
    model.eval()  # no dropout: both precisions compute the same function
    half = copy.deepcopy(model).to(dtype)
    reference_logits, reference_grads = run(model, net_input, target, pad)
    logits, grads = run(half, cast(net_input, dtype), target, pad)
    assert logits.dtype == dtype and torch.isfinite(logits).all()
    assert torch.isfinite(grads).all()
    missing = [name for name, p in half.named_parameters() if p.requires_grad and p.grad is None]
    assert missing == [], missing
    limit = TOLERANCE_IN_UNITS * UNIT_ROUNDOFF[dtype]
    assert relative_error(logits, reference_logits) < limit
    assert relative_error(grads, reference_grads) < limit


def test_resnet_like_features_have_realistic_magnitudes():
    features = resnet_pool_features(4)
    assert features.min() >= 0 and 0.45 < features.mean() < 0.55 and features.max() > 10
    assert (features < 0.05).float().mean() > 0.3  # mostly near zero, like post-ReLU activations


@pytest.mark.parametrize("arch,dtype", precisions([((arch,), arch) for arch in archs_of("context_translation")]))
def test_context_model_with_four_long_context_sentences(long_documents, arch, dtype):
    task, model, _ = build(long_documents, arch, [*WIDE, "--context-size", str(CONTEXT_SIZE),
                                                 "--max-source-positions", "1024", "--max-target-positions", "1024"])
    task.load_dataset("train")
    # the last sentence of document 0 (four context sentences) and the first of document 1 (none)
    sample = batch_of(task, "train", [SENTENCES_PER_DOCUMENT - 1, SENTENCES_PER_DOCUMENT])
    net_input = sample["net_input"]
    assert net_input["src_tokens"].size(1) > 90
    slots = net_input["context_index"].ge(0).sum(1).tolist()
    assert sorted(slots) == [0, CONTEXT_SIZE]
    assert net_input["context_tokens"].ne(task.src_dict.pad()).sum(1).min() > 90
    assert_half_matches_float32(model, net_input, sample["target"], task.tgt_dict.pad(), dtype)


def multimodal_model(data: Path, arch: str, extra=()):
    """A multimodal model built for 196 regions of 2048-dim image features."""
    args = options.parse_args_and_arch(options.get_training_parser(), input_args=[
        str(data), "--user-dir", USER_DIR, "--task", "multimodal_translation", "--feature-inputs", "img",
        "--source-lang", "en", "--target-lang", "de", "--arch", arch, "--cpu", "--seed", "1",
        "--aux-input-spec", f"img:feature:{FEATURE_DIM}:{REGIONS}", *extra,
    ])
    cfg = convert_namespace_to_omegaconf(args)
    torch.manual_seed(1)
    task = tasks.setup_task(cfg.task)
    return task, task.build_model(cfg.model)


def text_batch(dictionary, batch: int, length: int, seed: int = 0) -> Tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(dictionary.nspecial, len(dictionary), (batch, length), generator=generator)
    tokens[:, -1] = dictionary.eos()
    return tokens, torch.full((batch,), length, dtype=torch.long)


RNN_SIZE = ["--encoder-embed-dim", "256", "--encoder-hidden-size", "256", "--decoder-embed-dim", "256",
            "--decoder-hidden-size", "512", "--attention-dim", "256", "--dropout", "0.0"]
MULTIMODAL_CASES = [(("hierarchical_attention_decoder", [*WIDE, "--combination", c]), c)
                    for c in ("hierarchical", "flat", "serial", "parallel")] + [
    ((arch, RNN_SIZE if arch == "multisource_rnn" else WIDE), arch)
    for arch in archs_of("multimodal_translation") if arch != "hierarchical_attention_decoder"]


@pytest.mark.parametrize("arch,extra,dtype", precisions(MULTIMODAL_CASES))
def test_multimodal_model_with_196_regions_of_2048_dim_features(multimodal_data, arch, extra, dtype):
    task, model = multimodal_model(multimodal_data, arch, extra)
    src_tokens, src_lengths = text_batch(task.src_dict, batch=4, length=16)
    target, _ = text_batch(task.tgt_dict, batch=4, length=16, seed=1)
    prev_output_tokens = torch.cat([target.new_full((4, 1), task.tgt_dict.eos()), target[:, :-1]], dim=1)
    net_input = {"src_tokens": src_tokens, "src_lengths": src_lengths, "prev_output_tokens": prev_output_tokens,
                 "aux_inputs": {"img": resnet_pool_features(4)}}
    assert_half_matches_float32(model, net_input, target, task.tgt_dict.pad(), dtype)


LONG = ["--max-source-positions", "1024", "--max-target-positions", "1024"]
LASER_SIZE = ["--encoder-embed-dim", "320", "--encoder-hidden-size", "512", "--decoder-embed-dim", "320",
              "--decoder-hidden-size", "512", "--dropout", "0.0"]
EMBEDDING_SIZES = {"tmde_p": [*WIDE, *LONG, "--pyramid-queries", "32"], "laser_bilstm": [*LASER_SIZE, *LONG]}
EMBEDDING_CASES = [((arch, EMBEDDING_SIZES.get(arch, [*WIDE, *LONG])), arch) for arch in archs_of("multilingual_embedding")]


@pytest.mark.parametrize("arch,size,dtype", precisions(EMBEDDING_CASES))
def test_embedding_model_on_a_long_document(multilingual_data, arch, size, dtype):
    task, model, _ = build_embedding_model(multilingual_data, arch, size=size)
    dictionary = task.source_dictionary
    words = [dictionary[i] for i in range(dictionary.nspecial, len(dictionary)) if not dictionary[i].startswith("__")]
    rng = random.Random(0)
    src_tokens = task.encode_line(" ".join(rng.choice(words) for _ in range(DOCUMENT_TOKENS)), DOCUMENT_TOKENS)[None]
    src_lengths = torch.tensor([src_tokens.size(1)])
    pad = dictionary.pad()
    target = src_tokens[:, 1:41].clone()  # the decoder is not what a long document stresses
    start = task.lang_token_index[task.languages[0]]
    prev_output_tokens = torch.cat([target.new_full((1, 1), start), target[:, :-1]], dim=1)
    net_input = {"src_tokens": src_tokens, "src_lengths": src_lengths, "prev_output_tokens": prev_output_tokens}
    assert_half_matches_float32(model, net_input, target, pad, dtype)

    model.eval()
    reference = model.embed(src_tokens, src_lengths)
    embedding = copy.deepcopy(model).to(dtype).embed(src_tokens, src_lengths)
    assert embedding.dtype == dtype and torch.isfinite(embedding).all()
    assert relative_error(embedding, reference) < TOLERANCE_IN_UNITS * UNIT_ROUNDOFF[dtype]


# Loss terms in float32 (the CKA test is tests/analysis/test_cka.py::test_half_precision_inputs_give_the_float32_answer).
# Half-precision inputs of magnitude 60 over 512 dims: every sum of squares is ~2·10⁶, beyond
# float16's maximum 65504, so a term computed in float16 would be inf; in float32 it equals the
# term of the upcast inputs.
def _heads(x):
    return x.view(x.size(0), 8, -1)


LOSS_TERMS = {
    "hsic": lambda x, y: hsic(x, y),
    "unbiased_hsic": lambda x, y: hsic(x, y, unbiased=True),
    "rbf_cka": lambda x, y: cka(x, y, kernel="rbf"),
    "head_hsic": lambda x, y: mean_pairwise_linear_hsic(_heads(x)),
    "head_cka": lambda x, y: mean_off_diagonal(pairwise_linear_cka(_heads(x))),
    "srip": lambda x, y: srip(x),
    "mde_distance": lambda x, y: torch.stack([t.sum() for t in mde_distance_terms(x, y, NEGATIVES, 0.5, 1e-6).values()]),
    "cnv_distance": lambda x, y: torch.stack([t.sum() for t in cnv_distance_terms(x, y, NEGATIVES, 0.5).values()]),
}
NEGATIVES = torch.tensor([[(row + k) % 16 for k in (1, 2, 3)] for row in range(16)])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("term", sorted(LOSS_TERMS))
def test_loss_terms_of_half_inputs_are_computed_in_float32(term, dtype):
    generator = torch.Generator().manual_seed(0)
    x = (60 * torch.randn(16, 512, generator=generator)).to(dtype)
    y = (60 * torch.randn(16, 512, generator=generator)).to(dtype)
    if dtype == torch.float16:
        assert torch.isinf((x * x).sum()), "the inputs should overflow float16 arithmetic"
    value = LOSS_TERMS[term](x, y)
    assert value.dtype == torch.float32 and torch.isfinite(value).all()
    torch.testing.assert_close(value, LOSS_TERMS[term](x.float(), y.float()), rtol=1e-5, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_imagination_term_of_half_states_is_computed_in_float32(dtype):
    torch.manual_seed(0)
    head = ImaginationHead(512, 64, FEATURE_DIM, margin=0.1)
    states = 60 * torch.randn(4, 30, 512)
    padding = torch.zeros(4, 30, dtype=torch.bool)
    padding[1, 20:] = True
    image = resnet_pool_features(4)
    reference = head(states, padding, image)
    value = copy.deepcopy(head).to(dtype)(states.to(dtype), padding, image.to(dtype))
    assert value.dtype == torch.float32 and torch.isfinite(value)
    torch.testing.assert_close(value, reference, rtol=2e-2, atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("criterion_args,terms", [
    (["--criterion", "cka_alignment", "--cka-lambda", "0.5", "--cka-samples", "64"], ["cka"]),
    (["--criterion", "head_diversity", "--hsic-lambda", "0.01", "--ortho-lambda", "0.5", "--diversity-samples", "64"],
     ["hsic", "ortho"]),
], ids=["cka_alignment", "head_diversity"])
def test_criterion_terms_of_a_half_model_are_float32(tiny_data, criterion_args, terms, dtype):
    task, model, cfg = build(tiny_data, "hmce", [*criterion_args, "--label-smoothing", "0.1"])
    criterion = task.build_criterion(cfg.criterion)
    task.load_dataset("train")
    sample = batch_of(task, "train", list(range(12)))
    assert_criterion_terms_are_float32(model, criterion, sample, terms, dtype)


def assert_criterion_terms_are_float32(model, criterion, sample, terms, dtype) -> None:
    """The logged terms of the half model are float32, finite and close to the float32 model's
    (same sampled rows: the criterions sample vectors with torch's global generator)."""
    model.eval()
    torch.manual_seed(0)
    reference = criterion(model, sample)[2]
    torch.manual_seed(0)
    loss, _, log = criterion(model.to(dtype), sample)
    loss.backward()
    for term in terms:
        assert log[term].dtype == torch.float32 and torch.isfinite(log[term]), term
        assert log[term].item() == pytest.approx(reference[term].item(), rel=0.05, abs=1e-4), term


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("variant", ["mde", "cnv"])
def test_distance_constraint_terms_of_a_half_model_are_float32(multilingual_data, variant, dtype):
    task, model, criterion = build_embedding_model(multilingual_data, "tmde", ["--distance-variant", variant])
    task.load_dataset("valid")
    dataset = task.datasets["valid"]
    sample = dataset.collater([dataset[i] for i in dataset.batch_by_size(dataset.ordered_indices(), max_tokens=300)[0]])
    assert_criterion_terms_are_float32(model, criterion, sample, ["d_p", "v_norm"], dtype)
