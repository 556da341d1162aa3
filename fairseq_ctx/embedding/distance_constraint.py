"""Criterion ``distance_constraint``: translation loss plus the cT-MDE / cNV embedding distance
constraint (Li 2021, eq. 4.18–4.21 and eq. 3.6–3.8)."""
import logging
from dataclasses import dataclass, field
from typing import Dict

import torch
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
)
from fairseq import metrics
from fairseq.dataclass import ChoiceEnum
from torch import Tensor
from fairseq_ctx.core.float32_statistics import without_autocast
from fairseq_ctx.core.term_metrics import log_terms_per

logger = logging.getLogger(__name__)


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
    distance_normalizer: ChoiceEnum(["parallel", "all-pairs"]) = field(
        default="all-pairs",
        metadata={"help": "v_norm of eq. 4.18-4.19. parallel: mean Euclidean distance ‖P^(a)-P^(b)‖ of the batch's "
                  "parallel pairs (d_p then scales linearly with the embeddings, so shrinking them all lowers "
                  "the loss); all-pairs: mean squared distance |·|² over every (a_i, b_j) pair of the batch, "
                  "the numerator's own distance, which makes d_p and δ scale-invariant"},
    )
    distance_reduction: ChoiceEnum(["sentence", "token"]) = field(
        default="sentence",
        metadata={"help": "sentence: eq. 4.21 per sentence, l_mt^{a→b} = the sentence's summed token loss "
                  "(fairseq sums, then divides the batch by its token count); token: the distance terms are "
                  "weighted as if l_mt were the token-averaged loss (× tokens per sentence)"},
    )
    distance_start_update: int = field(
        default=0,
        metadata={"help": "train plain T-MDE (l = l_mt, no target pass) before this update, eq. 4.21 after it "
                  "(the thesis' §4.5.1 adaptation: T-MDE first, then cT-MDE on top; 0 = from the start)"},
    )
    distance_detach_target: bool = field(
        default=False,
        metadata={"help": "embed the targets under no_grad: P^(b) is a constant, so the constraint moves P^(a) "
                  "only and the target pass costs a forward alone (a deviation; eq. 4.18-4.21 back-propagate "
                  "through both sides, the default; mde variant). Only one side of each pair then moves, so "
                  "pass twice the --distance-beta of the full form (0.5 for the thesis' 0.25) for the same pull "
                  "on the pair"},
    )


def sample_negatives(batch_size: int, count: int, device) -> Tensor:
    """(B, count) indices; row i holds ``count`` distinct indices ≠ i, drawn uniformly."""
    scores = torch.rand(batch_size, batch_size, device=device)
    scores.fill_diagonal_(2.0)
    return scores.topk(count, dim=1, largest=False).indices


def pairwise_squared_distances(p_a: Tensor, p_b: Tensor) -> Tensor:
    """(B, B) ‖p_a[i] − p_b[j]‖² as ‖a‖² + ‖b‖² − 2 a·b (one matmul: cheaper forward and backward
    than gathering (B, N, d) differences; equal to them within float32 rounding)."""
    gram = p_a @ p_b.t()
    return (p_a.pow(2).sum(-1, keepdim=True) + p_b.pow(2).sum(-1) - 2 * gram).clamp_min(0.0)


@without_autocast
def mde_distance_terms(p_a: Tensor, p_b: Tensor, negatives: Tensor, margin: float, eps: float,
                       normalizer: str = "all-pairs") -> Dict[str, Tensor]:
    """Eq. 4.18–4.20 in float32. p_a, p_b: (B, d) embeddings of the two sides; negatives: (B, N)
    rows of p_b. v_norm: mean Euclidean distance of the parallel pairs (``parallel``) or mean
    squared distance of all (a_i, b_j) pairs (``all-pairs``)."""
    p_a, p_b = p_a.float(), p_b.float()
    squared = pairwise_squared_distances(p_a, p_b)
    if normalizer == "all-pairs":
        v_norm = squared.mean()
    else:
        v_norm = (p_a - p_b).norm(dim=-1).mean()
    d_p = (p_a - p_b).pow(2).sum(-1) / (v_norm + eps)
    d_n = squared.gather(1, negatives) / (v_norm + eps)
    delta = torch.relu(margin - (d_n - d_p.unsqueeze(1)))
    return {"d_p": d_p, "delta": delta, "v_norm": v_norm}


@without_autocast
def cnv_distance_terms(p_a: Tensor, p_b: Tensor, negatives: Tensor, margin: float) -> Dict[str, Tensor]:
    """Eq. 3.6–3.7 in float32: l_dj = max(0, α + α k_j / (2 v_norm + 1)),
    k_j = ‖P_a − P_b‖² − ‖P_a − P_bj‖²."""
    p_a, p_b = p_a.float(), p_b.float()
    v_norm = (p_a - p_b).norm(dim=-1).mean()
    d_p = (p_a - p_b).pow(2).sum(-1)
    k = d_p.unsqueeze(1) - pairwise_squared_distances(p_a, p_b).gather(1, negatives)
    delta = torch.relu(margin + margin * k / (2 * v_norm + 1))
    return {"d_p": d_p, "delta": delta, "v_norm": v_norm}


@register_criterion("distance_constraint", dataclass=DistanceConstraintConfig)
class DistanceConstraintCriterion(LabelSmoothedCrossEntropyCriterion):
    """Label-smoothed translation loss + distance constraint between the embeddings of a
    sentence and its translation (cT-MDE, eq. 4.21), for any model with ``embed()``.

    Reduction: fairseq divides the batch's summed loss by its number of target tokens. With
    ``--distance-reduction sentence`` (default) eq. 4.21 is summed over sentences as written,
    l_mt^{a→b} being the sentence's summed token loss; ``token`` scales the distance terms by
    tokens per sentence, i.e. weighs them against the token-averaged l_mt.
    ``--distance-start-update`` and ``--distance-detach-target`` are documented deviations.
    """

    def __init__(self, task, sentence_avg, label_smoothing, ignore_prefix_size=0, report_accuracy=False,
                 distance_beta=0.25, distance_lambda=1.0, distance_margin=0.5, distance_negatives=40,
                 distance_epsilon=1e-6, distance_variant="mde", distance_normalizer="all-pairs",
                 distance_reduction="sentence", distance_start_update=0, distance_detach_target=False):
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        if distance_negatives < 0:
            raise ValueError(f"--distance-negatives must be >= 0, got {distance_negatives}")
        self.beta = distance_beta
        self.lam = distance_lambda
        self.margin = distance_margin
        self.negatives = distance_negatives
        self.eps = distance_epsilon
        self.variant = str(distance_variant)
        self.normalizer = str(distance_normalizer)
        self.reduction = str(distance_reduction)
        self.start_update = distance_start_update
        self.detach_target = distance_detach_target
        self.num_updates = 0
        self.warned_no_negatives = False

    def set_num_updates(self, num_updates: int) -> None:
        """Called by the multilingual_embedding task before every training step."""
        self.num_updates = num_updates

    def _embed_targets(self, model, target_input: Dict[str, Tensor]) -> Tensor:
        if not self.detach_target:
            return model.embed(**target_input)
        with torch.no_grad():
            return model.embed(**target_input)

    def forward(self, model, sample, reduce: bool = True):
        if self.training and self.num_updates < self.start_update:
            return super().forward(model, sample, reduce=reduce)
        net_output = model(**sample["net_input"])
        mt_loss, nll_loss = self.compute_loss(model, net_output, sample, reduce=reduce)
        batch_size = sample["target"].size(0)
        ntokens = sample["ntokens"]
        distance_weight = ntokens / batch_size if self.reduction == "token" else 1.0
        p_a = net_output[1]["sentence_embedding"]
        negatives = sample_negatives(batch_size, min(self.negatives, batch_size - 1), p_a.device)
        no_negatives = int(self.negatives > 0 and batch_size < 2)
        if no_negatives and not self.warned_no_negatives:
            self.warned_no_negatives = True
            logger.warning(
                "distance_constraint: a batch of one sentence has no negatives (d_p = 1, delta = 0 with the "
                "all-pairs normaliser): its distance terms carry no signal. Use batches of several sentences "
                "(--max-tokens / --batch-size); the metric batches_without_negatives counts such batches"
            )
        if self.variant == "cnv":
            reverse = sample["reverse"]
            reverse_output = model(prev_output_tokens=reverse["prev_output_tokens"], **sample["target_input"])
            reverse_loss, _ = self.compute_loss(model, reverse_output, {"target": reverse["target"]}, reduce=reduce)
            terms = cnv_distance_terms(p_a, reverse_output[1]["sentence_embedding"], negatives, self.margin)
            per_sentence = terms["delta"].sum(dim=1)
            loss = (1 - self.beta) * (mt_loss + reverse_loss) + self.beta * distance_weight * per_sentence.sum()
        else:
            p_b = self._embed_targets(model, sample["target_input"])
            terms = mde_distance_terms(p_a, p_b, negatives, self.margin, self.eps, self.normalizer)
            mean_delta = terms["delta"].mean(dim=1) if negatives.size(1) > 0 else terms["d_p"].new_zeros(batch_size)
            per_sentence = terms["d_p"] + self.lam * mean_delta
            loss = 0.5 * mt_loss + self.beta * distance_weight * per_sentence.sum()
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
            "batches_without_negatives": no_negatives,
        }
        return loss, sample_size, logging_output

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        log_terms_per(logging_outputs, ["d_p", "delta", "v_norm"], "nsentences", round_to=4)
        metrics.log_scalar_sum("batches_without_negatives",
                               sum(log.get("batches_without_negatives", 0) for log in logging_outputs))

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True

