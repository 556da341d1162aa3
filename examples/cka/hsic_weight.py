"""How much the HSIC regularizer (Yun, 2022, eq. 4.7) weighs against the cross-entropy on a trained
model, before spending a training run on a value of ``--hsic-lambda``.

    python -m examples.cka.hsic_weight CHECKPOINT DATA [--batches 10] [--lambdas 1e-7,1e-3,1e-2]

On the first ``--batches`` validation batches (fairseq's batch order, ``--max-tokens``), in eval
mode (no dropout: both gradients come from the same forward pass), with the heads tapped exactly as
``--criterion head_diversity`` taps them (every attention module, ``--diversity-samples`` sampled
positions): the cross-entropy per target token (the label-smoothed loss that fairseq's update
divides by the target tokens), the unweighted HSIC term, and the global norms of the gradients of
both with respect to every parameter. ``--criterion head_diversity`` minimises CE/token +
λ·HSIC, so for each λ the table gives λ·HSIC / (CE/token), the gradient share λ·|∇HSIC| / |∇CE|
and the largest such share of one parameter tensor (Adam scales each parameter's step by its own
gradient history), all linear in λ. Printed as a table, and written to ``hsic_weight.{md,json}`` with
``--results``.
"""
import argparse
import statistics
import time
from typing import Dict, List, Optional, Sequence

import torch
from fairseq import checkpoint_utils

from devtools.machine_facts import this_machine, utc_now
from devtools.results_file import results_page, script_command, write_results

from fairseq_ctx.analysis.head_diversity import HeadDiversityCriterion


def parse_cli(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="hsic_weight.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", help="a trained model's checkpoint")
    parser.add_argument("data", help="its binarized data directory (the validation split is read)")
    parser.add_argument("--batches", type=int, default=10, help="validation batches measured")
    parser.add_argument("--max-tokens", type=int, default=2000, help="tokens per batch")
    parser.add_argument("--diversity-samples", type=int, default=256, help="as --criterion head_diversity")
    parser.add_argument("--lambdas", default="1e-7,1e-3,1e-2", help="comma-separated λ_hsic to tabulate")
    parser.add_argument("--label-smoothing", type=float, default=0.1, help="of the cross-entropy")
    parser.add_argument("--results", help="directory for hsic_weight.{md,json}")
    return parser.parse_args(argv)


def gradients(loss: torch.Tensor, parameters: List[torch.nn.Parameter]) -> List[torch.Tensor]:
    """The gradient of ``loss`` for each parameter (zeros where it does not reach)."""
    grads = torch.autograd.grad(loss, parameters, retain_graph=True, allow_unused=True)
    return [torch.zeros_like(p, dtype=torch.float) if g is None else g.float() for g, p in zip(grads, parameters)]


def norm(tensors: List[torch.Tensor]) -> float:
    return float(torch.sqrt(sum((t ** 2).sum() for t in tensors)))


def measure_batch(model, criterion: HeadDiversityCriterion, sample: dict) -> Dict[str, object]:
    """CE per target token, the unweighted HSIC term, their global gradient norms, and the parameter
    tensor where the HSIC gradient is largest against the CE's (Adam scales each parameter's step
    by its own gradient history, so that ratio is the largest relative change of a step)."""
    hooks = criterion.hooks.for_model(model)
    net_input = sample["net_input"]
    pad = criterion.padding_idx
    hooks.tap.reset(net_input["src_tokens"].eq(pad), net_input["prev_output_tokens"].eq(pad))
    ce, _ = criterion.compute_loss(model, model(**net_input), sample)
    ce_per_token = ce / sample["ntokens"]
    hsic, _ = criterion.hsic_term(hooks.tap)
    names, parameters = zip(*[(n, p) for n, p in model.named_parameters() if p.requires_grad])
    ce_grads, hsic_grads = gradients(ce_per_token, list(parameters)), gradients(hsic, list(parameters))
    ratios = {name: float(h.norm() / c.norm()) for name, c, h in zip(names, ce_grads, hsic_grads) if c.norm() > 0}
    largest = max(ratios, key=ratios.get)
    return {"ce_per_token": float(ce_per_token), "hsic": float(hsic), "ce_gradient": norm(ce_grads),
            "hsic_gradient": norm(hsic_grads), "largest_tensor": largest, "largest_tensor_share": ratios[largest]}


def measure(args: argparse.Namespace) -> List[Dict[str, float]]:
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([args.checkpoint],
                                                                    arg_overrides={"data": args.data})
    model = models[0].eval()
    task.load_dataset("valid")
    criterion = HeadDiversityCriterion(task, False, args.label_smoothing, 0.0, 1.0, 0.0, "*", args.diversity_samples, 5)
    torch.manual_seed(1)
    batches = task.get_batch_iterator(task.dataset("valid"), max_tokens=args.max_tokens, seed=1).next_epoch_itr(
        shuffle=False)
    return [measure_batch(model, criterion, sample) for _, sample in zip(range(args.batches), batches)]


def table(rows: Sequence[Dict[str, object]], lambdas: Sequence[float]) -> List[str]:
    ce = statistics.mean(r["ce_per_token"] for r in rows)
    hsic = statistics.mean(r["hsic"] for r in rows)
    share = statistics.mean(r["hsic_gradient"] / r["ce_gradient"] for r in rows)
    largest = max(rows, key=lambda r: r["largest_tensor_share"])
    lines = [f"Mean over {len(rows)} batches: CE per target token {ce:.3f}, HSIC (unweighted) {hsic:.3f}, "
             f"|∇HSIC| / |∇(CE/token)| {share:.3g}; per parameter tensor at most {largest['largest_tensor_share']:.3g} "
             f"({largest['largest_tensor']}).", "",
             "| λ_hsic | λ·HSIC / (CE/token) | gradient share λ·\\|∇HSIC\\| / \\|∇(CE/token)\\| "
             "| largest share of one parameter tensor |", "|---|---|---|---|"]
    lines += [f"| {value:g} | {value * hsic / ce:.3g} | {value * share:.3g} | "
              f"{value * largest['largest_tensor_share']:.3g} |" for value in lambdas]
    return lines


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_cli(argv)
    lambdas = [float(value) for value in args.lambdas.split(",")]
    start = time.time()
    rows = measure(args)
    header = {"date": utc_now(), "machine": this_machine().describe(), "checkpoint": args.checkpoint,
              "batches": f"the first {len(rows)} validation batches of --max-tokens {args.max_tokens}, eval mode",
              "precision": "float32", "seed": "1 (the positions sampled per module)",
              "wall time": f"{time.time() - start:.0f} s",
              "command": script_command("examples/cka/hsic_weight.py", argv)}
    page = results_page("Weight of the HSIC regularizer against the cross-entropy", header, table(rows, lambdas))
    print(page)
    write_results(args.results, "hsic_weight", page, {**header, "batches": rows})


if __name__ == "__main__":
    main()
