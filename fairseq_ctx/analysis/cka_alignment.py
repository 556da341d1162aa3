"""``--criterion cka_alignment``: label-smoothed CE − λ·CKA(A, B) (Yun 2022, eq. 5.4)."""
from dataclasses import dataclass, field

from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
)
from fairseq.dataclass import ChoiceEnum

from fairseq_ctx.analysis.cka import cka, hsic_min_rows, sample_paired_rows
from fairseq_ctx.analysis.representations import representation_adapter, select
from fairseq_ctx.analysis.model_hooks import ModelHooks
from fairseq_ctx.core.term_metrics import log_cross_entropy, log_skippable_terms, skippable_term


@dataclass
class CkaAlignmentConfig(LabelSmoothedCrossEntropyCriterionConfig):
    cka_lambda: float = field(default=0.1, metadata={"help": "λ of L = L_ce − λ·CKA(A, B) (thesis: 0.1 TVQA+, 0.2 TVQA)"})
    cka_representations: str = field(
        default="source,context",
        metadata={"help": "the two representation names A,B the model exposes (hce/hmce: source,context; "
                  "any transformer: encoder_embedding, encoder_out, decoder_out); an unknown name is an "
                  "error listing the available ones"},
    )
    cka_samples: int = field(
        default=256,
        metadata={"help": "n vectors sampled per batch from A (non-padding), each paired with a random "
                  "non-padding vector of B in the same example; fewer available → all, warned once"},
    )
    cka_kernel: ChoiceEnum(["linear", "rbf"]) = field(default="linear", metadata={"help": "kernel (thesis: linear)"})
    cka_unbiased: bool = field(default=False, metadata={"help": "unbiased HSIC estimator (Song et al. 2012)"})
    cka_rbf_bandwidth: float = field(default=1.0, metadata={"help": "RBF σ as a fraction of the median pairwise distance"})
    cka_warmup_updates: int = field(
        default=0,
        metadata={"help": "first K training batches optimise −λ·CKA only (CE logged, not optimised); "
                  "K counts batches, i.e. updates when --update-freq is 1"},
    )


@register_criterion("cka_alignment", dataclass=CkaAlignmentConfig)
class CkaAlignmentCriterion(LabelSmoothedCrossEntropyCriterion):
    """Label-smoothed cross-entropy minus λ·CKA between two named representations (eq. 5.4).

    The CKA value of each batch is logged as ``cka`` (mean over batches weighted by sample size).
    A batch with fewer than 2 (unbiased: 4) pairs of vectors — e.g. no example has context —
    trains on the cross-entropy alone and is counted in ``cka_skipped``.
    """

    def __init__(self, task, sentence_avg, label_smoothing, cka_lambda, cka_representations, cka_samples,
                 cka_kernel, cka_unbiased, cka_rbf_bandwidth, cka_warmup_updates,
                 ignore_prefix_size=0, report_accuracy=False):
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        names = [n.strip() for n in cka_representations.split(",") if n.strip()]
        if len(names) != 2:
            raise ValueError(f"--cka-representations needs exactly two comma-separated names, got {cka_representations!r}")
        if cka_samples < 4:
            raise ValueError(f"--cka-samples must be at least 4, got {cka_samples}")
        self.names = names
        self.cka_lambda = cka_lambda
        self.samples = cka_samples
        self.kernel = str(cka_kernel)
        self.unbiased = cka_unbiased
        self.bandwidth = cka_rbf_bandwidth
        self.warmup = cka_warmup_updates
        self.train_batches = 0
        self.hooks = ModelHooks(lambda model: representation_adapter(model))

    def forward(self, model, sample, reduce=True):
        adapter = self.hooks.for_model(model)
        net_output = model(**sample["net_input"])
        ce, nll = self.compute_loss(model, net_output, sample, reduce=reduce)
        sample_size = sample["target"].size(0) if self.sentence_avg else sample["ntokens"]
        representations = adapter.collect(sample)
        a, b = (select(representations, name) for name in self.names)
        x, y = sample_paired_rows(a.states, a.padding_mask, b.states, b.padding_mask, self.samples,
                                  what=f"{self.names[0]}/{self.names[1]}")
        alignment = None
        if x.size(0) >= hsic_min_rows(self.unbiased):
            alignment = cka(x, y, kernel=self.kernel, unbiased=self.unbiased, rbf_bandwidth=self.bandwidth)
        warming_up = model.training and self.train_batches < self.warmup
        if model.training:
            self.train_batches += 1
        loss = ce * 0.0 if warming_up else ce
        if alignment is not None:
            loss = loss - (self.cka_lambda * alignment * sample_size).to(ce.dtype)
        logging_output = {
            "loss": loss.data, "ce_loss": ce.data, "nll_loss": nll.data,
            "ntokens": sample["ntokens"], "nsentences": sample["target"].size(0), "sample_size": sample_size,
            **skippable_term("cka", alignment, sample_size, int(alignment is None)),
        }
        if self.report_accuracy:
            n_correct, total = self.compute_accuracy(model, net_output, sample)
            logging_output["n_correct"], logging_output["total"] = n_correct.item(), total.item()
        return loss, sample_size, logging_output

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        log_cross_entropy(logging_outputs)
        log_skippable_terms(logging_outputs, ["cka"], round_to=4)
