"""SCAT En→Fr with the two-stage recipe of Yun (2022) ch. 3.

Stage 1: a sentence-level Transformer on all the en–fr sentence data (Multi30k train, SCAT's
training sentences and their context lines; scat_data.py) with the published small-Transformer
settings of the Multi30k recipes (Wu et al. (2021)'s Transformer-tiny, ``devtools.transformer_tiny``),
a fixed budget of --sentence-updates, every epoch checkpoint kept, the average of the last
--average-last of them the stage-1 model; scored on Multi30k test_2016_flickr en→fr besides the
SCAT evaluation. Stage 2, per seed: hmce, hce, ctx_concat, hmce_target (hmce
reading the previous target sentence too: ``--target-context-size 1``; the reference in training,
its own translation in fairseq-generate, SCAT's French context line in contrastive scoring) and
``sentence_scat``, the control (stage 1 trained on the same SCAT lines without context); dat, han,
dct and hmce_coword (hmce with ``--coword-dropout``) on request. Every stage-2 model starts from
stage 1's averaged checkpoint (``--pretrained-sentence-checkpoint``; the control:
``--finetune-from-model``) and is trained on the same SCAT documents for the same updates of the
same sentences per update (--context-batch-size). Every model is evaluated on SCAT's published
test split (1,000 examples): contrastive pronoun accuracy (``fairseq-ctx-contrastive --format
scat``), CXMI (``fairseq-ctx-cxmi``), sacreBLEU BLEU/chrF of beam translations of the SCAT
sentences only; ``--extra-contrastive`` adds contrastive sets in the DiscEvalMT, ContraPro and
SCAT layouts (``scat_extra_sets.py``).

Usage (from the repository root, package installed):

    python -m examples.context_mt.scat_en_fr --scat-dir contextual-mt/data/scat \\
        --multi30k-dir multi30k-dataset/data/task1/raw --seeds 1,2,3

(SCAT: github.com/neulab/contextual-mt, ``data/scat/``, Yin et al. (2021); Multi30k:
github.com/multi30k/dataset, ``data/task1/raw/``, Elliott et al. (2016).)

Writes ``scat_en_fr.{md,json,png}`` and their plain-text files into ``--results`` (default
WORK/results); scratch files, logs and every tool command (``commands.sh``) go to ``--work``.
Rerunning continues: data stages and models with a result are skipped, an interrupted training
resumes from its checkpoint_last.pt. Stage 2 runs side by side in ``--jobs`` processes, each
the recipe itself restricted to one model and seed (log: WORK[/seed<N>]/job.MODEL.log).
"""
import argparse
import functools
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

HERE = Path(__file__).resolve().parent

from examples.context_mt import scat_data
from examples.context_mt import scat_results
from examples.context_mt.scat_extra_sets import ExtraSet, check_extra_sets, parse_extra_set, score_extra_sets
from devtools.checkpoint_averaging import average_last_epochs, weights_digest
from devtools.plateau_rule import checkpoint_updates
from devtools.results_file import script_command
from devtools.recipe_report import run_header, unfinished_run
from devtools.recipe_runs import (Job, add_report_only, add_run_options, check_report_only,
                                  check_run_options, device_args, failures_message, job_command, log_to_stdout,
                                  precision_args, results_dir, resume_command, run_jobs, seed_dirs, seed_option,
                                  single_seed)
from devtools.recipe_tools import Step, captured_log, run
from devtools.train_log import (NOT_RECORDED, training_machines, training_seconds, training_stretches,
                                validation_curve)
from devtools.training_stretch import (add_stretch_args, record_stretch, stretch_args, stretch_limit,
                                       stretch_record)
from devtools.transformer_tiny import TINY
from examples.context_mt.scat_evaluation import evaluate, evaluate_multi30k
from examples.context_mt.scat_results import SENTENCE, SENTENCE_ON_SCAT

CONTEXT_ARCHS = ["hmce", "hce", "ctx_concat", "dat", "han", "dct"]
TARGET_CONTEXT_MODELS = {"hmce_target": "hmce"}  # name -> arch, trained with --target-context-size 1
COWORD_MODELS = {"hmce_coword": "hmce"}  # name -> arch, trained with --coword-dropout
CONTEXT_MODELS = [*CONTEXT_ARCHS, *TARGET_CONTEXT_MODELS, *COWORD_MODELS]
STAGE_TWO_MODELS = [SENTENCE_ON_SCAT, *CONTEXT_MODELS]
DEFAULT_MODELS = [SENTENCE_ON_SCAT, "hmce", "hce", "ctx_concat", "hmce_target"]
AVERAGED = "checkpoint_averaged.pt"  # stage 1's tested model, which initialises stage 2
SCRIPT = "examples/context_mt/scat_en_fr.py"


class Recipe:
    """The stages of one run; every tool call is appended to ``WORK/commands.sh``."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work = Path(args.work).resolve()
        self.prep, self.spm_dir, self.bin = self.work / "prep", self.work / "spm", self.work / "data-bin"
        self.test_dir = self.work / "test"
        self.user_dir = str(Path(__import__("fairseq_ctx").__file__).parent)
        self.argv: List[str] = []  # the recipe's own command line, for the command that continues a stretch
        self.stretch_started: Dict[Path, int] = {}  # a run's directory -> the update its stretch started from

    def run(self, tool: str, args: Sequence[str]) -> None:
        run(Step(tool, list(args)), record=self.work / "commands.sh")

    # ---- data ----------------------------------------------------------------------------------
    def prepare(self) -> Dict:
        """The data stages (each skipped when done); returns the stage-1 corpus facts."""
        corpus_file = self.prep / "corpus.json"
        if self.prep.is_dir():
            corpus = json.loads(corpus_file.read_text()) if corpus_file.exists() else {}
            if corpus.get("stage_one_corpus") != scat_data.STAGE_ONE_CORPUS:
                raise scat_data.RecipeInputError(
                    f"{self.prep} was prepared by an earlier version of this recipe (stage 1 on "
                    f"{corpus.get('stage_one_corpus', 'Multi30k + SCAT sentences')}, not "
                    f"{scat_data.STAGE_ONE_CORPUS}); use another --work, or --restart")
        else:
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
        if not (self.bin / "scat" / "test.docids").exists():
            self.prepare_test()
        return {**json.loads(corpus_file.read_text()),
                "test_counts": json.loads((self.test_dir / "counts.json").read_text())}

    def prepare_test(self) -> None:
        """The test sets, binarized with the training dictionary into the ``test`` split of both
        data directories; SCAT's ``test.docids`` is written last, so an interrupted stage is redone."""
        print(f"== test sets: Multi30k {scat_data.MULTI30K_TEST} en→fr and SCAT test ({self.test_dir})", flush=True)
        shutil.rmtree(self.test_dir, ignore_errors=True)
        tmp = self.fresh(self.test_dir)
        training = set((self.prep / "sentence.train.en").read_text(encoding="utf-8").splitlines())
        counts = scat_data.prepare_test_text(Path(self.args.scat_dir), Path(self.args.multi30k_dir), tmp, training)
        (tmp / "counts.json").write_text(json.dumps(counts, indent=2), encoding="utf-8")
        scat_data.encode_test(self.spm_dir / "spm.model", tmp, tmp / "pieces")
        dictionary = str(self.spm_dir / "dict.txt")
        for corpus in ("sentence", "scat"):
            self.run("fairseq-preprocess", [
                "--source-lang", "en", "--target-lang", "fr", "--testpref", str(tmp / "pieces" / f"{corpus}.test"),
                "--destdir", str(tmp / "bin" / corpus), "--srcdict", dictionary, "--tgtdict", dictionary,
                "--workers", "1"])
        scat_data.replace_dir(tmp, self.test_dir)
        for corpus in ("sentence", "scat"):
            for binary in (self.test_dir / "bin" / corpus).glob("test.*"):
                shutil.copyfile(binary, self.bin / corpus / binary.name)
        shutil.copyfile(self.test_dir / "scat.test.docids", self.bin / "scat" / "test.docids")

    @staticmethod
    def fresh(final: Path) -> Path:
        tmp = final.with_name(final.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        return tmp

    # ---- models --------------------------------------------------------------------------------
    def model_dir(self, name: str, seed: int) -> Path:
        """Stage 1: WORK/models/sentence; stage 2: WORK[/seed<N>]/models/NAME."""
        if name == SENTENCE:
            return self.work / "models" / SENTENCE
        return dict(seed_dirs(self.args, self.work))[seed] / "models" / name

    def model_args(self) -> List[str]:
        a = self.args
        return ["--share-all-embeddings", "--encoder-embed-dim", str(a.embed_dim), "--decoder-embed-dim",
                str(a.embed_dim), "--encoder-ffn-embed-dim", str(a.ffn_dim), "--decoder-ffn-embed-dim", str(a.ffn_dim),
                "--encoder-layers", str(a.layers), "--decoder-layers", str(a.layers), "--encoder-attention-heads",
                str(a.heads), "--decoder-attention-heads", str(a.heads)]

    def train_args(self, name: str, arch: str, context_size: int, extra: Sequence[str], seed: int) -> List[str]:
        """``extra``: the model's own options beyond the shared ones (sentence checkpoint, target
        context). Stage 1 keeps every epoch checkpoint (for the average); stage 2 only its last,
        validated every --validate-every updates."""
        a, out = self.args, self.model_dir(name, seed)
        stage_one = name == SENTENCE
        lr, warmup = (a.lr, a.warmup) if stage_one else (a.context_lr, min(a.context_warmup, max(1, a.context_updates // 2)))
        checkpoints = (["--save-interval", "1", "--validate-interval", "1"] if stage_one else
                       ["--no-epoch-checkpoints", "--validate-interval-updates", str(a.validate_every)])
        finetuned = Path(extra[extra.index("--finetune-from-model") + 1]) if "--finetune-from-model" in extra else None
        stop, on_time = stretch_args(stretch_limit(a), out / "checkpoints" / "checkpoint_last.pt", self.budget(name),
                                     starts_from=finetuned)
        return [
            str(self.bin / ("sentence" if stage_one else "scat")), "--user-dir", self.user_dir, "--task",
            "context_translation", "--source-lang", "en", "--target-lang", "fr", "--context-size", str(context_size),
            "--arch", arch, *self.model_args(), *extra,
            "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--clip-norm", f"{a.clip_norm:g}", "--lr", str(lr),
            "--lr-scheduler", "inverse_sqrt", "--warmup-updates", str(warmup),
            "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--dropout", str(a.dropout),
            *batch_args(name, a), "--max-update", str(stop), *on_time, "--seed", str(seed), "--save-dir", str(out / "checkpoints"), *checkpoints, "--num-workers", "0",
            "--skip-invalid-size-inputs-valid-test", "--log-format", "simple", "--log-interval", str(a.log_interval),
            *device_args(a.device), *precision_args(a.precision)]

    def budget(self, name: str) -> int:
        """The updates a run of model ``name`` trains in all (over its stretches)."""
        return self.args.sentence_updates if name == SENTENCE else self.args.context_updates

    def finished_training(self, name: str, seed: int) -> bool:
        """Whether the run's checkpoint has its whole budget; if not, its stretch ended on time or
        on --stretch-updates: the stretch is recorded in the results folder, and the same command
        continues it."""
        out = self.model_dir(name, seed)
        updates = checkpoint_updates(out / "checkpoints" / "checkpoint_last.pt")
        if updates >= self.budget(name):
            return True
        log = (out / "train.log").read_text()
        seconds = training_seconds("\n".join(training_stretches(log)[-1]))
        machines = training_machines(log)
        record = stretch_record(f"{name}" + ("" if name == SENTENCE else f".seed{seed}"), seed,
                                (self.stretch_started.get(out, 0), updates), self.budget(name), seconds,
                                machines[-1] if machines else NOT_RECORDED, validation_curve(log, "loss"),
                                script_command(SCRIPT, self.argv))
        record_stretch(results_dir(self.args, self.work), record)
        print(f"== {name}, seed {seed}: this stretch ended at update {updates} of {self.budget(name)} after "
              f"{seconds / 60:.1f} min; run the same command again to continue it", flush=True)
        return False

    def timed_train(self, out: Path, args: List[str]) -> None:
        """fairseq-train, its log appended to ``out/train.log`` (with the machine it trains on), its
        wall time added to ``out/train.seconds`` (an interrupted session's too)."""
        out.mkdir(parents=True, exist_ok=True)
        started, spent = time.time(), out / "train.seconds"
        self.stretch_started[out] = checkpoint_updates(out / "checkpoints" / "checkpoint_last.pt")
        try:
            with captured_log(out / "train.log"):
                self.run("fairseq-train", args)
        finally:
            earlier = float(spent.read_text()) if spent.exists() else 0.0
            spent.write_text(f"{earlier + time.time() - started:.1f}")

    def stage_one(self) -> Optional[Dict]:
        """Train stage 1 to its budget (continuing a run stopped before it), average its last epoch
        checkpoints and evaluate the average; returns its result, or None when this stretch ended
        before the budget."""
        a, out = self.args, self.model_dir(SENTENCE, single_seed(self.args))
        checkpoints, result_file = out / "checkpoints", out / "result.json"
        if checkpoint_updates(checkpoints / "checkpoint_last.pt") < a.sentence_updates:
            self.refuse_stale_stage_two()
            result_file.unlink(missing_ok=True)
            print(f"== train {SENTENCE} (stage 1) to update {a.sentence_updates} (log {out / 'train.log'})", flush=True)
            self.timed_train(out, self.train_args(SENTENCE, "transformer", 0, [], single_seed(a)))
            if not self.finished_training(SENTENCE, single_seed(a)):
                return None
        if result_file.exists():
            print(f"== {SENTENCE}: finished earlier ({result_file})", flush=True)
            result = json.loads(result_file.read_text())
            if "weights_sha256" not in result and (checkpoints / AVERAGED).exists():  # a result of an earlier version
                result["weights_sha256"] = weights_digest(checkpoints / AVERAGED)
                result_file.write_text(json.dumps(result, indent=2))
            return self.with_extra_sets(result, out, checkpoints / AVERAGED)
        averaged = average_last_epochs(checkpoints, a.average_last, checkpoints / AVERAGED, SENTENCE)
        tested = checkpoints / AVERAGED
        result = {"model": SENTENCE, "seed": single_seed(a), "arch": "transformer", "context_size": 0,
                  "target_context_size": 0, "stopped": "fixed", "updates": checkpoint_updates(tested),
                  "averaged_checkpoints": averaged, "weights_sha256": weights_digest(tested),
                  "train_seconds": float((out / "train.seconds").read_text()),
                  "trained_on": training_machines((out / "train.log").read_text()),
                  **evaluate(self, out, tested, "transformer", 0, 0),
                  "multi30k_test": evaluate_multi30k(self, out, tested)}
        result_file.write_text(json.dumps(result, indent=2))
        return self.with_extra_sets(result, out, tested)

    def missing_extra_sets(self, result: Dict) -> List[ExtraSet]:
        return [s for s in self.args.extra_contrastive if s.name not in result.get("extra_contrastive", {})]

    def with_extra_sets(self, result: Dict, out: Path, checkpoint: Path) -> Dict:
        """``result`` with its accuracy on every --extra-contrastive set it has none for yet, scored
        now with ``checkpoint`` where the work directory still holds it (saved in its result.json)."""
        missing = self.missing_extra_sets(result)
        if not missing or not checkpoint.exists():
            return result
        result = {**result, "extra_contrastive": {**result.get("extra_contrastive", {}),
                                                  **score_extra_sets(self, out, checkpoint, missing)}}
        (out / "result.json").write_text(json.dumps(result, indent=2))
        return result

    def needs_work(self, name: str, seed: int) -> bool:
        """A stage-2 run without a result, or without a score on an --extra-contrastive set while its
        checkpoint is there."""
        out = self.model_dir(name, seed)
        if not (out / "result.json").exists():
            return True
        return bool(self.missing_extra_sets(json.loads((out / "result.json").read_text()))
                    and (out / "checkpoints" / "checkpoint_last.pt").exists())

    def refuse_stale_stage_two(self) -> None:
        """Stage 1 may only (continue to) train while no stage-2 model has started from it."""
        started = sorted(str(p.parent) for p in self.work.glob("**/models/*/checkpoints/checkpoint_last.pt")
                         if p.parent.parent.name != SENTENCE)
        if started:
            raise scat_data.RecipeInputError(
                f"stage 1 is to train further (--sentence-updates {self.args.sentence_updates}), but stage-2 models "
                f"were initialised from its current checkpoint: {', '.join(started)}; use another --work (with "
                f"--stage-one-only first), or give the --sentence-updates stage 1 stopped at")

    def stage_two(self, name: str, seed: int) -> Optional[Dict]:
        """Train (fixed budget) and evaluate one stage-2 model of one seed; returns its result, or
        None when this stretch ended before the budget."""
        out = self.model_dir(name, seed)
        if (out / "result.json").exists():
            print(f"== {name}, seed {seed}: finished earlier ({out / 'result.json'})", flush=True)
            return self.with_extra_sets(json.loads((out / "result.json").read_text()), out,
                                        out / "checkpoints" / "checkpoint_last.pt")
        a = self.args
        target_context_size = 1 if name in TARGET_CONTEXT_MODELS else 0
        stage_one = self.model_dir(SENTENCE, single_seed(a)) / "checkpoints" / AVERAGED
        if name == SENTENCE_ON_SCAT:
            arch, context_size, extra = "transformer", 0, ["--finetune-from-model", str(stage_one)]
        else:
            arch, context_size = {**TARGET_CONTEXT_MODELS, **COWORD_MODELS}.get(name, name), 1
            extra = ["--pretrained-sentence-checkpoint", str(stage_one), "--target-context-size",
                     str(target_context_size)]
            if name in COWORD_MODELS:
                extra += ["--coword-dropout", str(a.coword_dropout)]
        if not (out / "train.json").exists():
            print(f"== train {name}, seed {seed} ({arch}, context size {context_size}, {a.context_updates} updates; "
                  f"log {out / 'train.log'})", flush=True)
            self.timed_train(out, self.train_args(name, arch, context_size, extra, seed))
            if not self.finished_training(name, seed):
                return None
            (out / "train.json").write_text(json.dumps({"stopped": "fixed", "updates": a.context_updates,
                                                        "stage_one_updates": checkpoint_updates(stage_one),
                                                        "stage_one_sha256": weights_digest(stage_one)}))
        result = {"model": name, "seed": seed, "arch": arch, "context_size": context_size,
                  "target_context_size": target_context_size, "coword_dropout": coword_rate(name, a),
                  **json.loads((out / "train.json").read_text()),
                  "train_seconds": float((out / "train.seconds").read_text()),
                  "trained_on": training_machines((out / "train.log").read_text()),
                  **evaluate(self, out, out / "checkpoints" / "checkpoint_last.pt", arch, context_size,
                             target_context_size)}
        (out / "result.json").write_text(json.dumps(result, indent=2))
        return self.with_extra_sets(result, out, out / "checkpoints" / "checkpoint_last.pt")


def coword_rate(name: str, args: argparse.Namespace) -> float:
    """The --coword-dropout of stage-2 model ``name``: the recipe's for hmce_coword, else 0."""
    return args.coword_dropout if name in COWORD_MODELS else 0.0


def batch_args(name: str, args: argparse.Namespace) -> List[str]:
    """The batch size of model ``name``: a token budget for stage 1 (--update-freq batches per
    update), and for stage 2 unless --context-batch-size gives every stage-2 model the same number
    of sentences per update."""
    if name == SENTENCE:
        return ["--max-tokens", str(args.max_tokens), "--update-freq", str(args.update_freq)]
    if not args.context_batch_size:
        return ["--max-tokens", str(args.max_tokens)]
    return ["--batch-size", str(args.context_batch_size)]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scat_en_fr.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scat-dir", required=True,
                        help="directory of highlighted.{train,valid,test}[.context].{en,fr}")
    parser.add_argument("--multi30k-dir", required=True,
                        help=f"directory of the raw {{train,val,{scat_data.MULTI30K_TEST}}}.{{en,fr}}.gz")
    parser.add_argument("--work", default="work/scat_en_fr", help="scratch directory (kept for resuming)")
    parser.add_argument("--models", nargs="+", choices=STAGE_TWO_MODELS, default=DEFAULT_MODELS,
                        help="stage-2 models to train (stage 1 is always trained: it initialises them); "
                        "sentence_scat is the stage-1 model trained on the SCAT lines without context, "
                        "hmce_target is hmce with --target-context-size 1, hmce_coword hmce with --coword-dropout")
    parser.add_argument("--stage-one-only", action="store_true",
                        help="train and evaluate stage 1 only (run stage 2 later with the same command without it)")
    parser.add_argument("--restart", action="store_true", help="delete --work first instead of resuming")
    parser.add_argument("--sentence-updates", type=int, default=2519,
                        help="stage-1 updates (a fixed budget; the lr schedule does not depend on it): 11 epochs of the "
                             "stage-1 corpus at the default batch, about 85 minutes on 2 CPU cores with --amp")
    parser.add_argument("--average-last", type=int, default=3,
                        help="stage 1's tested model, which initialises stage 2: the parameter average of its last N "
                             "epoch checkpoints (3 epochs of this corpus are ≈690 updates, the ≈620 updates of the last "
                             "10 Multi30k epochs Wu et al. (2021) average)")
    parser.add_argument("--context-updates", type=int, default=800, help="stage-2 updates of every stage-2 model")
    parser.add_argument("--coword-dropout", type=float, default=0.1,
                        help="hmce_coword's CoWord dropout rate (Fernandes et al., 2021): the share of the current "
                             "sentence's tokens replaced by <unk> in training, so that the model has to read the context")
    parser.add_argument("--embed-dim", type=int, default=TINY.embed_dim,
                        help="model dimension of both stages (Transformer-tiny; thesis: 512)")
    parser.add_argument("--ffn-dim", type=int, default=TINY.ffn_dim, help="feed-forward dimension (thesis: 2048)")
    parser.add_argument("--layers", type=int, default=TINY.layers, help="encoder and decoder layers each (thesis: 6)")
    parser.add_argument("--heads", type=int, default=TINY.heads, help="attention heads (thesis: 8)")
    parser.add_argument("--dropout", type=float, default=TINY.dropout, help="dropout of both stages")
    parser.add_argument("--lr", type=float, default=TINY.lr, help="stage 1: peak learning rate of inverse_sqrt")
    parser.add_argument("--warmup", type=int, default=TINY.warmup_updates, help="stage 1: warm-up updates")
    parser.add_argument("--context-lr", type=float, default=1e-3,
                        help="stage 2: peak learning rate of inverse_sqrt (fine-tuning from stage 1)")
    parser.add_argument("--context-warmup", type=int, default=200,
                        help="stage 2: warm-up updates (at most half of --context-updates)")
    parser.add_argument("--clip-norm", type=float, default=TINY.clip_norm, help="gradient norm clipping of both stages")
    parser.add_argument("--max-tokens", type=int, default=TINY.max_tokens, help="stage-1 tokens per batch")
    parser.add_argument("--update-freq", type=int, default=TINY.gpus,
                        help="stage 1: batches of --max-tokens per update (Wu et al. (2021): 4096 tokens on each of 2 "
                             "GPUs; ≈6,400 French target pieces per update here)")
    parser.add_argument("--context-batch-size", type=int, default=64,
                        help="stage 2: sentences per update, the same for every model; 0: --max-tokens instead (which "
                        "counts context tokens, so context models would see fewer sentences)")
    parser.add_argument("--spm-vocab", type=int, default=8000, help="joint sentencepiece BPE vocabulary")
    parser.add_argument("--beam", type=int, default=5, help="beam size for the BLEU translations")
    parser.add_argument("--log-interval", type=int, default=100, help="updates between training log lines")
    parser.add_argument("--extra-contrastive", type=parse_extra_set, action="append", default=[],
                        metavar="FORMAT:INPUT[:TEXT_DIR]",
                        help="another contrastive set scored with every model, in its published layout (repeatable): "
                             "discevalmt:PATH/anaphora.json (or lexical-choice.json, DiscEvalMT); "
                             "contrapro:PATH/contrapro.json[:TEXT_DIR] (ContraPro's layout read as en→fr, with the "
                             "*.text.* / *.context.* files json2text_and_context.pl wrote, in TEXT_DIR or next to the "
                             "JSON file); scat:PATH/highlighted.SPLIT (SCAT's layout: the prefix of its files). Each "
                             "set is read before any training; runs finished earlier are scored on a new set while "
                             "their checkpoint is in --work")
    parser.add_argument("--validate-every", type=int, default=200,
                        help="stage 2: updates between validation losses on SCAT valid (its convergence curve; stage 1 "
                             "validates at the end of every epoch)")
    add_run_options(parser, "stage-2 models and seeds (stage 1 runs alone, with --jobs × --threads threads)",
                    {"--results": ["--out"]}, stage_one_seed=True)
    add_report_only(parser)
    add_stretch_args(parser)
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    args = parser.parse_args(argv)
    check_run_options(parser, args, stage_one_seed=True)
    check_report_only(parser, args)
    if args.report_only and args.restart:
        parser.error("--report-only reports on --work; --restart would delete it first: give one of them")
    if min(args.sentence_updates, args.context_updates, args.validate_every, args.average_last, args.update_freq) < 1:
        parser.error("--sentence-updates, --context-updates, --validate-every, --average-last and --update-freq must be "
                     "at least 1")
    try:
        stretch_limit(args)
    except ValueError as error:
        parser.error(str(error))
    if not 0 < args.coword_dropout < 1:
        parser.error(f"--coword-dropout must be between 0 and 1 (exclusive), got {args.coword_dropout}")
    return args


def unfinished(recipe: Recipe, pending: Sequence[Sequence], parser: argparse.ArgumentParser,
               argv: Sequence[str]) -> List[Dict]:
    """Every stage-2 run without a result, with the command that resumes it."""
    listed = []
    for name, seed in pending:
        updates = checkpoint_updates(recipe.model_dir(name, seed) / "checkpoints" / "checkpoint_last.pt")
        state = f"interrupted at update {updates} (resumes from checkpoint_last.pt)" if updates else "not trained yet"
        options = {**seed_option(recipe.args, seed), "--models": name}
        listed.append(unfinished_run(name, seed, state, resume_command(
            parser, SCRIPT, argv, options, drop=["--restart", "--stage-one-only", "--report-only"])))
    return listed


def finished_stage_one(recipe: Recipe, parser: argparse.ArgumentParser, argv: Sequence[str]) -> Dict:
    """--report-only: stage 1's result as it stands (never trained further); without one there is
    nothing to report yet."""
    result = recipe.model_dir(SENTENCE, single_seed(recipe.args)) / "result.json"
    if not result.exists():
        command = resume_command(parser, SCRIPT, argv, {"--stage-one-only": None}, drop=["--report-only"])
        sys.exit(f"scat_en_fr: --report-only: stage 1 has no result yet ({result}), so there is nothing to report; "
                 f"train it first: {command}")
    return json.loads(result.read_text())


def main(argv: Optional[Sequence[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parse_args(parser, argv)
    log_to_stdout()
    scat_data.check_inputs(Path(args.scat_dir), Path(args.multi30k_dir))
    extra_sets = [{"name": s.name, "format": s.format, "input": s.input, "text_dir": s.text_dir,
                   "examples": examples}
                  for s, examples in zip(args.extra_contrastive, check_extra_sets(args.extra_contrastive).values())]
    work = Path(args.work)
    recipe = Recipe(args)
    recipe.argv = argv
    finished = finished_stage_one(recipe, parser, argv) if args.report_only else None
    if args.restart:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    import torch

    corpus = recipe.prepare()
    torch.set_num_threads(args.threads * args.jobs)  # stage 1 runs alone
    stage_one = finished or recipe.stage_one()
    if stage_one is None:
        print(f"== stage 1 is not finished (its stretch is recorded in {results_dir(args, work)}); run the same "
              f"command again to continue it", flush=True)
        return
    seeds = [seed for seed, _ in seed_dirs(args, work)]
    units = [] if args.stage_one_only else [(name, seed) for seed in seeds for name in args.models]
    pending = [(name, seed) for name, seed in units if recipe.needs_work(name, seed)]
    jobs = [Job(f"{name}, seed {seed}",
                job_command(parser, SCRIPT, argv, {**seed_option(args, seed), "--models": name},
                            drop=["--restart", "--stage-one-only", "--report-only"]),
                recipe.model_dir(name, seed).parent.parent / f"job.{name}.log",
                functools.partial(recipe.stage_two, name, seed)) for name, seed in ([] if args.report_only else pending)]
    failed = run_jobs(jobs, args.jobs, args.threads)
    if not args.no_report:
        rows = [stage_one]
        rows += [json.loads((recipe.model_dir(name, seed) / "result.json").read_text()) for seed in seeds
                 for name in STAGE_TWO_MODELS if (recipe.model_dir(name, seed) / "result.json").exists()]
        out = results_dir(args, work)
        rule = (f"none: fixed budgets, fixed before the runs; stage 1's tested model is the average of its last "
                f"{args.average_last} epoch checkpoints")
        outcome = (f"stage 1 trained {stage_one['updates']} updates; averaged "
                   f"{', '.join(stage_one['averaged_checkpoints'])}")
        budget = (f"stage 1 {args.sentence_updates} updates of {args.update_freq} × {args.max_tokens} tokens; stage 2 "
                  f"{args.context_updates} updates of "
                  + (f"{args.context_batch_size} sentences" if args.context_batch_size else
                     f"{args.max_tokens} tokens (context tokens included)") + " per model")
        header = run_header(args, seeds, script_command(SCRIPT, argv), budget, rule, outcome,
                            trained_on={scat_results.run_name(row): row.get("trained_on", [NOT_RECORDED])
                                        for row in rows})
        scat_results.write(rows, header, {
            "settings": {k: v for k, v in vars(args).items()
                         if k not in ("models", "seeds", "results", "restart", "no_report", "precision", "device",
                                      "jobs", "threads", "report_only", "extra_contrastive")},
            "corpus": corpus, "stage_one": stage_one, "extra_sets": extra_sets,
            "unfinished": unfinished(recipe, [(name, seed) for name, seed in pending if not
                                                         (recipe.model_dir(name, seed) / "result.json").exists()],
                                     parser, argv),
            "translations": {scat_results.run_name(r): r["hypotheses"] for r in rows}}, out)
        print(f"== results: {out / 'scat_en_fr.md'}", flush=True)
    if failed:
        sys.exit(failures_message("scat_en_fr", failed))


if __name__ == "__main__":
    main()
