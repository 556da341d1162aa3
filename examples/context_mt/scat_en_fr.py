"""SCAT En→Fr with the two-stage recipe of Yun (2022) ch. 3: a sentence-level Transformer
pre-trained on Multi30k + the SCAT sentences, then hmce, hce, ctx_concat, dat, han, dct each
initialised from it (``--pretrained-sentence-checkpoint``) and trained on SCAT with its context
(same budget each), ``sentence_scat``: the stage-1 model trained on the same SCAT lines for the same
budget without context (the control: in-domain data, no context), and ``hmce_target``: hmce reading the
previous target sentence too
(``--target-context-size 1``: the reference in training, its own translation in
fairseq-generate, SCAT's French context line in contrastive scoring); evaluated on SCAT valid by contrastive pronoun accuracy
(``fairseq-ctx-contrastive --format scat``) and sacreBLEU BLEU/chrF of beam-5 translations.

Usage (from the repository root, package installed):

    python examples/context_mt/scat_en_fr.py --scat-dir contextual-mt/data/scat \\
        --multi30k-dir multi30k-dataset/data/task1/raw

Writes ``examples/context_mt/results/scat_en_fr.{md,json,png}`` (``--out``); scratch files, logs
and every tool command (``commands.sh``) go to ``--work``. Rerunning continues: data stages and
models with a result are skipped, an interrupted training resumes from its checkpoint_last.pt.
``--models hmce dct`` runs a subset (the sentence-level model is always trained: it initialises
the others). The tools run in this process, with the same arguments as on the command line.
"""
import argparse
import json
import re
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
REPOSITORY = str(Path(__file__).resolve().parents[2])  # holds devtools, the helpers of the scripts and tests
if REPOSITORY not in sys.path:
    sys.path.insert(0, REPOSITORY)

import scat_data  # noqa: E402
import scat_results  # noqa: E402
from scat_results import SENTENCE, SENTENCE_ON_SCAT  # noqa: E402
from devtools.train_log import sentences_per_update, validation_curve  # noqa: E402
from devtools.in_process_tools import restored_logging  # noqa: E402
from fairseq_ctx.core.plots import PlotsUnavailableError, require_plots  # noqa: E402

CONTEXT_ARCHS = ["hmce", "hce", "ctx_concat", "dat", "han", "dct"]
TARGET_CONTEXT_MODELS = {"hmce_target": "hmce"}  # name -> arch, trained with --target-context-size 1
CONTEXT_MODELS = [*CONTEXT_ARCHS, *TARGET_CONTEXT_MODELS]
STAGE_TWO_MODELS = [SENTENCE_ON_SCAT, *CONTEXT_MODELS]
# console script -> (module, function, whether it reads sys.argv instead of an argv parameter)
TOOLS = {
    "fairseq-preprocess": ("fairseq_cli.preprocess", "cli_main", True),
    "fairseq-train": ("fairseq_cli.train", "cli_main", True),
    "fairseq-generate": ("fairseq_cli.generate", "cli_main", True),
    "fairseq-ctx-contrastive": ("fairseq_ctx.cli.contrastive", "main", False),
    "fairseq-ctx-score": ("fairseq_ctx.cli.score", "main", False),
}


class Recipe:
    """The stages of one run; every tool call is appended to ``WORK/commands.sh``."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work = Path(args.work).resolve()
        self.prep, self.spm_dir, self.bin = self.work / "prep", self.work / "spm", self.work / "data-bin"
        self.user_dir = str(Path(__import__("fairseq_ctx").__file__).parent)

    def run(self, tool: str, args: Sequence[str]) -> None:
        with open(self.work / "commands.sh", "a", encoding="utf-8") as log:
            log.write(shlex.join([tool, *args]) + "\n")
        module, function, via_argv = TOOLS[tool]
        entry = getattr(__import__(module, fromlist=[function]), function)
        saved_argv = sys.argv
        try:
            with restored_logging():  # one process runs every tool
                if via_argv:
                    sys.argv = [tool, *args]
                    entry()
                else:
                    entry(list(args))
        except SystemExit as stop:
            if stop.code not in (None, 0):
                raise SystemExit(f"{tool} failed ({stop.code}); command in {self.work / 'commands.sh'}")
        finally:
            sys.argv = saved_argv

    # ---- data ----------------------------------------------------------------------------------
    def prepare(self) -> None:
        if not self.prep.is_dir():
            print(f"== plain text and documents ({self.prep})", flush=True)
            tmp = self.fresh(self.prep)
            scat_data.prepare_text(Path(self.args.scat_dir), Path(self.args.multi30k_dir), tmp)
            scat_data.replace_dir(tmp, self.prep)
        if not self.spm_dir.is_dir():
            print(f"== sentencepiece BPE, {self.args.spm_vocab} pieces, joint en+fr ({self.spm_dir})", flush=True)
            tmp = self.fresh(self.spm_dir)
            model = scat_data.train_sentencepiece(scat_data.spm_inputs(self.prep), tmp / "spm", self.args.spm_vocab)
            scat_data.write_dictionary(model, tmp / "dict.txt")
            scat_data.encode_all(model, self.prep, tmp)
            scat_data.replace_dir(tmp, self.spm_dir)
        if not self.bin.is_dir():
            print(f"== fairseq-preprocess ({self.bin})", flush=True)
            tmp = self.fresh(self.bin)
            dictionary = str(self.spm_dir / "dict.txt")
            for corpus in ("sentence", "scat"):
                self.run("fairseq-preprocess", [
                    "--source-lang", "en", "--target-lang", "fr", "--trainpref", str(self.spm_dir / f"{corpus}.train"),
                    "--validpref", str(self.spm_dir / f"{corpus}.valid"), "--destdir", str(tmp / corpus),
                    "--srcdict", dictionary, "--tgtdict", dictionary, "--workers", "1"])
            for split in ("train", "valid"):
                shutil.copy(self.prep / f"scat.{split}.docids", tmp / "scat" / f"{split}.docids")
            scat_data.replace_dir(tmp, self.bin)

    @staticmethod
    def fresh(final: Path) -> Path:
        tmp = final.with_name(final.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        return tmp

    # ---- models --------------------------------------------------------------------------------
    def model_args(self) -> List[str]:
        a = self.args
        return ["--share-all-embeddings", "--encoder-embed-dim", str(a.embed_dim), "--decoder-embed-dim",
                str(a.embed_dim), "--encoder-ffn-embed-dim", str(a.ffn_dim), "--decoder-ffn-embed-dim", str(a.ffn_dim),
                "--encoder-layers", str(a.layers), "--decoder-layers", str(a.layers), "--encoder-attention-heads",
                str(a.heads), "--decoder-attention-heads", str(a.heads)]

    def train(self, name: str, arch: str, context_size: int, updates: int, extra: Sequence[str]) -> float:
        """``extra``: the model's own options beyond the shared ones (sentence checkpoint, target context)."""
        a, out = self.args, self.work / "models" / name
        if (out / "train.done").exists():
            return float((out / "train.done").read_text())
        out.mkdir(parents=True, exist_ok=True)
        print(f"== train {name} ({arch}, context size {context_size}, {updates} updates; log {out / 'train.log'})",
              flush=True)
        started, spent = time.time(), out / "train.seconds"
        data = self.bin / ("sentence" if name == SENTENCE else "scat")
        try:
            self.run("fairseq-train", [
                str(data), "--user-dir", self.user_dir, "--task", "context_translation", "--source-lang", "en",
                "--target-lang", "fr", "--context-size", str(context_size), "--arch", arch, *self.model_args(), *extra,
                "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--clip-norm", "0.0", "--lr", str(a.lr),
                "--lr-scheduler", "inverse_sqrt", "--warmup-updates", str(min(a.warmup, max(1, updates // 2))),
                "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--dropout", str(a.dropout),
                *batch_args(name, a), "--max-update", str(updates), "--seed", str(a.seed),
                "--save-dir", str(out / "checkpoints"), "--no-epoch-checkpoints", "--num-workers", "0",
                "--skip-invalid-size-inputs-valid-test", "--log-format", "simple", "--log-interval", str(a.log_interval),
                "--validate-interval-updates", str(a.validate_every),
                "--log-file", str(out / "train.log"), "--cpu"])
        finally:  # an interrupted session's time counts too when training resumes
            earlier = float(spent.read_text()) if spent.exists() else 0.0
            spent.write_text(f"{earlier + time.time() - started:.1f}")
        (out / "train.done").write_text(spent.read_text())
        return float(spent.read_text())

    def evaluate(self, name: str, context_size: int, target_context_size: int) -> Dict:
        a, out = self.args, self.work / "models" / name
        checkpoint = out / "checkpoints" / "checkpoint_last.pt"
        started = time.time()
        print(f"== evaluate {name} on SCAT valid (beam {a.beam}, contrastive)", flush=True)
        data = self.bin / "scat"
        self.run("fairseq-generate", [
            str(data), "--user-dir", self.user_dir, "--task", "context_translation", "--source-lang", "en",
            "--target-lang", "fr", "--context-size", str(context_size), "--target-context-size",
            str(target_context_size), "--path", str(checkpoint), "--gen-subset", "valid", "--beam", str(a.beam), "--max-len-a", "1.2", "--max-len-b", "10",
            "--batch-size", "64", "--required-batch-size-multiple", "1", "--post-process", "sentencepiece",
            "--results-path", str(out / "generate"), "--cpu"])
        hypotheses = scat_results.sentence_hypotheses(out / "generate" / "generate-valid.txt",
                                                      self.prep / "scat.valid.sentence_ids")
        scat_data.write_lines(out / "valid.hyp.fr", hypotheses)
        self.run("fairseq-ctx-score", ["--hyp", str(out / "valid.hyp.fr"), "--ref", str(self.prep / "scat.valid.ref.fr"),
                                       "--no-comet", "--json", str(out / "score.json")])
        self.run("fairseq-ctx-contrastive", [
            str(checkpoint), "--data", str(data), "--cpu", "--spm", str(self.spm_dir / "spm.model"),
            "--format", "scat", "--input", str(Path(a.scat_dir) / "highlighted.valid"), "--json",
            str(out / "contrastive.json")])
        scores = json.loads((out / "score.json").read_text())
        contrastive = json.loads((out / "contrastive.json").read_text())
        log = (out / "train.log").read_text()
        return {
            "bleu": scores["bleu"], "chrf": scores["chrf"],
            "contrastive_accuracy": contrastive["accuracy"], "contrastive_correct": contrastive["correct"],
            "contrastive_total": contrastive["total"], "contrastive_ties": contrastive.get("ties", 0),
            "support": contrastive["breakdowns"].get("support", {}),
            "updates": int(re.findall(r"num_updates (\d+)", log)[-1]),
            "valid_loss": validation_curve(log, "loss"),
            "sentences_per_update": sentences_per_update(log),
            "params": int(re.search(r"num\. shared model params: ([\d,]+)", log).group(1).replace(",", "")),
            "eval_seconds": round(time.time() - started, 1),
        }

    def model(self, name: str) -> Dict:
        out = self.work / "models" / name
        if (out / "result.json").exists():
            print(f"== {name}: finished earlier ({out / 'result.json'})", flush=True)
            return json.loads((out / "result.json").read_text())
        a = self.args
        target_context_size = 1 if name in TARGET_CONTEXT_MODELS else 0
        sentence_checkpoint = self.work / "models" / SENTENCE / "checkpoints" / "checkpoint_last.pt"
        if name == SENTENCE:
            arch, context_size, updates, extra = "transformer", 0, a.sentence_updates, []
        elif name == SENTENCE_ON_SCAT:
            arch, context_size, updates = "transformer", 0, a.context_updates
            extra = ["--finetune-from-model", str(sentence_checkpoint)]
        else:
            arch, context_size, updates = TARGET_CONTEXT_MODELS.get(name, name), 1, a.context_updates
            extra = ["--pretrained-sentence-checkpoint", str(sentence_checkpoint),
                     "--target-context-size", str(target_context_size)]
        seconds = self.train(name, arch, context_size, updates, extra)
        result = {"model": name, "arch": arch, "context_size": context_size,
                  "target_context_size": target_context_size, "train_seconds": round(seconds, 1),
                  **self.evaluate(name, context_size, target_context_size)}
        (out / "result.json").write_text(json.dumps(result, indent=2))
        return result


def batch_args(name: str, args: argparse.Namespace) -> List[str]:
    """The batch size of model ``name``: a token budget for stage 1, and for stage 2 unless
    --context-batch-size gives every stage-2 model the same number of sentences per update."""
    if name == SENTENCE or not args.context_batch_size:
        return ["--max-tokens", str(args.max_tokens)]
    return ["--batch-size", str(args.context_batch_size)]


def parse_args(argv: Sequence[str] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scat-dir", required=True, help="directory of highlighted.{train,valid}[.context].{en,fr}")
    parser.add_argument("--multi30k-dir", required=True, help="directory of the raw {train,val}.{en,fr}.gz")
    parser.add_argument("--work", default="work/scat_en_fr", help="scratch directory (kept for resuming)")
    parser.add_argument("--out", default=str(HERE / "results"), help="where scat_en_fr.{md,json,png} go")
    parser.add_argument("--models", nargs="+", choices=STAGE_TWO_MODELS, default=STAGE_TWO_MODELS,
                        help="stage-2 models to train (the sentence-level model is always trained); "
                        "sentence_scat is the sentence-level model trained on the SCAT lines without context, "
                        "hmce_target is hmce with --target-context-size 1")
    parser.add_argument("--restart", action="store_true", help="delete --work first instead of resuming")
    parser.add_argument("--sentence-updates", type=int, default=1200,
                        help="stage-1 updates (222 per epoch of Multi30k + SCAT sentences at 4096 tokens; "
                        "400 left the model at BLEU 3 on SCAT valid)")
    parser.add_argument("--context-updates", type=int, default=400,
                        help="stage-2 updates per context model (about one epoch of SCAT documents at 4096 tokens)")
    parser.add_argument("--embed-dim", type=int, default=256, help="model dimension (thesis: 512)")
    parser.add_argument("--ffn-dim", type=int, default=1024, help="feed-forward dimension (thesis: 2048)")
    parser.add_argument("--layers", type=int, default=3, help="encoder and decoder layers each (thesis: 6)")
    parser.add_argument("--heads", type=int, default=4, help="attention heads (thesis: 8)")
    parser.add_argument("--dropout", type=float, default=0.1, help="dropout (thesis: 0.1)")
    parser.add_argument("--lr", type=float, default=1e-3, help="peak learning rate of inverse_sqrt")
    parser.add_argument("--warmup", type=int, default=200, help="warm-up updates (at most half of the budget)")
    parser.add_argument("--max-tokens", type=int, default=4096, help="tokens per batch (context tokens included)")
    parser.add_argument("--context-batch-size", type=int, default=0,
                        help="stage 2: this many sentences per update for every model instead of --max-tokens "
                        "(which counts context tokens, so context models would see fewer sentences); 0 = --max-tokens")
    parser.add_argument("--spm-vocab", type=int, default=8000, help="joint sentencepiece BPE vocabulary")
    parser.add_argument("--beam", type=int, default=5, help="beam size for the BLEU translations")
    parser.add_argument("--log-interval", type=int, default=100, help="updates between training log lines")
    parser.add_argument("--validate-every", type=int, default=100,
                        help="updates between validation losses (the convergence curve in the results; "
                        "no checkpoint is selected on them)")
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args(argv)


def main(argv: Sequence[str] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    try:
        require_plots("scat_en_fr.py (scat_en_fr.png)")
    except PlotsUnavailableError as err:
        sys.exit(f"scat_en_fr.py: {err}")
    scat_data.check_inputs(Path(args.scat_dir), Path(args.multi30k_dir))
    work = Path(args.work)
    if args.restart:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    recipe = Recipe(args)
    recipe.prepare()
    rows = []
    for name in [SENTENCE, *[model for model in STAGE_TWO_MODELS if model in args.models]]:
        rows.append(recipe.model(name))
        scat_results.write(rows, args, argv, Path(args.out), time.time() - started)
    print(f"== results: {Path(args.out) / 'scat_en_fr.md'}", flush=True)


if __name__ == "__main__":
    main()
