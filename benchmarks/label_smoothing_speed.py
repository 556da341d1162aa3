"""Training-step time of ``--criterion fused_label_smoothed_cross_entropy`` against fairseq's
``label_smoothed_cross_entropy``, in the same run: forward, loss and backward of the Multi30k
recipe's Transformer-tiny (4+4 layers, dim 128, FFN 256, 4 heads, shared embeddings) on a batch of
its size (420 sentences of 17 pieces, 8,000 words), float32 and bfloat16 autocast (``--amp`` on
the CPU), steps interleaved so that both criteria see the same machine load. Prints each median
and the ratio stock / fused (above 1: the fused criterion is faster).

    python -m benchmarks.label_smoothing_speed --threads 1 --steps 10
"""
import argparse
import statistics
import time
from typing import Dict, List

import torch

from fairseq_ctx.core.mixed_precision import native_bfloat16


def build(vocabulary: int, dim: int = 128, ffn: int = 256, layers: int = 4, heads: int = 4, dropout: float = 0.3):
    """A fairseq Transformer with shared embeddings over a dictionary of ``vocabulary`` words (the
    recipe's Transformer-tiny by default), and the dictionary."""
    from fairseq.data import Dictionary
    from fairseq.models.transformer import TransformerModel, base_architecture

    dictionary = Dictionary()
    for index in range(vocabulary - len(dictionary)):
        dictionary.add_symbol(f"w{index}")
    args = argparse.Namespace(share_all_embeddings=True, dropout=dropout, max_source_positions=256,
                              max_target_positions=256)
    for side in ("encoder", "decoder"):
        for name, value in (("embed_dim", dim), ("ffn_embed_dim", ffn), ("layers", layers), ("attention_heads", heads)):
            setattr(args, f"{side}_{name}", value)
    base_architecture(args)

    class Dictionaries:
        source_dictionary = target_dictionary = dictionary

    return TransformerModel.build_model(args, Dictionaries()), dictionary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per criterion and precision")
    parser.add_argument("--sentences", type=int, default=420, help="sentences per batch")
    parser.add_argument("--length", type=int, default=17, help="pieces per sentence (source and target)")
    parser.add_argument("--vocabulary", type=int, default=8000, help="words of the shared dictionary")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    import fairseq_ctx
    fairseq_ctx.register()
    from fairseq.criterions.label_smoothed_cross_entropy import LabelSmoothedCrossEntropyCriterion

    from fairseq_ctx.core.fused_label_smoothing import FusedLabelSmoothedCrossEntropyCriterion

    torch.manual_seed(0)
    model, dictionary = build(args.vocabulary)
    model.train()
    tokens = torch.randint(dictionary.nspecial, len(dictionary), (args.sentences, args.length))
    previous = torch.cat([torch.full((args.sentences, 1), dictionary.eos()), tokens[:, :-1]], dim=1)
    sample = {"net_input": {"src_tokens": tokens, "src_lengths": torch.full((args.sentences,), args.length),
                            "prev_output_tokens": previous}, "target": tokens, "ntokens": tokens.numel()}

    class Task:
        target_dictionary = dictionary

    criteria = {name: kind(Task(), sentence_avg=False, label_smoothing=0.1)
                for name, kind in (("stock", LabelSmoothedCrossEntropyCriterion),
                                   ("fused", FusedLabelSmoothedCrossEntropyCriterion))}
    print(f"{args.threads} thread(s); batch {args.sentences} x {args.length}, {args.vocabulary} words; "
          f"native bfloat16: {native_bfloat16()}")
    for precision in ("fp32", "amp"):
        times: Dict[str, List[float]] = {name: [] for name in criteria}
        for step in range(args.steps + 1):
            for name, criterion in criteria.items():
                model.zero_grad()
                start = time.perf_counter()
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "amp"):
                    loss, _, _ = criterion(model, sample)
                loss.backward()
                if step:  # the first step of each warms up
                    times[name].append(time.perf_counter() - start)
        stock, fused = (statistics.median(times[name]) for name in ("stock", "fused"))
        print(f"{precision}: stock {stock:.3f} s, fused {fused:.3f} s per step; stock / fused = {stock / fused:.2f}")


if __name__ == "__main__":
    main()
