"""How much context the gated context models of the SCAT recipe let through, on SCAT test.

For each ``--model NAME=CHECKPOINT`` (dat, hce or hmce: a model with the gated sum of Yun (2022),
eq. 3.8) every SCAT test sentence with context is encoded with it, and the gate is read
(``fairseq_ctx.context.context_gate``): the mean weight 1 − g the context's side receives, and the
share of the output vector's length it makes; mean and range over the sentences, by where SCAT's
annotators found the pronoun's antecedent (``support``: the context, the sentence itself, ...).

Usage (from the repository root; checkpoints of ``scat_en_fr.py``):

    python -m examples.context_mt.scat_gate --scat-dir contextual-mt/data/scat \\
        --model hmce.seed1=work/scat/seed1/models/hmce/checkpoints/checkpoint_last.pt \\
        --spm work/scat/spm/spm.model --data work/scat/data-bin/scat --results examples/context_mt/results/scat_gate

Writes ``scat_gate.{md,json}`` into ``--results``.
"""
import argparse
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from devtools.recipe_report import facts_lines
from devtools.recipe_tools import write_json, write_whole
from devtools.results_file import script_command
from examples.context_mt.ctxpro_en_fr import model_spec

SCRIPT = "examples/context_mt/scat_gate.py"
STEM = "scat_gate"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scat_gate.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scat-dir", required=True, help="SCAT's data folder (highlighted.test.*)")
    parser.add_argument("--model", dest="models", type=model_spec, action="append", required=True,
                        metavar="NAME=CHECKPOINT", help="a gated context model (dat, hce, hmce); repeat for more")
    parser.add_argument("--spm", help="the sentencepiece model of the checkpoints' data (none: the text as it is)")
    parser.add_argument("--data", required=True, help="a directory with the checkpoints' dictionaries")
    parser.add_argument("--results", required=True, help="directory for scat_gate.{md,json}")
    return parser


def summary(values: Sequence[float]) -> Dict[str, float]:
    return {"mean": statistics.mean(values), "min": min(values), "max": max(values), "sentences": len(values)}


def read_model(name: str, checkpoint: str, examples, args: argparse.Namespace) -> Dict[str, Dict]:
    """The gate's readings of one model: over all sentences with context and by ``support``."""
    from fairseq_ctx.context import hub
    from fairseq_ctx.context.context_gate import context_gate_readings

    translator = hub.load(checkpoint, spm_model=args.spm, data=args.data, beam=1)
    groups: Dict[str, List] = defaultdict(list)
    for example, reading in zip(examples, context_gate_readings(translator, examples)):
        if reading is not None:
            groups["all"].append(reading)
            groups[f"support: {example.labels.get('support', '?')}"].append(reading)
    print(f"== {name}: {len(groups['all'])} sentences with context", flush=True)
    return {group: {"gate": summary([r.gate for r in readings]),
                    "contribution": summary([r.contribution for r in readings])}
            for group, readings in sorted(groups.items())}


def markdown(record: Dict, argv: Optional[Sequence[str]]) -> str:
    lines = ["# The context gate of the SCAT models on SCAT test", "",
             *facts_lines(script_command(SCRIPT, argv), "float32 (encoding)",
                          f"models: {', '.join(f'{n} = `{c}`' for n, c in record['checkpoints'].items())}"), "",
             "Per sentence with context: gate = mean over its tokens and channels of 1 − g, the weight the gated sum "
             "(Yun 2022, eq. 3.8) gives the context's side; contribution = mean over its tokens of "
             "‖(1 − g) ⊙ h_ctx‖ / ‖output‖. Mean [min, max] over the sentences.", "",
             "| model | sentences | gate 1 − g | contribution |", "|---|---|---|---|"]
    for name, groups in record["models"].items():
        for group, reading in groups.items():
            gate, share = reading["gate"], reading["contribution"]
            lines.append(f"| {name} ({group}) | {gate['sentences']} | {gate['mean']:.5f} [{gate['min']:.5f}, "
                         f"{gate['max']:.5f}] | {share['mean']:.4f} [{share['min']:.4f}, {share['max']:.4f}] |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = build_parser().parse_args(argv)
    from fairseq_ctx.context.contrastive.formats import read_set

    examples, _ = read_set("scat", [str(Path(args.scat_dir) / "highlighted.test")])
    record = {"checkpoints": dict(args.models),
              "models": {name: read_model(name, checkpoint, examples, args) for name, checkpoint in args.models}}
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    write_json(results / f"{STEM}.json", record)
    write_whole(results / f"{STEM}.md", markdown(record, argv))
    print(f"== results: {results / STEM}.md")


if __name__ == "__main__":
    main()
