"""Criterion ``distance_constraint``: translation loss plus the cT-MDE / cNV embedding distance
constraint (Li 2021, eq. 4.18–4.21 and eq. 3.6–3.8; SPEC §5)."""
from dataclasses import dataclass, field
from typing import Dict

import torch
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
)
from fairseq.dataclass import ChoiceEnum
from torch import Tensor
from fairseq_ctx.criterions.term_metrics import log_terms_per


@dataclass
class DistanceConstraintConfig(LabelSmoothedCrossEntropyCriterionConfig):
    distance_beta: float = field(default=0.25, metadata={"help": "β, weight of the distance terms (thesis: 0.25 "
                                                                 "for cT-MDE; cNV used 0.5)"})
    distance_lambda: float = field(default=1.0, metadata={"help": "λ, weight of the mean margin term δ"})
    distance_margin: float = field(default=0.5, metadata={"help": "α, the margin (cT-MDE 0.5; cNV used 2·sqrt(d))"})
    distance_negatives: int = field(default=40, metadata={"help": "N_s negatives per sentence: other target "
                                                                  "sentences of the batch, capped at B-1"})
    distance_epsilon: float = field(default=1e-6, metadata={"help": "ε added to v_norm (eq. 4.18-4.19)"})
    distance_variant: ChoiceEnum(["mde", "cnv"]) = field(
        default="mde",
        metadata={"help": "mde: eq. 4.18-4.21 (l = β(d_p + λ/N Σ δ) + 0.5 l_mt); cnv: eq. 3.6-3.8 "
                  "(l = β Σ_j max(0, α + α k_j/(2 v_norm + 1)) + (1-β)(l_mt a→b + l_mt b→a))"},
    )


def sample_negatives(batch_size: int, count: int, device) -> Tensor:
    """(B, count) indices; row i holds ``count`` distinct indices ≠ i, drawn uniformly."""
    scores = torch.rand(batch_size, batch_size, device=device)
    scores.fill_diagonal_(2.0)
    return scores.argsort(dim=1)[:, :count]


def mde_distance_terms(p_a: Tensor, p_b: Tensor, negatives: Tensor, margin: float, eps: float) -> Dict[str, Tensor]:
    """Eq. 4.18–4.20 in float32. p_a, p_b: (B, d) embeddings of the two sides; negatives: (B, N)
    rows of p_b. v_norm = mean Euclidean distance of the positive pairs."""
    p_a, p_b = p_a.float(), p_b.float()
    v_norm = (p_a - p_b).norm(dim=-1).mean()
    d_p = (p_a - p_b).pow(2).sum(-1) / (v_norm + eps)
    d_n = (p_a.unsqueeze(1) - p_b[negatives]).pow(2).sum(-1) / (v_norm + eps)
    delta = torch.relu(margin - (d_n - d_p.unsqueeze(1)))
    return {"d_p": d_p, "delta": delta, "v_norm": v_norm}


def cnv_distance_terms(p_a: Tensor, p_b: Tensor, negatives: Tensor, margin: float) -> Dict[str, Tensor]:
    """Eq. 3.6–3.7 in float32: l_dj = max(0, α + α k_j / (2 v_norm + 1)),
    k_j = ‖P_a − P_b‖² − ‖P_a − P_bj‖²."""
    p_a, p_b = p_a.float(), p_b.float()
    v_norm = (p_a - p_b).norm(dim=-1).mean()
    d_p = (p_a - p_b).pow(2).sum(-1)
    k = d_p.unsqueeze(1) - (p_a.unsqueeze(1) - p_b[negatives]).pow(2).sum(-1)
    delta = torch.relu(margin + margin * k / (2 * v_norm + 1))
    return {"d_p": d_p, "delta": delta, "v_norm": v_norm}


@register_criterion("distance_constraint", dataclass=DistanceConstraintConfig)
class DistanceConstraintCriterion(LabelSmoothedCrossEntropyCriterion):
    """Label-smoothed translation loss + distance constraint between the embeddings of a
    sentence and its translation (cT-MDE, eq. 4.21), for any model with ``embed()``.

    Reduction: fairseq divides the summed loss by the number of target tokens, so l_mt is
    the token-averaged cross entropy and the distance terms are averaged over sentences
    (they are scaled by ntokens / B before the division).
    """

    def __init__(self, task, sentence_avg, label_smoothing, ignore_prefix_size=0, report_accuracy=False,
                 distance_beta=0.25, distance_lambda=1.0, distance_margin=0.5, distance_negatives=40,
                 distance_epsilon=1e-6, distance_variant="mde"):
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        if distance_negatives < 0:
            raise ValueError(f"--distance-negatives must be >= 0, got {distance_negatives}")
        self.beta = distance_beta
        self.lam = distance_lambda
        self.margin = distance_margin
        self.negatives = distance_negatives
        self.eps = distance_epsilon
        self.variant = str(distance_variant)

    def forward(self, model, sample, reduce: bool = True):
        net_output = model(**sample["net_input"])
        mt_loss, nll_loss = self.compute_loss(model, net_output, sample, reduce=reduce)
        batch_size = sample["target"].size(0)
        ntokens = sample["ntokens"]
        p_a = net_output[1]["sentence_embedding"]
        negatives = sample_negatives(batch_size, min(self.negatives, batch_size - 1), p_a.device)
        if self.variant == "cnv":
            reverse = sample["reverse"]
            reverse_output = model(prev_output_tokens=reverse["prev_output_tokens"], **sample["target_input"])
            reverse_loss, _ = self.compute_loss(model, reverse_output, {"target": reverse["target"]}, reduce=reduce)
            terms = cnv_distance_terms(p_a, reverse_output[1]["sentence_embedding"], negatives, self.margin)
            per_sentence = terms["delta"].sum(dim=1)
            loss = (1 - self.beta) * (mt_loss + reverse_loss) + self.beta * (ntokens / batch_size) * per_sentence.sum()
        else:
            p_b = model.embed(**sample["target_input"])
            terms = mde_distance_terms(p_a, p_b, negatives, self.margin, self.eps)
            mean_delta = terms["delta"].mean(dim=1) if negatives.size(1) > 0 else terms["d_p"].new_zeros(batch_size)
            per_sentence = terms["d_p"] + self.lam * mean_delta
            loss = 0.5 * mt_loss + self.beta * (ntokens / batch_size) * per_sentence.sum()
        sample_size = batch_size if self.sentence_avg else ntokens
        delta_mean = terms["delta"].mean(dim=1).sum() if negatives.size(1) > 0 else 0.0
        logging_output = {
            "loss": loss.data,
            "nll_loss": nll_loss.data,
            "ntokens": ntokens,
            "nsentences": batch_size,
            "sample_size": sample_size,
            "d_p": terms["d_p"].sum().data,
            "delta": delta_mean.data if torch.is_tensor(delta_mean) else delta_mean,
            "v_norm": terms["v_norm"].data * batch_size,
        }
        return loss, sample_size, logging_output

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        log_terms_per(logging_outputs, ["d_p", "delta", "v_norm"], "nsentences", round_to=4)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True

