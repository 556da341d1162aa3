"""Criterion ``context_discounted_cross_entropy``: the discounted target-context loss of focused
concatenation (Lupo et al., 2022)."""
import math
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

import torch
from fairseq import metrics, utils
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
    label_smoothed_nll_loss,
)
from torch import Tensor

from fairseq_ctx.core.decoder_output import decoder_output


@dataclass
class ContextDiscountedCrossEntropyConfig(LabelSmoothedCrossEntropyCriterionConfig):
    context_discount: float = field(
        default=0.01,
        metadata={"help": "weight of the loss on the target context (the decoder's prefix of previous target "
                  "sentences) beside the current sentence's; 0 = the current sentence only. Lupo et al. (2022) "
                  "train with 0.01"},
    )


@register_criterion("context_discounted_cross_entropy", dataclass=ContextDiscountedCrossEntropyConfig)
class ContextDiscountedCrossEntropy(LabelSmoothedCrossEntropyCriterion):
    """Focused concatenation's objective (Lupo et al., 2022, "Focused Concatenation for
    Context-Aware Neural Machine Translation", WMT): L = L_current + CD · L_context, both label
    smoothed cross-entropies summed over tokens, where L_context is the loss of predicting the
    target context — each next token of the decoder's prefix of previous target sentences
    (``extra["prefix_tokens"]``/``["prefix_states"]`` of the ctx_concat decoder with
    --target-context-size > 0) — and CD = --context-discount. The gradient and the sample size
    are the current sentence's as in fairseq's criterion; ``nll_loss``/``ppl`` are the current
    sentence's alone and ``context_loss`` the context's per context token. Log-probabilities are
    computed in float32 (fairseq's ``get_normalized_probs``) under fp16/bf16."""

    def __init__(self, task, sentence_avg, label_smoothing, ignore_prefix_size=0, report_accuracy=False,
                 context_discount=0.01):
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        if context_discount < 0:
            raise ValueError(f"--context-discount must be >= 0, got {context_discount}")
        self.context_discount = context_discount

    def forward(self, model, sample, reduce=True):
        net_output = model(**sample["net_input"])
        loss, nll_loss = self.compute_loss(model, net_output, sample, reduce=reduce)
        context_loss, context_tokens = self.context_loss(model, net_output, reduce)
        sample_size = sample["target"].size(0) if self.sentence_avg else sample["ntokens"]
        logging_output = {
            "loss": (loss + self.context_discount * context_loss).data,
            "nll_loss": nll_loss.data,
            "context_loss": context_loss.data,
            "context_ntokens": context_tokens,
            "ntokens": sample["ntokens"],
            "nsentences": sample["target"].size(0),
            "sample_size": sample_size,
        }
        if self.report_accuracy:
            n_correct, total = self.compute_accuracy(model, net_output, sample)
            logging_output["n_correct"], logging_output["total"] = utils.item(n_correct.data), utils.item(total.data)
        return loss + self.context_discount * context_loss, sample_size, logging_output

    def context_loss(self, model, net_output: Tuple[Tensor, Dict[str, List[Tensor]]], reduce: bool) -> Tuple[Tensor, Tensor]:
        """The label-smoothed loss of predicting each prefix token from the ones before it, and
        the number of tokens predicted (a tensor: no host sync)."""
        extra = net_output[1]
        if "prefix_states" not in extra:
            raise ValueError(
                "--criterion context_discounted_cross_entropy: the model gave no target-context prefix to predict; "
                "use --arch focused_concat or ctx_concat with --target-context-size > 0")
        prefix, states = extra["prefix_tokens"][0], extra["prefix_states"][0]
        decoder = model.decoder
        features, _ = decoder_output(decoder, states, None, None)
        lprobs = model.get_normalized_probs((decoder.output_layer(features), None), log_probs=True)
        target = torch.cat([prefix[:, 1:], prefix.new_full((prefix.size(0), 1), self.padding_idx)], dim=1)
        loss, _ = label_smoothed_nll_loss(lprobs.view(-1, lprobs.size(-1)), target.reshape(-1), self.eps,
                                          ignore_index=self.padding_idx, reduce=reduce)
        return loss, target.ne(self.padding_idx).sum().data

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        context_tokens = utils.item(sum(log.get("context_ntokens", 0) for log in logging_outputs))
        if context_tokens > 0:
            context_loss = utils.item(sum(log.get("context_loss", 0) for log in logging_outputs))
            metrics.log_scalar("context_loss", context_loss / context_tokens / math.log(2), context_tokens, round=3)
