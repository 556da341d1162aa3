"""multisource_rnn: Bahdanau combinations, sentinel, incremental decoding, gradients."""
import pytest
import torch

from conftest import build_multimodal

RNN = ["--encoder-embed-dim", "16", "--encoder-hidden-size", "16", "--decoder-embed-dim", "16",
       "--decoder-hidden-size", "24", "--attention-dim", "20"]


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
