"""Issue 4, second-source-language variant: the task loads an extra source language binarized by
fairseq-preprocess, and the multi-source model's output depends on it."""
import numpy as np
import torch
from fairseq.data import indexed_dataset

from tests.helpers import build_multimodal
from fairseq_ctx.multisource.adversarial import shuffle_text
from fairseq_ctx.multisource.multimodal_translation_task import MultimodalTranslationTask

FR_ONLY = ("--extra-source-langs", "fr", "--extra-source-dict", "own")


def test_extra_source_is_loaded_and_changes_the_output_and_trains_its_encoder(multimodal_data):
    task, model, cfg = build_multimodal(multimodal_data, task_args=FR_ONLY)
    assert cfg.model.aux_input_spec == "fr:text"
    dataset = task.datasets["train"]
    batch = dataset.collater([dataset[i] for i in range(8)])
    fr = batch["net_input"]["aux_inputs"]["fr"]
    raw = (multimodal_data.parent / "raw" / "train.fr").read_text().splitlines()
    fr_dict = task.extra_dicts["fr"]
    assert fr_dict is not task.source_dictionary and "banque" in fr_dict.indices
    for row, sentence_id in enumerate(batch["id"].tolist()):
        assert fr_dict.string(fr[row], extra_symbols_to_ignore={fr_dict.pad()}) == raw[sentence_id]

    model.eval()
    with torch.no_grad():
        logits = model(**batch["net_input"])[0]
        swapped = dict(batch["net_input"], aux_inputs={"fr": fr.roll(1, 0)})
        logits_swapped = model(**swapped)[0]
        again = model(**batch["net_input"])[0]
    torch.testing.assert_close(again, logits)
    assert (logits_swapped - logits).abs().amax(-1).amin() > 1e-3  # every sentence, every target position

    model.train()
    model(**batch["net_input"])[0].logsumexp(-1).mean().backward()
    fr_encoder = model.encoder.extra_encoders["fr"]
    assert not [n for n, p in fr_encoder.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert fr_encoder.embed_tokens is not model.encoder.text_encoder.embed_tokens


def test_language_pair_is_inferred_past_the_extra_source_binaries(multimodal_data):
    _, _, cfg = build_multimodal(multimodal_data, task_args=FR_ONLY)
    cfg.task.source_lang = cfg.task.target_lang = None  # {split}.fr-de.fr.* lie next to {split}.en-de.*
    task = MultimodalTranslationTask.setup_task(cfg.task)
    assert (task.cfg.source_lang, task.cfg.target_lang) == ("en", "de")


def test_adversarial_shuffle_of_the_second_source_permutes_whole_sentences(multimodal_data, tmp_path):
    skipped = shuffle_text(str(multimodal_data), str(tmp_path), "test", "fr", None, np.random.default_rng(0))
    assert skipped == ["test.fr-de.fr.bin", "test.fr-de.fr.idx"]
    original = indexed_dataset.MMapIndexedDataset(str(multimodal_data / "test.fr-de.fr"))
    shuffled = indexed_dataset.MMapIndexedDataset(str(tmp_path / "test.fr-de.fr"))
    rows = [tuple(original[i].tolist()) for i in range(len(original))]
    shuffled_rows = [tuple(shuffled[i].tolist()) for i in range(len(shuffled))]
    assert sorted(shuffled_rows) == sorted(rows) and shuffled_rows != rows
