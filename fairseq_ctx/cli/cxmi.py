"""``fairseq-ctx-cxmi``: conditional cross-mutual information (Fernandes et al. 2021).

CXMI(C → Y | X) is estimated with one model: for every sentence of a binarized split,
log p(y | x, C) with its context minus log p(y | x) with the context masked (all context
slots empty, the model's document-initial behaviour), each the sum of the reference's token
log-probabilities (natural log). Reported: the corpus CXMI (mean over sentences), the same
per target token, and with ``--per-sentence FILE`` one line per sentence
``id<TAB>cxmi<TAB>logp_with_context<TAB>logp_masked<TAB>target_tokens``. A model trained with
``--context-size 0`` gets exactly 0. Positive values: the context makes the references more likely.

Example:
    fairseq-ctx-cxmi checkpoints/hmce --data data-bin --gen-subset test --per-sentence cxmi.tsv
"""
import argparse
import json
from typing import Dict, List

import torch
from fairseq import utils

from fairseq_ctx.cli.tool_args import add_model_args, load_translator, model_inputs, refuse_overwriting


def mask_context(sample: Dict) -> Dict:
    """The same batch with every context slot empty (no change for sentence-level batches)."""
    net_input = dict(sample["net_input"])
    if "context_index" in net_input:
        net_input["context_index"] = torch.full_like(net_input["context_index"], -1)
        net_input["context_tokens"] = net_input["context_tokens"][:0]
    return {**sample, "net_input": net_input}


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
    for sample in iterator:
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


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(parser)
    parser.add_argument("--gen-subset", default="test", help="binarized split to score (with its docids)")
    parser.add_argument("--per-sentence", help="write per-sentence values (TSV) to this file")
    parser.add_argument("--json", help="also write the corpus values to this JSON file")
    args = parser.parse_args(argv)
    refuse_overwriting(parser, {"--per-sentence": args.per_sentence, "--json": args.json},
                       model_inputs(args, args.gen_subset))
    result = cxmi(load_translator(args), args.gen_subset, args.batch_size)
    print(f"CXMI = {result['cxmi']:.4f} nats per sentence, {result['cxmi_per_token']:.5f} per target token "
          f"({result['sentences']} sentences)")
    if args.per_sentence:
        with open(args.per_sentence, "w", encoding="utf-8") as handle:
            for row in result["per_sentence"]:
                handle.write("\t".join(str(v) for v in row) + "\n")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({k: v for k, v in result.items() if k != "per_sentence"}, handle, indent=2)


if __name__ == "__main__":
    main()
