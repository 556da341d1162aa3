"""Conditional cross-mutual information CXMI(C → Y | X) (Fernandes et al. 2021), estimated with one
model: for every sentence of a binarized split, log p(y | x, C) with its context minus
log p(y | x) with the context masked (all context slots empty, the model's document-initial
behaviour), each the sum of the reference's token log-probabilities (natural log). A model
trained with ``--context-size 0`` gets exactly 0. For a model reading target context
(``--target-context-size`` > 0) the context C is the previous source sentences and the previous
*reference* target sentences, as Fernandes et al. (2021) define it, and masking empties both."""
from typing import Dict, List

import torch
from fairseq import utils

from fairseq_ctx.context.data.context_batch import ContextInputs
from fairseq_ctx.core.progress import progress


def mask_context(sample: Dict) -> Dict:
    """The same batch with every source and target context slot empty (no change for
    sentence-level batches)."""
    net_input = sample["net_input"]
    return {**sample, "net_input": {**net_input, **ContextInputs.of(net_input).masked().net_input()}}


def sentence_log_probs(translator, sample: Dict) -> List[torch.Tensor]:
    hypos = translator.task.inference_step(translator.scorer, translator.models, sample)
    return [h[0]["positional_scores"].double().sum().cpu() for h in hypos]


@torch.no_grad()
def cxmi(translator, split: str = "test", batch_size: int = 32) -> Dict:
    task = translator.task
    task.load_dataset(split)
    iterator = task.get_batch_iterator(
        dataset=task.dataset(split), max_sentences=batch_size,
        max_positions=utils.resolve_max_positions(task.max_positions(), *[m.max_positions() for m in translator.models]),
        ignore_invalid_inputs=False,
    ).next_epoch_itr(shuffle=False)
    rows = []
    for sample in progress(iterator, total=len(iterator), desc="cxmi", unit="batch"):
        if translator.device.type == "cuda":
            sample = utils.move_to_cuda(sample)
        with_context = sentence_log_probs(translator, sample)
        masked = sentence_log_probs(translator, mask_context(sample))
        lengths = sample["target"].ne(task.target_dictionary.pad()).sum(dim=1).tolist()
        for sent_id, a, b, n in zip(sample["id"].tolist(), with_context, masked, lengths):
            rows.append((sent_id, float(a - b), float(a), float(b), int(n)))
    rows.sort()
    total_tokens = sum(r[4] for r in rows)
    return {
        "cxmi": sum(r[1] for r in rows) / len(rows),
        "cxmi_per_token": sum(r[1] for r in rows) / total_tokens,
        "sentences": len(rows),
        "target_tokens": total_tokens,
        "per_sentence": rows,
    }
