"""Imagination criterion (eq. 5.17–5.18): text-only model, image features at training time only."""
import torch
import torch.nn.functional as F

from conftest import build_multimodal


def test_imagination_loss_adds_the_hinge_on_cosine_distances_and_trains_every_parameter(multimodal_data):
    task, model, cfg = build_multimodal(multimodal_data, task_args=("--auxiliary-loss-inputs", "img"),
                                        extra=["--criterion", "imagination", "--label-smoothing", "0.1",
                                               "--imagination-margin", "0.3", "--imagination-hidden-dim", "16"])
    assert cfg.model.aux_input_spec == ""  # the model is text-only
    criterion = task.build_criterion(cfg.criterion)
    dataset = task.datasets["train"]
    sample = dataset.collater([dataset[i] for i in range(6)])
    model.train()
    loss, _, log = criterion(model, sample)
    loss.backward()
    missing = [n for n, p in [*model.named_parameters(), *criterion.named_parameters()] if p.grad is None]
    assert not missing

    model.eval()
    with torch.no_grad():
        loss, _, log = criterion(model, sample)
        plain_ce, _ = criterion.compute_loss(model, model(**sample["net_input"]), sample)
        encoder_out = model.encoder(sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"])
        mask = encoder_out["encoder_padding_mask"][0]
        summed = (encoder_out["encoder_out"][0] * (~mask).t().unsqueeze(-1)).sum(0)
        predicted = criterion.head.predict(summed)
        image = sample["net_input"]["aux_inputs"]["img"].mean(1)
        d_true = 1 - F.cosine_similarity(predicted, image)
        d_contrast = 1 - F.cosine_similarity(predicted, image.roll(1, 0))
        expected = (0.3 + d_true - d_contrast).clamp_min(0).sum()
    torch.testing.assert_close(log["imagination_loss"], expected)
    torch.testing.assert_close(loss, plain_ce + expected)
    assert expected > 0
