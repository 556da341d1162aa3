"""Prepared GPU calls: each is one command for one GPU that runs a real-data recipe's whole grid
and writes the same results files as the recipe does on the CPU (it is the recipe, run with
``--device cuda`` and the grid's models, seeds and jobs).

    python -m examples.gpu_calls scat-grid --scat-dir SCAT --multi30k-dir MULTI30K_RAW --work W --results R
    python -m examples.gpu_calls multi30k-grid --multi30k-tok TOK --seed 1 --work W --results R

``scat-grid``: SCAT (Lopes et al., 2020; Yin et al., 2021) stage 1 (the sentence-level
Transformer-tiny on Multi30k en-fr and the SCAT sentences) and stage 2's five models (the no-context
control, hmce, hce, ctx_concat, hmce with target context; Yun, 2022) × seeds 1, 2, 3, five jobs
sharing the GPU (examples/context_mt/scat_en_fr.py).

``multi30k-grid``: the Multi30k recipe at the published 8000 updates (Libovický, 2019, §5.2):
text-only and the four multi-source Transformers with French (serial, parallel, flat,
hierarchical), one seed per call (run it for 1, 2 and 3; the recipe's ``--seeds`` layout keeps each
seed in ``WORK/seed<N>/``); after training, the call writes the results of seeds 1, 2 and 3 side by
side (the recipe's ``--report-only``, which lists a seed not trained yet with its command;
examples/multimodal_mt/multi30k_multisource.py).

Each call is sized to end within 10 minutes on one H200 (an estimate from the CPU timings and the
models' size; each results file records the measured wall time). A call that is stopped resumes
with the same command: every recipe skips what is finished and resumes a run from its checkpoint.

``--dry-run`` runs the same grid on the CPU with a few updates per run and tiny models, so that a
wrong path, option or results file is found before any GPU time is spent
(tests/recipes/test_gpu_calls.py runs it on generated data in the recipes' layouts).
"""
import argparse
import shlex
import subprocess
import sys
from typing import Dict, List, Optional, Sequence

RECIPES = {"scat-grid": "examples.context_mt.scat_en_fr", "multi30k-grid": "examples.multimodal_mt.multi30k_multisource"}
SCAT_MODELS = ["sentence_scat", "hmce", "hce", "ctx_concat", "hmce_target"]
MULTI30K_MODELS = "text-only,serial,parallel,flat,hierarchical"
GPU_JOBS = 5  # runs sharing the one GPU: Transformer-tiny leaves most of it idle
# The dry run: the grid's shape with budgets of a few updates and 16-dimensional models.
DRY_SCAT = ["--sentence-updates", "8", "--update-freq", "1", "--average-last", "2", "--validate-every", "1",
            "--context-updates", "1", "--context-batch-size", "8", "--embed-dim", "16", "--ffn-dim", "32", "--layers",
            "1", "--heads", "2", "--spm-vocab", "60", "--beam", "1", "--max-tokens", "2000", "--log-interval", "1",
            "--precision", "fp32"]
DRY_MULTI30K = ["--average-last", "0", "--clip-norm", "1", "--spm-vocab", "60", "--max-update", "40", "--batch-size",
                "50", "--warmup-updates", "5", "--lr", "1e-2", "--validate-every", "20", "--embed-dim", "32",
                "--ffn-dim", "64", "--layers", "1", "--heads", "2", "--beam", "2", "--workers", "1",
                "--precision", "fp32"]  # enough updates that every model's validation translates something


def device_args(dry_run: bool) -> List[str]:
    """The GPU and its jobs, or (dry run) the CPU with one job per core of a 2-core machine."""
    return ["--device", "cpu", "--jobs", "2", "--threads", "1"] if dry_run else \
        ["--device", "cuda", "--jobs", str(GPU_JOBS), "--threads", "1"]


def scat_grid(args: argparse.Namespace) -> List[str]:
    """The SCAT recipe's arguments for stage 1 and stage 2's five models × 3 seeds."""
    return ["--scat-dir", args.scat_dir, "--multi30k-dir", args.multi30k_dir, "--work", args.work, "--results",
            args.results, "--seeds", "1,2,3", "--models", *SCAT_MODELS, *device_args(args.dry_run),
            *(DRY_SCAT if args.dry_run else [])]


def multi30k_grid(args: argparse.Namespace) -> List[str]:
    """The Multi30k recipe's arguments for one seed of text-only and the four multi-source models with
    French at the published 8000 updates."""
    return [args.multi30k_tok, "--work", args.work, "--results", args.results, "--seeds", str(args.seed),
            "--models", MULTI30K_MODELS, "--pairs", "fr", *device_args(args.dry_run),
            *(DRY_MULTI30K if args.dry_run else ["--max-update", "8000"])]


GRIDS = {"scat-grid": scat_grid, "multi30k-grid": multi30k_grid}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("call", choices=sorted(GRIDS), help="which prepared call")
    parser.add_argument("--scat-dir", help="scat-grid: SCAT's data directory (highlighted.{train,valid,test}.*)")
    parser.add_argument("--multi30k-dir", help="scat-grid: Multi30k's raw en-fr directory (see the SCAT recipe)")
    parser.add_argument("--multi30k-tok", help="multi30k-grid: Multi30k's data/task1/tok directory")
    parser.add_argument("--seed", type=int, default=1, help="multi30k-grid: the seed of this call (run 1, 2 and 3)")
    parser.add_argument("--work", required=True, help="the recipe's work directory (kept: a new call resumes it)")
    parser.add_argument("--results", required=True, help="directory of the results files")
    parser.add_argument("--dry-run", action="store_true",
                        help="the same grid on the CPU, a few updates per run and tiny models")
    parser.add_argument("--print", action="store_true", help="print the recipe commands the call runs, run nothing")
    return parser


def recipe_commands(argv: Optional[Sequence[str]] = None) -> List[List[str]]:
    """The command lines of the call ``argv`` asks for, run one after the other."""
    parser = build_parser()
    args = parser.parse_args(argv)
    needed: Dict[str, List[str]] = {"scat-grid": ["scat_dir", "multi30k_dir"], "multi30k-grid": ["multi30k_tok"]}
    missing = [f"--{name.replace('_', '-')}" for name in needed[args.call] if getattr(args, name) is None]
    if missing:
        parser.error(f"{args.call} needs {' and '.join(missing)}")
    command = [sys.executable, "-m", RECIPES[args.call], *GRIDS[args.call](args)]
    if args.call != "multi30k-grid":
        return [command]
    every_seed = list(command)
    every_seed[every_seed.index("--seeds") + 1] = "1,2,3"
    return [command, [*every_seed, "--report-only"]]


def main(argv: Optional[Sequence[str]] = None) -> None:
    show_only = build_parser().parse_args(argv).print
    for command in recipe_commands(argv):
        print("$ " + shlex.join(command), flush=True)
        status = 0 if show_only else subprocess.run(command).returncode
        if status:
            sys.exit(status)


if __name__ == "__main__":
    main()
