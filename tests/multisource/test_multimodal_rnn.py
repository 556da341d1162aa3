"""multisource_rnn: Bahdanau combinations, sentinel, incremental decoding, gradients; stock
fairseq-train + fairseq-generate end to end."""
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.production_matrix import TINY_RNN as RNN
from devtools.in_process_tools import call_tool
from tests.helpers import USER_DIR, build_multimodal


@pytest.mark.parametrize("combination,sentinel", [("concat", False), ("flat", True), ("hierarchical", False),
                                                  ("hierarchical", True)])
def test_rnn_combinations(multimodal_data, combination, sentinel):
    task, model, _ = build_multimodal(
        multimodal_data, arch="multisource_rnn", model_args=RNN,
        extra=["--combination", combination, *(["--sentinel"] if sentinel else [])],
        task_args=("--feature-inputs", "img", "--extra-source-langs", "fr", "--extra-source-dict", "own"))
    dataset = task.datasets["train"]
    net_input = dataset.collater([dataset[i] for i in range(5)])["net_input"]
    model.train()
    logits, extra = model(**net_input)
    logits.logsumexp(-1).mean().backward()
    assert not [n for n, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    weights = extra["input_weights"][0]
    assert weights.shape[-1] == 3 + sentinel  # source, img, fr (+ sentinel)
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:2]))
    model.eval()
    encoder_out = model.encoder(net_input["src_tokens"], net_input["src_lengths"], net_input["aux_inputs"])
    prev = net_input["prev_output_tokens"]
    full = model.decoder(prev, encoder_out=encoder_out)[0]
    order = torch.tensor([2, 0, 1, 4, 3])
    encoder_out = model.encoder.reorder_encoder_out(encoder_out, order)
    state = {}
    steps = [model.decoder(prev[order, : t + 1], encoder_out=encoder_out, incremental_state=state)[0]
             for t in range(prev.size(1))]
    torch.testing.assert_close(torch.cat(steps, 1), full[order], atol=1e-5, rtol=1e-4)


def _hypotheses(generate_output: str):
    """{sentence id: (hypothesis, score)} from fairseq-generate's H- lines."""
    rows = [line.split("\t") for line in generate_output.splitlines() if line.startswith("H-")]
    return {int(tag[2:]): (text, float(score)) for tag, score, text in rows}


def _with_sources_of_different_lengths(data: Path, work: Path) -> Path:
    """Symlinked copy of ``data`` whose test sources lose 0, 1 or 2 words (the generated ones all
    have one length), so that batches are padded."""
    raw = (data.parent / "raw" / "test.en").read_text().splitlines()
    shortened = [" ".join(w for k, w in enumerate(line.split()) if k not in (1, 4)[: i % 3])
                 for i, line in enumerate(raw)]
    (work / "short.en").write_text("\n".join(shortened) + "\n")
    call_tool("fairseq-preprocess", ["--only-source", "-s", "en", "-t", "de", "--testpref", str(work / "short"),
              "--srcdict", str(data / "dict.en.txt"), "--destdir", str(work / "short-bin"), "--workers", "1"])
    target = work / "data"
    target.mkdir()
    for entry in data.iterdir():
        source = work / "short-bin" / entry.name if entry.name.startswith("test.en-de.en.") else entry
        if entry.is_file():
            os.symlink(source, target / entry.name)
    return target


def test_rnn_with_stock_train_and_generate_decodes_every_sentence_and_batching_changes_nothing(multimodal_data,
                                                                                                 tmp_path):
    common = ["--user-dir", USER_DIR, "--task", "multimodal_translation", "-s", "en", "-t", "de",
              "--feature-inputs", "img", "--cpu"]
    call_tool("fairseq-train", [
        str(multimodal_data), *common, "--arch", "multisource_rnn", *RNN, "--combination", "hierarchical",
        "--optimizer", "adam", "--lr", "1e-2", "--batch-size", "16", "--max-update", "100",
        "--criterion", "label_smoothed_cross_entropy", "--dropout", "0.0", "--seed", "1",
        "--save-dir", str(tmp_path / "ckpt"), "--no-epoch-checkpoints", "--log-format", "none", "--disable-validation"])
    padded = _with_sources_of_different_lengths(multimodal_data, tmp_path)
    decoded = {}
    for batch_size in (16, 1):
        results = tmp_path / f"gen-{batch_size}"
        call_tool("fairseq-generate", [
            str(padded), *common, "--path", str(tmp_path / "ckpt" / "checkpoint_last.pt"), "--gen-subset", "test",
            "--beam", "2", "--batch-size", str(batch_size), "--required-batch-size-multiple", "1",
            "--results-path", str(results)])
        decoded[batch_size] = _hypotheses((results / "generate-test.txt").read_text())
    batched, single = decoded[16], decoded[1]
    sources = [line.split("\t")[1] for line in (tmp_path / "gen-16" / "generate-test.txt").read_text().splitlines()
               if line.startswith("S-")]
    assert {len(source.split()) for source in sources} == {4, 5, 6}  # padded batches
    assert sorted(batched) == list(range(16))
    assert all(len(text.split()) >= 3 for text, _ in batched.values())
    assert len({text for text, _ in batched.values()}) > 4  # a trained model, not one sentence for every input
    assert {i: text for i, (text, _) in batched.items()} == {i: text for i, (text, _) in single.items()}
    np.testing.assert_allclose([batched[i][1] for i in range(16)], [single[i][1] for i in range(16)], atol=1e-3)

    # the attention plot of the same checkpoint (its --combination is a command-line choice)
    from fairseq_ctx.cli import attention_plot

    out = tmp_path / "attention-rnn"
    attention_plot.main([str(multimodal_data), "--path", str(tmp_path / "ckpt" / "checkpoint_last.pt"),
                         "--feature-inputs", "img", "--sentences", "0,1", "--out", str(out)])
    plotted = json.loads(out.with_suffix(".json").read_text())
    assert plotted["combination"] == "hierarchical" and plotted["inputs"] == ["source", "img"]
    for sentence in plotted["sentences"]:
        np.testing.assert_allclose([sum(w) for w in sentence["weights"]], 1.0, rtol=1e-5)
