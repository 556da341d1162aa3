"""Criterion ``imagination``: label-smoothed cross-entropy + the imagination auxiliary loss
(Libovický 2019, §5.3.2, eq. 5.17–5.18)."""
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from fairseq import metrics
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
)
from torch import Tensor, nn

from fairseq_ctx.core.float32_statistics import without_autocast
from fairseq_ctx.multisource.data.feature_file import FeatureInputError


SUPPORTED_ARCHS = ("hierarchical_attention_decoder", "hierarchical_attention_decoder_big", "multisource_rnn")


@dataclass
class ImaginationCriterionConfig(LabelSmoothedCrossEntropyCriterionConfig):
    imagination_input: str = field(
        default="img", metadata={"help": "dense input to predict (list it in --auxiliary-loss-inputs)"})
    imagination_weight: float = field(default=1.0, metadata={"help": "weight of L_img added to the MT loss"})
    imagination_margin: float = field(default=0.1, metadata={"help": "margin α of the hinge loss (eq. 5.18)"})
    imagination_hidden_dim: int = field(default=512, metadata={"help": "size of the hidden layer W1 (eq. 5.17)"})


class ImaginationHead(nn.Module):
    """ŷ = W2 ReLU(W1 Σ_j h_j + b1) + b2 (eq. 5.17) and
    L_img = Σ_b max(0, α + d(ŷ_b, y_b) − d(ŷ_b, y_c)) with cosine distance d and y_c the
    next image in the batch (eq. 5.18). Computed in float32."""

    def __init__(self, encoder_dim: int, hidden_dim: int, image_dim: int, margin: float):
        super().__init__()
        self.predict = nn.Sequential(nn.Linear(encoder_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, image_dim))
        self.margin = margin

    @without_autocast
    def predict_float32(self, summed: Tensor) -> Tensor:
        """The MLP of eq. 5.17 in float32 whatever the dtype of its parameters (half under
        fairseq's --fp16), without converting the module: gradients reach the parameters in
        their own dtype."""
        hidden, output = self.predict[0], self.predict[2]
        hidden_state = F.relu(F.linear(summed, hidden.weight.float(), hidden.bias.float()))
        return F.linear(hidden_state, output.weight.float(), output.bias.float())

    def forward(self, states: Tensor, padding_mask: Tensor, image: Tensor) -> Tensor:
        """states (B, S, C), padding_mask (B, S), image (B, d) or (B, R, d)."""
        summed = states.float().masked_fill(padding_mask.unsqueeze(-1), 0.0).sum(1)
        predicted = self.predict_float32(summed)
        target = image.float().mean(1) if image.dim() == 3 else image.float()
        contrast = target.roll(1, dims=0)
        distance = 1 - F.cosine_similarity(predicted, target, dim=-1)
        contrast_distance = 1 - F.cosine_similarity(predicted, contrast, dim=-1)
        return torch.clamp(self.margin + distance - contrast_distance, min=0).sum()


@register_criterion("imagination", dataclass=ImaginationCriterionConfig)
class ImaginationCriterion(LabelSmoothedCrossEntropyCriterion):
    """Multi-task MT + imagination: image features are needed at training time only; the model
    itself is text-only (``--arch hierarchical_attention_decoder`` or ``multisource_rnn`` without
    --feature-inputs). The head reads the source sentence's encoder states (Transformer states,
    or the RNN's BiGRU states of size 2H)."""

    def __init__(self, task, sentence_avg, label_smoothing, ignore_prefix_size=0, report_accuracy=False,
                 imagination_input="img", imagination_weight=1.0, imagination_margin=0.1, imagination_hidden_dim=512):
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        loss_inputs = (getattr(task.cfg, "auxiliary_loss_inputs", "") or "").split(",")
        if imagination_input not in loss_inputs:
            raise FeatureInputError(
                f"--criterion imagination predicts '{imagination_input}': use --task multimodal_translation "
                f"--auxiliary-loss-inputs {imagination_input} (file {{split}}.{imagination_input}.npy)"
            )
        if getattr(task, "source_state_dim", None) is None:
            raise ValueError(
                f"--criterion imagination reads the encoder's source states, which --arch "
                f"{getattr(task, 'model_arch', None) or '?'} does not expose; supported: {', '.join(SUPPORTED_ARCHS)} "
                f"(with --task multimodal_translation)"
            )
        self.imagination_input = imagination_input
        self.imagination_weight = imagination_weight
        self.head = ImaginationHead(task.source_state_dim, imagination_hidden_dim,
                                    task.feature_dim(imagination_input), imagination_margin)

    def forward(self, model, sample, reduce=True):
        net_input = sample["net_input"]
        encoder_out = model.encoder(net_input["src_tokens"], src_lengths=net_input["src_lengths"],
                                    aux_inputs=net_input.get("aux_inputs"))
        net_output = model.decoder(net_input["prev_output_tokens"], encoder_out=encoder_out,
                                   src_lengths=net_input["src_lengths"])
        loss, nll_loss = self.compute_loss(model, net_output, sample, reduce=reduce)
        states, padding_mask = model.encoder.source_states(encoder_out)
        image_loss = self.head(states, padding_mask, net_input["aux_inputs"][self.imagination_input])
        loss = loss + self.imagination_weight * image_loss
        sample_size = sample["target"].size(0) if self.sentence_avg else sample["ntokens"]
        logging_output = {
            "loss": loss.data, "nll_loss": nll_loss.data, "imagination_loss": image_loss.data,
            "ntokens": sample["ntokens"], "nsentences": sample["target"].size(0), "sample_size": sample_size,
        }
        return loss, sample_size, logging_output

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        total = sum(log.get("imagination_loss", 0) for log in logging_outputs)
        sentences = sum(log.get("nsentences", 0) for log in logging_outputs)
        metrics.log_scalar("imagination_loss", total / max(sentences, 1), sentences, round=4)
