"""Results of multi30k_heads.py: ``multi30k_heads.{json,md}``, with ``hypotheses/`` (the test
translations every BLEU and chrF is computed from) and the head × head CKA heatmaps of each
variant's first seed where matplotlib is installed. Per variant, mean ± sd over seeds of the
mean inter-head CKA and SVCCA and of test BLEU and chrF, each compared with the baseline; and
whether Yun (2022)'s directions held: Table 4.5, drophead raises and HSIC lowers inter-head
similarity; Table 4.4, neither costs BLEU."""
import json
import shutil
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Union

from devtools.recipe_report import unfinished_lines
from devtools.seed_statistics import (direction_verdict, mean_sd_text, no_cost_verdict, paired_t_test, power_note,
                                      summary)
from devtools.train_log import validation_curve
from examples.cka.heads_baseline import BASELINE
from examples.cka.heads_earlier import EarlierHeadsRun
from examples.multimodal_mt.multi30k_evaluation import (best_validation, compare, comparison_cells, comparison_header, convergence_lines,
                                 convergence_rows, left_out_lines, over_seeds, p_text, read_lines,
                                 recompute_note, score_decoded)
from examples.multimodal_mt.multi30k_earlier import EarlierResults, earlier_lines, score_earlier
from examples.multimodal_mt.multi30k_runs import ModelRun, RunTable

STEM = "multi30k_heads"
KINDS = ("encoder_self", "decoder_self", "encoder_decoder")
SIMILARITY = (("cka", "mean_cka"), ("svcca", "mean_svcca"))
EXPECTED_SIMILARITY = ("Yun (2022), Table 4.5: drophead raises inter-head similarity, the HSIC regularizer lowers it "
                       "(each against the baseline).")
EXPECTED_BLEU = "Yun (2022), Table 4.4: neither drophead nor HSIC costs BLEU (each against the baseline)."
ONE_SEED = ("sacreBLEU's paired bootstrap over the test sentences decides for BLEU, and the point estimate, marked "
            "untested, for inter-head similarity")


def expected_change(variant: str) -> Optional[str]:
    """``raises`` (drophead), ``lowers`` (HSIC) or None (the baseline)."""
    if variant.startswith("drophead"):
        return "raises"
    return "lowers" if variant.startswith("hsic") else None


def head_similarity(path: Path, tag: str) -> Dict[str, object]:
    """Mean over the attention modules of their mean inter-head CKA and SVCCA, overall and per
    module kind, from fairseq-ctx-analyze-heads' ``heads.json``, with each module's numbers."""
    modules = json.loads(path.read_text(encoding="utf-8"))[tag]
    result: Dict[str, object] = {"modules": {name: {"kind": m["kind"], "positions": m["positions"], "cka": m["mean_cka"],
                                                    "svcca": m["mean_svcca"]} for name, m in modules.items()}}
    for key, field in SIMILARITY:
        result[key] = sum(m[field] for m in modules.values()) / len(modules)
        for kind in KINDS:
            values = [m[field] for m in modules.values() if m["kind"] == kind]
            if values:
                result[f"{key}_{kind}"] = sum(values) / len(values)
    return result


def similarity_rows(runs: Sequence[ModelRun], heads_dir: Callable[[ModelRun], Path],
                    earlier: Sequence[EarlierHeadsRun] = ()) -> List[dict]:
    """One row per variant: head similarity per seed (of ``earlier`` runs: as recorded), mean ± sd
    over seeds, and for each of CKA and SVCCA the change against the baseline over their common
    seeds with the paired t-test and the verdict on Table 4.5's direction."""
    rows: Dict[str, dict] = {}
    for model_run in runs:
        row = rows.setdefault(model_run.name, {"name": model_run.name, "per_seed": {}})
        similarity = head_similarity(heads_dir(model_run) / "heads.json", model_run.name)
        hsic = validation_curve((model_run.eval_dir / "train.log").read_text(encoding="utf-8"), "hsic")
        row["per_seed"][model_run.seed] = {**similarity, "valid_hsic": hsic[-1][1] if hsic else None}
    for run in earlier:
        if run.similarity is not None:
            rows.setdefault(run.name, {"name": run.name, "per_seed": {}})["per_seed"][run.seed] = run.similarity
    base = rows.get(BASELINE)
    for row in rows.values():
        row["per_seed"] = dict(sorted(row["per_seed"].items()))
        seeds = list(row["per_seed"])
        row["seeds"] = seeds
        keys = [k for k in row["per_seed"][seeds[0]] if k not in ("modules", "valid_hsic")]
        for key in keys:
            row[key] = summary([row["per_seed"][s][key] for s in seeds])
        direction = expected_change(row["name"])
        if base is None or direction is None:
            continue
        common = sorted(set(seeds) & set(base["per_seed"]))
        for key, _ in SIMILARITY:
            if not common:
                continue
            test = paired_t_test([row["per_seed"][s][key] for s in common], [base["per_seed"][s][key] for s in common])
            delta = summary([row["per_seed"][s][key] - base["per_seed"][s][key] for s in common])
            sign = 1 if direction == "raises" else -1
            row[f"vs_baseline_{key}"] = {"seeds": common, "delta": delta, "t": test.t, "p": test.p,
                                         "expected": direction, "verdict": direction_verdict(sign * delta["mean"], test.p)}
    return [rows[name] for name in sorted(rows, key=lambda n: (n != BASELINE, n))]


def bleu_rows(runs: Sequence[ModelRun], stem: str, reference: str, out_dir: Path,
              earlier: Sequence[EarlierHeadsRun] = ()) -> List[dict]:
    """One row per variant decoded on ``stem``: test scores per seed (of ``earlier`` runs: from their
    kept hypotheses) and over seeds, the comparison with the baseline, and the verdict on Table
    4.4's direction."""
    references = read_lines(Path(reference))
    scores, hypotheses = score_decoded(runs, stem, reference, out_dir)
    score_earlier(earlier, stem, references, out_dir, scores, hypotheses)
    scores = {name: dict(sorted(per_seed.items())) for name, per_seed in scores.items()}
    rows = []
    for name in sorted(scores, key=lambda n: (n != BASELINE, n)):
        row = {"name": name, **over_seeds(scores[name])}
        if BASELINE in scores and name != BASELINE:
            versus = compare(scores[BASELINE], scores[name], hypotheses[BASELINE], hypotheses[name], references)
            if versus.get("seeds"):
                versus["verdict"] = no_cost_verdict(versus["delta_bleu"]["mean"], versus["verdict_p"])
            row["vs_baseline"] = versus
        rows.append(row)
    return rows


def similarity_section(rows: List[dict]) -> List[str]:
    lines = ["## Inter-head similarity", "",
             "| variant | seeds | mean inter-head CKA | Δ CKA vs baseline | p (t over seeds) | Table 4.5 direction | "
             "mean inter-head SVCCA | Δ SVCCA | p | Table 4.5 direction (SVCCA) | CKA encoder self | CKA decoder self | "
             "CKA encoder–decoder |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        cells = [row["name"], ",".join(map(str, row["seeds"]))]
        for key, _ in SIMILARITY:
            cells.append(mean_sd_text(row[key], digits=4))
            versus = row.get(f"vs_baseline_{key}")
            cells += (["—", "—", "—"] if versus is None else
                      [mean_sd_text(versus["delta"], sign=True, digits=4), p_text(versus["p"]),
                       f"{versus['verdict']} (expected: {versus['expected']})"])
        cells += [mean_sd_text(row[f"cka_{kind}"], digits=4) if f"cka_{kind}" in row else "—" for kind in KINDS]
        lines.append("| " + " | ".join(cells) + " |")
    judged = [(row["name"], row["vs_baseline_cka"]["verdict"]) for row in rows if "vs_baseline_cka" in row]
    statement = "; ".join(f"{name}: {verdict}" for name, verdict in judged) or "not judged (no baseline or no control)"
    lines += ["", f"{EXPECTED_SIMILARITY} By inter-head CKA: **{statement}.**", "",
              "Per seed (mean over modules; HSIC: the unweighted term at the last validation, as fairseq logs it, "
              "to compare λ·HSIC with the loss):", "",
              "| variant | seed | CKA | SVCCA | CKA encoder self | CKA decoder self | CKA encoder–decoder | HSIC |",
              "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        for seed, s in sorted(row["per_seed"].items()):
            kinds = " | ".join(f"{s[f'cka_{kind}']:.4f}" if f"cka_{kind}" in s else "—" for kind in KINDS)
            hsic = "—" if s["valid_hsic"] is None else f"{s['valid_hsic']:g}"
            lines.append(f"| {row['name']} | {seed} | {s['cka']:.4f} | {s['svcca']:.4f} | {kinds} | {hsic} |")
    return lines + [""]


def bleu_section(stem: str, rows: List[dict], reference: str, sentences: int) -> List[str]:
    lines = [f"## Test set {stem} ({sentences} sentences)", "",
             f"| variant | seeds | {comparison_header('baseline', 'Table 4.4 direction (no BLEU cost)')} | length ratio |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['name']} | {','.join(map(str, row['seeds']))} | "
                     f"{comparison_cells(row, row.get('vs_baseline'))} | {row['ratio']['mean']:.3f} |")
    judged = "; ".join(f"{row['name']}: {row['vs_baseline']['verdict']}" for row in rows
                       if row.get("vs_baseline", {}).get("seeds")) or "not judged (no baseline or no control)"
    lines += ["", f"{EXPECTED_BLEU} **{judged}.** (The verdict of \"costs nothing\"; p: the t-test over seeds, with "
              f"one seed the bootstrap.)", "", "Per seed:", "", "| variant | seed | BLEU | chrF | length ratio | BLEU without BP | "
              "best val BLEU (greedy) @ update | train min | hypotheses |", "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        for seed, s in sorted(row["per_seed"].items()):
            lines.append(f"| {row['name']} | {seed} | {s['bleu']:.2f} | {s['chrf']:.2f} | {s['ratio']:.3f} | "
                         f"{s['bleu_no_bp']:.2f} | {best_validation(s['valid_bleu'])} | {s['train_wall_s'] / 60:.1f} | "
                         f"{s['hypotheses']} |")
    return lines + ["", *recompute_note(rows, stem, reference, BASELINE), ""]


def adopted_baseline_lines(runs: Sequence[Union[ModelRun, EarlierHeadsRun]]) -> List[str]:
    """The paragraph naming the seeds whose baseline is the multi-source recipe's text-only run."""
    adopted = sorted((r.seed, r.record()["baseline_from"]) for r in runs
                     if r.name == BASELINE and "baseline_from" in r.record())
    if not adopted:
        return []
    seeds = [str(seed) for seed, _ in adopted]
    named = (f"The baseline of seed {seeds[0]} is" if len(seeds) == 1 else
             f"The baselines of seeds {', '.join(seeds[:-1])} and {seeds[-1]} are")
    return [named + " the multi-source recipe's text-only run of that seed (`--baseline-from`), not trained "
            "again: the same data, model, settings and seed, trained with `--criterion label_smoothed_cross_entropy --label-smoothing 0.1`, the loss "
            "head_diversity computes without a term (its training command is in the JSON file's runs). Results "
            "files: " + "; ".join(f"seed {seed}: {path}" for seed, path in adopted) + ".", ""]


def markdown(run: dict, similarity: List[dict], sections: Dict[str, List[dict]], references: Dict[str, str],
             table: RunTable, convergence: List[dict], reported: Sequence[Union[ModelRun, EarlierHeadsRun]],
             earlier: Optional[EarlierResults]) -> str:
    header, sentences, settings = run["header"], run["sentences"], run["settings"]
    lines = [
        "# Inter-head diversity controls on the Multi30k text-only Transformer (Yun, 2022, Tables 4.4 and 4.5)", "",
        *header.lines(),
        f"- Data: Multi30k task 1 (Elliott et al., 2016) en→de, lc.norm.tok files, {sentences['train']}/{sentences['val']} "
        "sentences (train / val); test sets: " + ", ".join(f"{s} ({sentences[s]})" for s in run["test_sets"]),
        f"- Settings (the same for every variant and seed): {json.dumps(settings)}", "",
        "Model and training: the text-only Transformer of examples/multimodal_mt/multi30k_multisource.py, trained "
        "with `--criterion head_diversity --label-smoothing 0.1` plus the variant's term: baseline none (the same "
        "training as label_smoothed_cross_entropy), `drophead<γ>`: `--drophead γ`, `hsic<λ>`: `--hsic-lambda λ` "
        "(every attention module).", "", *adopted_baseline_lines(reported), *earlier_lines(earlier, ", their head similarity is the one recorded there"),
        "Inter-head similarity: fairseq-ctx-analyze-heads on the best checkpoint (greedy validation BLEU), validation "
        "split, teacher-forced, eval mode: each head's output before the output projection at the non-padding query "
        f"positions of the first validation sentences in fairseq's length-sorted batch order (batches of "
        f"{run['analysis']['batch_size']}), up to {run['analysis']['max_positions']} positions per module: the same "
        "positions for every variant and seed. Per module the mean over head pairs of linear CKA and of SVCCA (99% "
        "variance); the table gives the mean over all attention modules, and CKA per module kind.", "",
        "Tests against the baseline: the paired t-test over seeds of the per-seed differences (each variant against "
        "the baseline of its own seeds: a variant with fewer seeds than the baseline is compared on those, while "
        "the baseline's row gives the mean over all its seeds); for BLEU and chrF "
        "also sacreBLEU's paired bootstrap over test sentences with the seeds' hypotheses pooled (1000 resamples, "
        "seed 12345), which treats the trained models as fixed. " + power_note(len(header.seeds)), ""]
    lines += similarity_section(similarity)
    for stem, rows in sections.items():
        lines += bleu_section(stem, rows, references[stem], sentences[stem])
    lines += [*convergence_lines(convergence, f"Rule: {header.convergence_rule}. Outcome: {header.convergence}."),
              *left_out_lines(table.left_out), "", *unfinished_lines(table.unfinished)]
    total = sum(r["train_wall_s"] for r in convergence)
    lines += ["", f"Wall time: {total / 60:.1f} min of training for {len(convergence)} run(s) (an interrupted training "
              f"counts each of its stretches, up to its last logged line); this invocation "
              f"{run['this_invocation_wall_s'] / 60:.1f} min.",
              "Heatmaps (head × head CKA per module, first seed of each variant): heads_<variant>.seed<N>.png."]
    return "\n".join(lines) + "\n"


def convergence_outcome(rows: List[dict]) -> str:
    """The convergence rule's outcome on the baseline's validation curve (its first seed), in words."""
    base = next((r for r in rows if r["name"] == BASELINE), None)
    return "not judged: the run has no baseline" if base is None else f"baseline (seed {base['seed']}): {base['plateau']['text']}"


def write_results(table: RunTable, out_dir: Path, run: dict, references: Dict[str, str],
                  heads_dir: Callable[[ModelRun], Path], earlier: Optional[EarlierResults] = None) -> List[Path]:
    """Write ``multi30k_heads.{json,md}``, ``hypotheses/`` and the heatmaps into ``out_dir``, with
    the runs of ``earlier`` next to those of ``table``; returns the paths of the tables."""
    out_dir.mkdir(parents=True, exist_ok=True)
    runs, kept = table.trained, [] if earlier is None else earlier.runs
    analysed = [r for r in runs if r.record().get("heads", {}).get("settings") == run["analysis"]]
    similarity = similarity_rows(analysed, heads_dir, kept)
    sections = {stem: bleu_rows(runs, stem, references[stem], out_dir, kept) for stem in run["test_sets"]}
    reported = [*runs, *kept]
    records = {(r.name, r.seed): r.record() for r in reported}
    convergence = convergence_rows(reported, lambda r: (r["name"] != BASELINE, r["name"], r["seed"]))
    header = run["header"]
    header.seeds = sorted({*header.seeds, *(r.seed for r in kept)})
    header.convergence = convergence_outcome(convergence)
    pictures = {**{(r.name, r.seed): r.picture for r in kept if r.similarity is not None},
                **{(r.name, r.seed): heads_dir(r) / f"heads_{r.name}.png" for r in analysed}}
    for name in {name for name, _ in pictures}:
        seed = min(seed for other, seed in pictures if other == name)
        if pictures[name, seed].exists():
            shutil.copyfile(pictures[name, seed], out_dir / f"heads_{name}.seed{seed}.png")
    paths = [out_dir / f"{STEM}.json", out_dir / f"{STEM}.md"]
    summary_json = {**header.as_dict(), **{k: v for k, v in run.items() if k != "header"},
                    "expected_similarity": EXPECTED_SIMILARITY, "expected_bleu": EXPECTED_BLEU, "similarity": similarity,
                    "test_sets": {stem: {"reference": Path(references[stem]).name, "variants": rows}
                                  for stem, rows in sections.items()},
                    "convergence_by_run": convergence,
                    "runs": {f"{name}/seed{seed}": record for (name, seed), record in records.items()},
                    **({"earlier_results": earlier.as_dict()} if kept else {}),
                    "unfinished": table.unfinished, "left_out": table.left_out}
    paths[0].write_text(json.dumps(summary_json, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    paths[1].write_text(markdown(run, similarity, sections, references, table, convergence, reported, earlier),
                        encoding="utf-8")
    return paths
