"""Imagination criterion (eq. 5.17–5.18): text-only model, image features at training time only."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import build_multimodal
from tests.production_matrix import TINY_RNN

IMAGINATION = ["--criterion", "imagination", "--label-smoothing", "0.1", "--imagination-margin", "0.3",
               "--imagination-hidden-dim", "16"]


def test_imagination_loss_adds_the_hinge_on_cosine_distances_and_trains_every_parameter(multimodal_data):
    task, model, cfg = build_multimodal(multimodal_data, task_args=("--auxiliary-loss-inputs", "img"),
                                        extra=IMAGINATION)
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
        image = sample["net_input"]["aux_inputs"]["img"].float().mean(1)  # stored float16
        d_true = 1 - F.cosine_similarity(predicted, image)
        d_contrast = 1 - F.cosine_similarity(predicted, image.roll(1, 0))
        expected = (0.3 + d_true - d_contrast).clamp_min(0).sum()
    torch.testing.assert_close(log["imagination_loss"], expected)
    torch.testing.assert_close(loss, plain_ce + expected)
    assert expected > 0


def test_imagination_on_the_rnn_reads_its_bigru_states_and_trains_the_source_encoder(multimodal_data):
    task, model, cfg = build_multimodal(multimodal_data, arch="multisource_rnn", model_args=TINY_RNN,
                                        task_args=("--auxiliary-loss-inputs", "img"), extra=IMAGINATION)
    assert cfg.model.aux_input_spec == ""
    criterion = task.build_criterion(cfg.criterion)
    assert criterion.head.predict[0].in_features == 2 * 16  # BiGRU states, not the embedding size
    dataset = task.datasets["train"]
    sample = dataset.collater([dataset[i] for i in range(6)])
    # the generated sentences all have one length: drop the first word of one (left padding) so the mask matters
    sample["net_input"]["src_tokens"][0, 0] = task.source_dictionary.pad()
    sample["net_input"]["src_lengths"][0] -= 1
    model.eval()
    with torch.no_grad():
        loss, _, log = criterion(model, sample)
        plain_ce, _ = criterion.compute_loss(model, model(**sample["net_input"]), sample)
        encoder_out = model.encoder(sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"])
        states, mask = encoder_out["states"][0], encoder_out["masks"][0]
        assert mask.sum() == 1
        predicted = criterion.head.predict((states * (~mask).unsqueeze(-1)).sum(1))
        image = sample["net_input"]["aux_inputs"]["img"].float().mean(1)  # stored float16
        expected = (0.3 + (1 - F.cosine_similarity(predicted, image))
                    - (1 - F.cosine_similarity(predicted, image.roll(1, 0)))).clamp_min(0).sum()
    assert expected > 0
    torch.testing.assert_close(log["imagination_loss"], expected)
    torch.testing.assert_close(loss, plain_ce + expected)

    model.train()
    encoder_out = model.encoder(sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"])
    image_loss = criterion.head(*model.encoder.source_states(encoder_out), sample["net_input"]["aux_inputs"]["img"])
    source_encoder = list(model.encoder.source.parameters())
    grads = torch.autograd.grad(image_loss, source_encoder)
    assert all(g.abs().sum() > 0 for g in grads)
    loss, _, _ = criterion(model, sample)
    loss.backward()
    assert not [n for n, p in [*model.named_parameters(), *criterion.named_parameters()] if p.grad is None]


def test_imagination_refuses_an_arch_without_source_states_before_training(multimodal_data):
    task, _, cfg = build_multimodal(multimodal_data, arch="transformer", task_args=("--auxiliary-loss-inputs", "img"),
                                    extra=IMAGINATION)
    with pytest.raises(ValueError, match="--arch transformer does not expose; supported: hierarchical_attention_decoder, "
                                         "hierarchical_attention_decoder_big, multisource_rnn"):
        task.build_criterion(cfg.criterion)


def test_imagination_head_in_half_precision_stays_half_and_computes_in_float32():
    from fairseq_ctx.multisource.imagination import ImaginationHead

    torch.manual_seed(0)
    reference = ImaginationHead(encoder_dim=8, hidden_dim=16, image_dim=12, margin=0.5)
    head = ImaginationHead(encoder_dim=8, hidden_dim=16, image_dim=12, margin=0.5)
    head.load_state_dict(reference.state_dict())
    head.half()
    states = torch.randn(4, 5, 8)
    padding = torch.zeros(4, 5, dtype=torch.bool)
    padding[1, 3:] = True
    image = torch.randn(4, 7, 12) * 100  # features beyond fp16's comfortable range once summed
    loss = head(states.half(), padding, image.half())
    loss.backward()
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    assert all(p.dtype == torch.float16 and p.grad is not None and torch.isfinite(p.grad).all() for p in head.parameters())
    rounded = ImaginationHead(encoder_dim=8, hidden_dim=16, image_dim=12, margin=0.5)
    rounded.load_state_dict({k: v.float() for k, v in head.state_dict().items()})
    expected = rounded(states.half().float(), padding, image.half().float())
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-5)
