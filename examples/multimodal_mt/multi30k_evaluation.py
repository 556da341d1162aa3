"""Scores of the Multi30k recipes' models, computed from the plain-text hypotheses the recipes keep
next to their tables, read as sacreBLEU's command line reads them, so that

    sacrebleu REFERENCE -i HYPOTHESES -m bleu chrf --tokenize none -w 2

prints every BLEU, chrF, BP and length ratio of a table. Per model, seed and test set: BLEU, chrF,
the length ratio and BLEU without its brevity penalty; over seeds: mean ± sd and a system's
difference from a baseline with two tests of it; and the convergence section of the tables.
"""
import argparse
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from devtools.plateau_rule import AVERAGED_BLEU_PLATEAU, BLEU_PLATEAU, PlateauRule
from devtools.recipe_tools import write_whole
from devtools.seed_statistics import direction_verdict, mean_sd_text, paired_t_test, summary
from fairseq_ctx.core.scoring import load_translations, paired_bootstrap, sacrebleu_metrics
from examples.multimodal_mt.multi30k_data import TARGET
from examples.multimodal_mt.multi30k_runs import ModelRun, decoded_test_sets

SACREBLEU_COMMAND = "sacrebleu {reference} -i {hypotheses} -m bleu chrf --tokenize none -w 2"
BOOTSTRAP_COMMAND = "sacrebleu {reference} -i {baseline} {system} -m bleu chrf --tokenize none --paired-bs -f text"


def read_lines(path: Path) -> List[str]:
    """The lines of a file as sacreBLEU's command line reads them (split at '\\n', trailing blanks removed)."""
    with open(path, encoding="utf-8", newline="\n") as handle:
        return [line.rstrip() for line in handle]


def export_hypotheses(generate_output: Path, reference: str, out: Path) -> List[str]:
    """Write the detokenized hypotheses of a fairseq-generate output (its D- lines in sentence
    order, one per line; every sentence of ``reference`` must have one) to ``out``; returns them
    as read back from ``out``."""
    hypotheses, _, _ = load_translations(str(generate_output), ref=reference)
    write_whole(out, "".join(line + "\n" for line in hypotheses))
    return read_lines(out)


def test_scores(hypotheses: Sequence[str], references: Sequence[str]) -> Dict[str, object]:
    """sacreBLEU BLEU (``--tokenize none``) and chrF with their signatures, the brevity penalty,
    hypothesis and reference length (BLEU's tokens), their ratio, and BLEU without the brevity
    penalty (BLEU / BP: the geometric mean of the n-gram precisions)."""
    bleu, chrf = sacrebleu_metrics("none", references)
    bleu_score, chrf_score = bleu.corpus_score(list(hypotheses), None), chrf.corpus_score(list(hypotheses), None)
    return {"bleu": bleu_score.score, "chrf": chrf_score.score, "bp": bleu_score.bp,
            "sys_len": bleu_score.sys_len, "ref_len": bleu_score.ref_len,
            "ratio": bleu_score.sys_len / bleu_score.ref_len,
            "bleu_no_bp": bleu_score.score / bleu_score.bp if bleu_score.bp > 0 else 0.0,
            "bleu_signature": str(bleu.get_signature()), "chrf_signature": str(chrf.get_signature())}


def hypotheses_name(name: str, seed: int, stem: str, shuffled: bool = False) -> str:
    """Where the tables keep a run's hypotheses, relative to the tables' directory."""
    return f"hypotheses/{name}.seed{seed}.{stem}{'.shuffled' if shuffled else ''}.{TARGET}"


def run_scores(record: dict, stem: str, lines: Sequence[str], references: Sequence[str], name: str) -> dict:
    """A run's scores on test set ``stem`` from its hypotheses ``lines`` (kept as ``name``), with
    its validation curve, updates and wall times from its results ``record``."""
    return {**test_scores(lines, references), "hypotheses": name, "valid_bleu": record["valid_bleu"],
            "updates": record["updates"], "train_wall_s": record["train_wall_s"],
            "eval_wall_s": decoded_test_sets(record)[stem]["eval_wall_s"]}


def score_decoded(runs: Sequence[ModelRun], stem: str, reference: str, out_dir: Path
                  ) -> Tuple[Dict[str, Dict[int, dict]], Dict[str, Dict[int, List[str]]]]:
    """Scores ``{name: {seed: scores}}`` and hypotheses ``{name: {seed: lines}}`` of every run
    decoded on test set ``stem``, its hypotheses exported to ``out_dir/hypotheses``; the scores
    also carry the run's validation curve, updates and wall times, and, where the model was also
    decoded with its second source shuffled, that BLEU and chrF and the drop."""
    references = read_lines(Path(reference))
    scores: Dict[str, Dict[int, dict]] = {}
    hypotheses: Dict[str, Dict[int, List[str]]] = {}
    for model_run in runs:
        record = model_run.record()
        decoded = decoded_test_sets(record)
        if stem not in decoded:
            continue
        split = decoded[stem]["split"]
        name = hypotheses_name(model_run.name, model_run.seed, stem)
        lines = export_hypotheses(model_run.eval_dir / f"generate-{split}.txt", reference, out_dir / name)
        result = run_scores(record, stem, lines, references, name)
        shuffled = model_run.eval_dir / "shuffled" / f"generate-{split}.txt"
        if shuffled.exists():
            name = hypotheses_name(model_run.name, model_run.seed, stem, shuffled=True)
            attacked = test_scores(export_hypotheses(shuffled, reference, out_dir / name), references)
            result.update(bleu_shuffled=attacked["bleu"], chrf_shuffled=attacked["chrf"],
                          bleu_drop=result["bleu"] - attacked["bleu"], shuffled_hypotheses=name)
        scores.setdefault(model_run.name, {})[model_run.seed] = result
        hypotheses.setdefault(model_run.name, {})[model_run.seed] = lines
    return scores, hypotheses


def over_seeds(per_seed: Dict[int, dict]) -> Dict[str, object]:
    """The per-seed scores with their seeds and mean ± sd of each score every seed has."""
    result: Dict[str, object] = {"per_seed": per_seed, "seeds": sorted(per_seed)}
    for key in ("bleu", "chrf", "ratio", "bleu_no_bp", "bleu_shuffled", "bleu_drop"):
        if all(key in scores for scores in per_seed.values()):
            result[key] = summary([per_seed[seed][key] for seed in sorted(per_seed)])
    return result


def recompute_note(rows: Sequence[dict], stem: str, reference: str, baseline: str) -> List[str]:
    """Markdown under a table: the reference, the signatures, and the sacreBLEU commands that give
    its scores and bootstrap p-values back from the hypotheses files."""
    signatures = sorted({s[k] for row in rows for s in row["per_seed"].values() for k in ("bleu_signature", "chrf_signature")})
    name = Path(reference).name
    any_seed = lambda model: hypotheses_name(model, 1, stem).replace(".seed1.", ".seedN.")  # noqa: E731
    return [f"Reference: `{name}` of Multi30k task 1 (`data/task1/tok`). Signatures: "
            + "; ".join(f"`{s}`" for s in signatures) + ". Every score above is recomputed from the hypotheses "
            "files (in the table's directory) with", "",
            "    " + SACREBLEU_COMMAND.format(reference=f"DATA/{name}", hypotheses=any_seed("MODEL")), "",
            "(BLEU, chrF; BP, ratio and lengths in BLEU's `verbose_score`), and a bootstrap p of one seed with", "",
            "    " + BOOTSTRAP_COMMAND.format(reference=f"DATA/{name}", baseline=any_seed(baseline),
                                              system=any_seed("MODEL")), "",
            "(with several seeds: each model's files of those seeds concatenated in seed order, against the "
            "reference repeated as often)."]


def compare(baseline: Dict[int, dict], system: Dict[int, dict], baseline_hypotheses: Dict[int, List[str]],
            system_hypotheses: Dict[int, List[str]], references: Sequence[str]) -> Dict[str, object]:
    """A system's difference from the baseline over the seeds both have (per-seed scores keyed by
    seed): mean ± sd of the per-seed differences of BLEU, chrF and BLEU without BP; a paired
    t-test over seeds of each of the three (two or more seeds); the paired bootstrap
    over test sentences with the seeds' hypotheses pooled; and which of the two the verdict uses
    (the t-test when it exists: it measures seed-to-seed variation; one seed: the bootstrap)."""
    seeds = sorted(set(baseline) & set(system))
    if not seeds:
        return {"seeds": []}
    result: Dict[str, object] = {"seeds": seeds}
    for key in ("bleu", "chrf", "bleu_no_bp"):
        deltas = [system[s][key] - baseline[s][key] for s in seeds]
        result[f"delta_{key}"] = summary(deltas)
    for key in ("bleu", "chrf", "bleu_no_bp"):
        test = paired_t_test([system[s][key] for s in seeds], [baseline[s][key] for s in seeds])
        result[f"t_{key}"] = {"t": test.t, "p": test.p}
    pooled = paired_bootstrap([h for s in seeds for h in baseline_hypotheses[s]],
                              {"system": [h for s in seeds for h in system_hypotheses[s]]},
                              list(references) * len(seeds), tokenize="none")["system"]
    result["bootstrap"] = pooled
    p = result["t_bleu"]["p"] if len(seeds) > 1 else pooled["bleu_p"]
    result["test"] = f"paired t-test over {len(seeds)} seeds" if len(seeds) > 1 else "paired bootstrap (one seed)"
    result["verdict"] = direction_verdict(result["delta_bleu"]["mean"], p)
    result["verdict_p"] = p
    return result


def plateau_rule(settings: dict) -> PlateauRule:
    """The convergence rule of a run's validation curve: window means for the curve of averaged
    checkpoints (``average_last``), the best value for the greedy curve of the best-checkpoint protocol."""
    return AVERAGED_BLEU_PLATEAU if settings.get("average_last") else BLEU_PLATEAU


def protocol_text(args: argparse.Namespace) -> Tuple[str, str]:
    """The tested model and the validation curve of a run with ``args``, and its convergence rule, in words."""
    if args.average_last:
        every = f"{args.curve_every} epochs (the average of the {args.average_last} epoch checkpoints ending there)"
        return (f"the average of the last {args.average_last} epoch checkpoints is tested; validation BLEU "
                f"(beam {args.beam}) of such averages every {args.curve_every} epochs and at the last",
                AVERAGED_BLEU_PLATEAU.describe(every, args.max_update, stops=False))
    return (f"greedy validation BLEU every {args.validate_every} updates; the checkpoint of the best validation BLEU "
            f"is tested", BLEU_PLATEAU.describe(args.validate_every, args.max_update, stops=False))


def best_validation(curve: Sequence[Sequence[float]]) -> str:
    if not curve:
        return "n/a"
    updates, bleu = max(curve, key=lambda point: point[1])
    return f"{bleu:.2f} @ {int(updates)}"


def p_text(p: Optional[float]) -> str:
    return "—" if p is None else f"{p:.3f}"


def comparison_header(baseline: str, verdict: str) -> str:
    """Header cells matching :func:`comparison_cells`."""
    return (f"BLEU | chrF | Δ BLEU vs {baseline} | Δ chrF | p BLEU / chrF, t-test over seeds | "
            f"p BLEU / chrF, bootstrap (seeds pooled) | {verdict}")


def comparison_cells(row: dict, versus: Optional[dict]) -> str:
    """Table cells of a row's scores and its comparison with the baseline (``compare``): BLEU,
    chrF, Δ BLEU, Δ chrF, the t-test's and the pooled bootstrap's p of BLEU / chrF, the verdict;
    dashes where there is no common seed."""
    cells = [mean_sd_text(row["bleu"]), mean_sd_text(row["chrf"])]
    if not versus or not versus.get("seeds"):
        return " | ".join(cells + ["—"] * 5)
    return " | ".join(cells + [
        mean_sd_text(versus["delta_bleu"], sign=True), mean_sd_text(versus["delta_chrf"], sign=True),
        f"{p_text(versus['t_bleu']['p'])} / {p_text(versus['t_chrf']['p'])}",
        f"{p_text(versus['bootstrap']['bleu_p'])} / {p_text(versus['bootstrap']['chrf_p'])}", versus["verdict"]])


def convergence_rows(runs: Sequence[ModelRun], order: Callable[[dict], object]) -> List[dict]:
    """The convergence rule's outcome on every trained run's validation BLEU curve, sorted by ``order``."""
    rows = []
    for model_run in runs:
        record = model_run.record()
        rows.append({"name": model_run.name, "seed": model_run.seed, "strategy": model_run.model.strategy,
                     "second_source": model_run.model.extra, "updates": record["updates"],
                     "train_wall_s": record["train_wall_s"], "valid_bleu": record["valid_bleu"],
                     "plateau": plateau_rule(record["settings"]).judge(record["valid_bleu"]).as_dict()})
    return sorted(rows, key=order)


def convergence_lines(convergence: Sequence[dict], rule: str) -> List[str]:
    """The "Convergence" section: ``rule``, then its outcome on every run's validation curve."""
    lines = ["## Convergence", "", rule, "", "| model | seed | updates | best val BLEU @ update | "
             "last fifth against before |", "|---|---|---|---|---|"]
    return lines + [f"| {row['name']} | {row['seed']} | {row['updates']} | {best_validation(row['valid_bleu'])} | "
                    f"{row['plateau']['text']} |" for row in convergence]


def left_out_lines(left_out: Sequence[str]) -> List[str]:
    return ["", "Results files left out: " + ", ".join(left_out) + "."] if left_out else []
