"""``--criterion head_diversity``: label-smoothed CE plus the inter-head diversity controls of
Yun 2022 §4.3 — the one place where all three live, for any model with fairseq
MultiheadAttention (our archs and the stock ``transformer``):

- ``--drophead γ``: drop whole heads in training (forward hooks, :class:`DropHead`);
- ``--hsic-lambda``: + λ_hsic · mean over the selected attention modules of the mean pairwise
  linear HSIC between their heads' outputs (eq. 4.7), on sampled non-padding query positions;
- ``--ortho-lambda``: + λ_ortho · mean over the selected modules of σ_max(V_allᵀV_all − I)
  (SRIP, eq. 4.8), V_all = sampled value vectors (rows: non-padding key positions, columns: the
  H·d_head value dimensions of all heads), each column scaled to unit norm.

Each term is logged unweighted (``hsic``, ``ortho``) next to ``ce_loss``; all default to off.
A module with too few non-padding positions in a batch is left out of that batch's mean (HSIC
needs two positions, SRIP one; e.g. the sentence pooling of a one-sentence batch): the count is
logged as ``hsic_skipped`` / ``ortho_skipped``, and a batch where every module is left out
trains on the cross-entropy alone.
"""
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import torch
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
)
from torch import Tensor

from fairseq_ctx.analysis.model_hooks import ModelHooks
from fairseq_ctx.analysis.attention_heads import DropHead, HeadTap
from fairseq_ctx.analysis.cka import hsic_min_rows, mean_pairwise_linear_hsic, sample_rows, srip
from fairseq_ctx.core.term_metrics import log_cross_entropy, log_skippable_terms, skippable_term


@dataclass
class HeadDiversityConfig(LabelSmoothedCrossEntropyCriterionConfig):
    drophead: float = field(default=0.0, metadata={"help": "probability γ of dropping a head (per example) in "
                                                          "training, kept heads rescaled by 1/(1−γ); thesis 0.1"})
    hsic_lambda: float = field(default=0.0, metadata={"help": "λ_hsic of the HSIC regularizer (eq. 4.7); thesis 1e-7"})
    ortho_lambda: float = field(default=0.0, metadata={"help": "λ_ortho of the SRIP orthogonality term (eq. 4.8); "
                                                              "thesis 1.0"})
    diversity_modules: str = field(
        default="*",
        metadata={"help": "comma-separated glob patterns of attention module names the controls apply to, "
                  "e.g. 'encoder.layers.*.self_attn' (default: every MultiheadAttention)"},
    )
    diversity_samples: int = field(default=256, metadata={"help": "positions sampled per module for HSIC/SRIP"})
    ortho_power_iterations: int = field(default=5, metadata={"help": "power iterations for the spectral norm"})


class _Hooks:
    def __init__(self, model, patterns: List[str], drophead: float, tap_heads: bool, tap_values: bool):
        self.tap: Optional[HeadTap] = HeadTap(model, patterns, capture_values=tap_values) if (tap_heads or tap_values) else None
        self.drop: Optional[DropHead] = DropHead(model, drophead, patterns) if drophead > 0 else None

    def remove(self) -> None:
        for hooks in (self.drop, self.tap):
            if hooks is not None:
                hooks.remove()


@register_criterion("head_diversity", dataclass=HeadDiversityConfig)
class HeadDiversityCriterion(LabelSmoothedCrossEntropyCriterion):
    """Label-smoothed CE + λ_hsic·L_hsic (eq. 4.7) + λ_ortho·L_ortho (eq. 4.8), with drophead."""

    def __init__(self, task, sentence_avg, label_smoothing, drophead, hsic_lambda, ortho_lambda,
                 diversity_modules, diversity_samples, ortho_power_iterations,
                 ignore_prefix_size=0, report_accuracy=False):
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        if diversity_samples < 2:
            raise ValueError(f"--diversity-samples must be at least 2, got {diversity_samples}")
        self.hsic_lambda, self.ortho_lambda = hsic_lambda, ortho_lambda
        self.samples, self.iterations = diversity_samples, ortho_power_iterations
        patterns = [p.strip() for p in diversity_modules.split(",") if p.strip()]
        self.hooks = ModelHooks(lambda model: _Hooks(model, patterns, drophead, hsic_lambda > 0, ortho_lambda > 0))

    def hsic_term(self, tap: HeadTap) -> Tuple[Optional[Tensor], int]:
        """Mean over the tapped modules of their heads' mean pairwise HSIC (None if no module
        has two non-padding positions) and the number of modules left out for having fewer."""
        values, skipped = [], 0
        for name, record in tap.records.items():
            t, b, h, d = record.heads.shape
            rows = sample_rows(record.heads.transpose(0, 1).reshape(b, t, h * d), record.query_padding_mask,
                               self.samples, what=f"heads of {name}")
            if rows.size(0) < hsic_min_rows():
                skipped += 1
                continue
            values.append(mean_pairwise_linear_hsic(rows.view(-1, h, d)))
        return (torch.stack(values).mean() if values else None), skipped

    def ortho_term(self, tap: HeadTap) -> Tuple[Optional[Tensor], int]:
        """Mean over the tapped modules of SRIP on their value vectors (None if no module has a
        non-padding key position) and the number of modules left out for having none."""
        values, skipped = [], 0
        for name, record in tap.records.items():
            if record.values is None:
                continue
            rows = sample_rows(record.values.transpose(0, 1), record.key_padding_mask, self.samples,
                               what=f"values of {name}").float()
            if rows.size(0) == 0:
                skipped += 1
                continue
            columns = rows / rows.norm(dim=0, keepdim=True).clamp_min(torch.finfo(rows.dtype).tiny)
            values.append(srip(columns, self.iterations))
        return (torch.stack(values).mean() if values else None), skipped

    def forward(self, model, sample, reduce=True):
        hooks = self.hooks.for_model(model)
        net_input = sample["net_input"]
        if hooks.tap is not None:
            pad = self.padding_idx
            hooks.tap.reset(net_input["src_tokens"].eq(pad), net_input["prev_output_tokens"].eq(pad))
        net_output = model(**net_input)
        ce, nll = self.compute_loss(model, net_output, sample, reduce=reduce)
        sample_size = sample["target"].size(0) if self.sentence_avg else sample["ntokens"]
        loss = ce
        logging_output = {"ce_loss": ce.data, "nll_loss": nll.data, "ntokens": sample["ntokens"],
                          "nsentences": sample["target"].size(0), "sample_size": sample_size}
        terms = (("hsic", self.hsic_lambda, self.hsic_term), ("ortho", self.ortho_lambda, self.ortho_term))
        for name, weight, term in terms:
            if weight > 0:
                value, skipped = term(hooks.tap)
                if value is not None:
                    loss = loss + (weight * value * sample_size).to(loss.dtype)
                logging_output.update(skippable_term(name, value, sample_size, skipped))
        logging_output["loss"] = loss.data
        if self.report_accuracy:
            n_correct, total = self.compute_accuracy(model, net_output, sample)
            logging_output["n_correct"], logging_output["total"] = n_correct.item(), total.item()
        return loss, sample_size, logging_output

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        log_cross_entropy(logging_outputs)
        log_skippable_terms(logging_outputs, ["hsic", "ortho"], round_to=6)
