"""Image features reach the batch in the feature file's dtype, read for the whole batch at once:
the batch holds each sentence's row in batch order (also through a ``.ids`` mapping), and the
models, which cast the features themselves, give the same outputs and losses as on float32."""
import numpy as np
import pytest
import torch

from tests.helpers import build_multimodal
from tests.multisource.test_multimodal_bad_input import copy_of
from tests.multisource.test_multimodal_imagination import IMAGINATION
from tests.production_matrix import TINY_RNN


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_a_batch_holds_each_sentences_row_in_batch_order_in_the_files_dtype(multimodal_data, tmp_path, dtype):
    data = copy_of(multimodal_data, tmp_path, without=["train.img.npy"])
    rows = np.random.default_rng(0).standard_normal((10, 3, 8)).astype(dtype)
    np.save(data / "train.img.npy", rows)
    (data / "train.img.ids").write_text("".join(f"{(7 * i) % 10}\n" for i in range(240)))
    task, _, _ = build_multimodal(data)
    dataset = task.datasets["train"]
    indices = [31, 4, 200, 17, 4 + 10, 99]
    batch = dataset.collater([dataset[i] for i in indices])
    features, ids = batch["net_input"]["aux_inputs"]["img"], batch["id"].tolist()
    assert sorted(ids) == sorted(indices) and features.dtype == torch.from_numpy(rows).dtype
    assert torch.equal(features, torch.from_numpy(rows[[(7 * i) % 10 for i in ids]]))
    assert torch.equal(features, torch.stack([dataset.features["img"][i] for i in ids]))


def float32_features(sample: dict) -> dict:
    net_input = sample["net_input"]
    return {**sample, "net_input": {**net_input, "aux_inputs": {name: value.float() for name, value
                                                                 in net_input["aux_inputs"].items()}}}


@pytest.mark.parametrize("arch, model_args", [("hierarchical_attention_decoder", None), ("multisource_rnn", TINY_RNN)])
def test_models_read_float16_features_as_they_read_float32_ones(multimodal_data, arch, model_args):
    task, model, _ = build_multimodal(multimodal_data, arch=arch, **({"model_args": model_args} if model_args else {}))
    dataset = task.datasets["train"]
    sample = dataset.collater([dataset[i] for i in range(6)])
    assert sample["net_input"]["aux_inputs"]["img"].dtype == torch.float16  # the generated corpus stores float16
    model.eval()
    with torch.no_grad():
        half, single = model(**sample["net_input"])[0], model(**float32_features(sample)["net_input"])[0]
    assert torch.equal(half, single)


def test_the_imagination_loss_reads_float16_features_as_float32_ones(multimodal_data):
    task, model, cfg = build_multimodal(multimodal_data, task_args=("--auxiliary-loss-inputs", "img"), extra=IMAGINATION)
    criterion = task.build_criterion(cfg.criterion)
    dataset = task.datasets["train"]
    sample = dataset.collater([dataset[i] for i in range(6)])
    assert sample["net_input"]["aux_inputs"]["img"].dtype == torch.float16
    model.eval()
    with torch.no_grad():
        half, single = criterion(model, sample)[2], criterion(model, float32_features(sample))[2]
    assert half["imagination_loss"] > 0 and torch.equal(half["imagination_loss"], single["imagination_loss"])


def test_the_benchmarks_former_collation_holds_the_same_values(multimodal_data):
    from benchmarks.multimodal_collation import collate, collate_row_by_row

    task, _, _ = build_multimodal(multimodal_data)
    dataset, indices = task.datasets["train"], [5, 40, 3, 77]
    former, now = collate_row_by_row(dataset, indices), collate(dataset, indices)
    assert torch.equal(former["id"], now["id"]) and torch.equal(former["net_input"]["src_tokens"],
                                                               now["net_input"]["src_tokens"])
    assert former["net_input"]["aux_inputs"]["img"].dtype == torch.float32
    assert torch.equal(former["net_input"]["aux_inputs"]["img"], now["net_input"]["aux_inputs"]["img"].float())
