"""Evaluation of one model of the SCAT recipe on SCAT valid: beam translations of the SCAT
sentences scored by sacreBLEU BLEU and chrF (``fairseq-ctx-score``), contrastive pronoun accuracy
(``fairseq-ctx-contrastive --format scat``) with every example's scores, and CXMI
(``fairseq-ctx-cxmi``, Fernandes et al., 2021) of every SCAT sentence; for hce/hmce, where their
word-level context attention looks (``fairseq-ctx-supporting-attention``: the weights α on the
context words SCAT's translators marked): on the English context of the SCAT training lines that
have marks there (SCAT valid marks none), and for a model reading the target context on the French
context of SCAT valid."""
import json
import re
import shutil
import time
from pathlib import Path
from typing import Dict, List

import scat_data
import scat_results
from devtools.plateau_rule import checkpoint_updates
from devtools.recipe_runs import device_args
from devtools.train_log import sentences_per_update, validation_curve
from fairseq_ctx.context.contrastive.example import ContrastiveInputError
from fairseq_ctx.context.contrastive.scat import read_marked_context

SUPPORTING_ATTENTION_ARCHS = ("hce", "hmce")  # the models whose context encoder weighs its words (α)
SUPPORTING_ATTENTION_SIDES = {"source": "train", "target": "valid"}  # the SCAT split whose marks each side reads


def evaluate(recipe, out: Path, checkpoint: Path, arch: str, context_size: int, target_context_size: int) -> Dict:
    """Beam translations, BLEU/chrF, contrastive accuracy and CXMI of ``checkpoint`` on SCAT valid,
    and the attention of an hce/hmce to the marked supporting words of each context side it reads;
    ``recipe``: the run (its tool runner, settings and data directories)."""
    a, data = recipe.args, recipe.bin / "scat"
    started = time.time()
    print(f"== evaluate {checkpoint} on SCAT valid (beam {a.beam}, contrastive, CXMI)", flush=True)
    shutil.rmtree(out / "generate", ignore_errors=True)
    recipe.run("fairseq-generate", [
        str(data), "--user-dir", recipe.user_dir, "--task", "context_translation", "--source-lang", "en",
        "--target-lang", "fr", "--context-size", str(context_size), "--target-context-size",
        str(target_context_size), "--path", str(checkpoint), "--gen-subset", "valid", "--beam", str(a.beam),
        "--max-len-a", "1.2", "--max-len-b", "10", "--batch-size", "64", "--required-batch-size-multiple", "1",
        "--post-process", "sentencepiece", "--results-path", str(out / "generate"), *device_args(a.device)])
    sentence_ids = recipe.prep / "scat.valid.sentence_ids"
    hypotheses = scat_results.sentence_hypotheses(out / "generate" / "generate-valid.txt", sentence_ids)
    scat_data.write_lines(out / "valid.hyp.fr", hypotheses)
    sides = supporting_attention_sides(a.scat_dir, arch, context_size, target_context_size)
    for stale in ("score.json", "contrastive.json", "cxmi.json", "cxmi.tsv",
                  *(f"supporting_attention.{side}.json" for side in sides)):
        (out / stale).unlink(missing_ok=True)
    recipe.run("fairseq-ctx-score", ["--hyp", str(out / "valid.hyp.fr"), "--ref",
                                     str(recipe.prep / "scat.valid.ref.fr"), "--no-comet", "--json",
                                     str(out / "score.json")])
    recipe.run("fairseq-ctx-contrastive", [
        str(checkpoint), "--data", str(data), *device_args(a.device), "--spm", str(recipe.spm_dir / "spm.model"),
        "--format", "scat", "--input", str(Path(a.scat_dir) / "highlighted.valid"), "--json",
        str(out / "contrastive.json")])
    recipe.run("fairseq-ctx-cxmi", [str(checkpoint), "--data", str(data), "--gen-subset", "valid",
                                    *device_args(a.device),
                                    "--per-sentence", str(out / "cxmi.tsv"), "--json", str(out / "cxmi.json")])
    for side in sides:
        recipe.run("fairseq-ctx-supporting-attention", [
            str(checkpoint), "--data", str(data), *device_args(a.device), "--spm", str(recipe.spm_dir / "spm.model"),
            "--input", str(Path(a.scat_dir) / f"highlighted.{SUPPORTING_ATTENTION_SIDES[side]}"), "--side", side,
            "--json", str(out / f"supporting_attention.{side}.json")])
    scores = json.loads((out / "score.json").read_text())
    contrastive = json.loads((out / "contrastive.json").read_text())
    cxmi = {int(line.split("\t")[0]): float(line.split("\t")[1])
            for line in (out / "cxmi.tsv").read_text().splitlines()}
    scat_cxmi = [cxmi[int(i)] for i in sentence_ids.read_text().split()]
    examples = [{"line": int(e["origin"].rsplit(":", 1)[1]), **e["labels"], "correct": e["correct"],
                 "scores": e["scores"]} for e in contrastive["examples"]]
    log = (out / "train.log").read_text()
    return {
        "bleu": scores["bleu"], "chrf": scores["chrf"], "bleu_signature": scores["bleu_signature"],
        "chrf_signature": scores["chrf_signature"],
        "contrastive_accuracy": contrastive["accuracy"], "contrastive_correct": contrastive["correct"],
        "contrastive_total": contrastive["total"], "contrastive_ties": contrastive.get("ties", 0),
        "support": contrastive["breakdowns"].get("support", {}), "examples": examples,
        "pronoun_prior": scat_results.gender_breakdown(examples),
        "cxmi": sum(scat_cxmi) / len(scat_cxmi), "cxmi_per_sentence": scat_cxmi,
        "evaluated_updates": checkpoint_updates(checkpoint),
        "valid_loss": validation_curve(log, "loss"),
        "sentences_per_update": sentences_per_update(log),
        "params": int(re.search(r"num\. shared model params: ([\d,]+)", log).group(1).replace(",", "")),
        "hypotheses": str(out / "valid.hyp.fr"),
        **({"supporting_attention": [json.loads((out / f"supporting_attention.{side}.json").read_text())
                                     for side in sides]} if sides else {}),
        "eval_seconds": round(time.time() - started, 1),
    }


def supporting_attention_sides(scat_dir: str, arch: str, context_size: int, target_context_size: int) -> List[str]:
    """The context sides whose attention to the marked words is measured for a model: those an
    hce/hmce reads and whose SCAT split (:data:`SUPPORTING_ATTENTION_SIDES`) has marked lines."""
    if arch not in SUPPORTING_ATTENTION_ARCHS:
        return []
    read = [side for side, size in (("source", context_size), ("target", target_context_size)) if size > 0]
    return [side for side in read if has_marks(Path(scat_dir) / f"highlighted.{SUPPORTING_ATTENTION_SIDES[side]}", side)]


def has_marks(prefix: Path, side: str) -> bool:
    try:
        read_marked_context(str(prefix), side, scat_data.SRC, scat_data.TGT)
    except ContrastiveInputError:
        return False
    return True
