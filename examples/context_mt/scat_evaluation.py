"""Evaluation of one model of the SCAT recipe on SCAT's published test split (1,000 examples): beam
translations of the SCAT sentences only (the context lines of the two-line documents are translated
too, and left out) scored by sacreBLEU BLEU and chrF (``fairseq-ctx-score``), contrastive pronoun
accuracy (``fairseq-ctx-contrastive --format scat``) with every example's scores, and CXMI
(``fairseq-ctx-cxmi``, Fernandes et al., 2021) of every SCAT sentence; for hce/hmce, where their
word-level context attention looks (``fairseq-ctx-supporting-attention``: the weights α on the
context words SCAT's translators marked): on the English context of the SCAT training lines that
have marks there (SCAT test marks 2 English context lines), and for a model reading the target
context on the French context of SCAT test. Stage 1 is also scored on Multi30k test_2016_flickr
en→fr: sacreBLEU cased and lowercased (``-lc``), the latter next to the published numbers, which
are on lowercased text."""
import json
import re
import shutil
import time
from pathlib import Path
from typing import Dict, List

from examples.context_mt import scat_data
from examples.context_mt import scat_results
from devtools.plateau_rule import checkpoint_updates
from devtools.recipe_runs import device_args
from devtools.train_log import sentences_per_update, validation_curve
from fairseq_ctx.context.contrastive.example import ContrastiveInputError, read_lines
from fairseq_ctx.context.contrastive.scat import read_marked_context

SUPPORTING_ATTENTION_ARCHS = ("hce", "hmce")  # the models whose context encoder weighs its words (α)
SUPPORTING_ATTENTION_SIDES = {"source": "train", "target": "test"}  # the SCAT split whose marks each side reads
SPLIT = "test"  # the SCAT split every model is evaluated on


def generate(recipe, data: Path, checkpoint: Path, context_size: int, target_context_size: int, out: Path) -> Path:
    """fairseq-generate (beam search) of the ``test`` split of ``data`` into ``out``; returns its output file."""
    a = recipe.args
    shutil.rmtree(out, ignore_errors=True)
    recipe.run("fairseq-generate", [
        str(data), "--user-dir", recipe.user_dir, "--task", "context_translation", "--source-lang", "en",
        "--target-lang", "fr", "--context-size", str(context_size), "--target-context-size",
        str(target_context_size), "--path", str(checkpoint), "--gen-subset", SPLIT, "--beam", str(a.beam),
        "--max-len-a", "1.2", "--max-len-b", "10", "--batch-size", "64", "--required-batch-size-multiple", "1",
        "--post-process", "sentencepiece", "--results-path", str(out), *device_args(a.device)])
    return out / f"generate-{SPLIT}.txt"


def evaluate_multi30k(recipe, out: Path, checkpoint: Path) -> Dict:
    """Stage 1 on Multi30k test_2016_flickr en→fr: beam translations (``multi30k.test.hyp.fr``)
    scored by sacreBLEU against the raw cased reference, cased and lowercased."""
    import sacrebleu

    print(f"== evaluate {checkpoint} on Multi30k {scat_data.MULTI30K_TEST} en→fr", flush=True)
    output = generate(recipe, recipe.bin / "sentence", checkpoint, 0, 0, out / "generate-multi30k")
    references = read_lines(str(recipe.test_dir / "sentence.test.fr"))
    hypotheses = scat_results.ordered_hypotheses(output, len(references))
    scat_data.write_lines(out / "multi30k.test.hyp.fr", hypotheses)
    scores = {}
    for name, lowercase in (("cased", False), ("lowercased", True)):
        bleu = sacrebleu.BLEU(lowercase=lowercase)
        score = bleu.corpus_score(hypotheses, [references])
        scores[name] = {"bleu": score.score, "bp": score.bp, "ratio": score.sys_len / score.ref_len,
                        "signature": str(bleu.get_signature())}
    chrf = sacrebleu.CHRF()
    return {**scores, "chrf": chrf.corpus_score(hypotheses, [references]).score, "chrf_signature":
            str(chrf.get_signature()), "sentences": len(hypotheses), "hypotheses": str(out / "multi30k.test.hyp.fr"),
            "reference": f"{scat_data.MULTI30K_TEST}.fr (raw)"}


def evaluate(recipe, out: Path, checkpoint: Path, arch: str, context_size: int, target_context_size: int) -> Dict:
    """Beam translations, BLEU/chrF, contrastive accuracy and CXMI of ``checkpoint`` on SCAT test,
    and the attention of an hce/hmce to the marked supporting words of each context side it reads;
    ``recipe``: the run (its tool runner, settings and data directories)."""
    a, data = recipe.args, recipe.bin / "scat"
    started = time.time()
    print(f"== evaluate {checkpoint} on SCAT {SPLIT} (beam {a.beam}, contrastive, CXMI)", flush=True)
    output = generate(recipe, data, checkpoint, context_size, target_context_size, out / "generate")
    sentence_ids = recipe.test_dir / f"scat.{SPLIT}.sentence_ids"
    hypotheses = scat_results.sentence_hypotheses(output, sentence_ids)
    scat_data.write_lines(out / f"{SPLIT}.hyp.fr", hypotheses)
    sides = supporting_attention_sides(a.scat_dir, arch, context_size, target_context_size)
    for stale in ("score.json", "contrastive.json", "cxmi.json", "cxmi.tsv",
                  *(f"supporting_attention.{side}.json" for side in sides)):
        (out / stale).unlink(missing_ok=True)
    recipe.run("fairseq-ctx-score", ["--hyp", str(out / f"{SPLIT}.hyp.fr"), "--ref",
                                     str(recipe.test_dir / f"scat.{SPLIT}.ref.fr"), "--no-comet", "--json",
                                     str(out / "score.json")])
    recipe.run("fairseq-ctx-contrastive", [
        str(checkpoint), "--data", str(data), *device_args(a.device), "--spm", str(recipe.spm_dir / "spm.model"),
        "--format", "scat", "--input", str(Path(a.scat_dir) / f"highlighted.{SPLIT}"), "--json",
        str(out / "contrastive.json")])
    recipe.run("fairseq-ctx-cxmi", [str(checkpoint), "--data", str(data), "--gen-subset", SPLIT,
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
        "hypotheses": str(out / f"{SPLIT}.hyp.fr"),
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
