"""Multi30k task 1 with a second source language: en+fr→de and en+cs→de against text-only en→de.

Trains the four Transformer strategies of Libovický (2019, §5.2) (``--arch
hierarchical_attention_decoder --combination serial|parallel|flat|hierarchical``) and the RNN with
hierarchical attention (``--arch multisource_rnn --combination hierarchical``) with ``--extra-source-langs
fr`` resp. ``cs``, plus one text-only en→de Transformer, all with the same budget (updates, batch,
lr schedule). Each model: validation BLEU logged every ``--validate-every`` updates (greedy, fairseq
``--eval-bleu``), then beam search on test_2016_flickr, sacreBLEU BLEU/chrF by ``fairseq-ctx-score`` and
the BLEU drop when the second source is shuffled across the test set (the shuffling of
``fairseq-ctx-adversarial``). Writes ``multi30k_multisource.{md,json,png}`` (multi30k_results.py).

Data (Elliott et al., 2016), not downloaded here: https://github.com/multi30k/dataset, ``data/task1/tok/``
holds ``{train,val,test_2016_flickr}.lc.norm.tok.{en,de,fr,cs}`` (lowercased, normalised,
Moses-tokenised; 29,000 / 1,014 / 1,000 lines). Pass that directory as the first argument.

    python examples/multimodal_mt/multi30k_multisource.py path/to/dataset/data/task1/tok

Every stage whose output exists is skipped (sentencepiece, binarization, each finished model), so
rerunning the same command resumes; ``--models`` / ``--pairs`` run a subset.
"""
import argparse
import contextlib
import datetime
import io
import json
import logging
import os
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

REPOSITORY = str(Path(__file__).resolve().parents[2])  # holds devtools, the helpers of the scripts and tests
if REPOSITORY not in sys.path:
    sys.path.insert(0, REPOSITORY)

from devtools.machine_facts import this_machine  # noqa: E402
from devtools.train_log import validation_curve  # noqa: E402

HERE = Path(__file__).resolve().parent
SPLITS = {"train": "train", "valid": "val", "test": "test_2016_flickr"}  # fairseq split -> Multi30k file stem
SOURCE, TARGET = "en", "de"
STRATEGIES = ["text-only", "serial", "parallel", "flat", "hierarchical", "rnn-hierarchical"]
PAIRS = ["fr", "cs"]


@dataclass
class Model:
    """One model of the recipe: a strategy, and the second source language (None: text-only)."""

    strategy: str
    extra: Optional[str]

    @property
    def name(self) -> str:
        return self.strategy if self.extra is None else f"{self.strategy}-{self.extra}"

    @property
    def pair(self) -> str:
        return f"{SOURCE}→{TARGET}" if self.extra is None else f"{SOURCE}+{self.extra}→{TARGET}"


@dataclass
class Step:
    """A fairseq / fairseq-ctx command run in this process; ``shell`` is its command line for the record."""

    tool: str
    argv: List[str]
    shell: str = field(init=False)

    def __post_init__(self) -> None:
        self.shell = " ".join(shlex.quote(part) for part in [self.tool, *self.argv])


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", help="directory with {train,val,test_2016_flickr}.lc.norm.tok.{en,de,fr,cs}")
    parser.add_argument("--work", default="work/multi30k_multisource", help="everything the recipe writes except the results")
    parser.add_argument("--results", default=str(HERE / "results"),
                        help="directory for multi30k_multisource.{md,json,png}")
    parser.add_argument("--models", default=",".join(STRATEGIES), help=f"subset of {','.join(STRATEGIES)}")
    parser.add_argument("--pairs", default=",".join(PAIRS), help="second source languages (subset of fr,cs)")
    parser.add_argument("--spm-vocab", type=int, default=8000, help="joint sentencepiece BPE pieces over the 4 languages")
    parser.add_argument("--max-update", type=int, default=600, help="updates per model (the same for every model)")
    parser.add_argument("--batch-size", type=int, default=64,
                        help="sentences per update, the same for every model (a token limit would give the "
                             "text-only model more sentences: fairseq counts the second source's tokens too)")
    parser.add_argument("--lr", type=float, default=1e-3, help="peak lr of the inverse_sqrt schedule (every model)")
    parser.add_argument("--warmup-updates", type=int, default=200)
    parser.add_argument("--validate-every", type=int, default=200, help="validation (loss and greedy BLEU) interval in updates")
    parser.add_argument("--embed-dim", type=int, default=256, help="Transformer model dim (RNN: embeddings)")
    parser.add_argument("--ffn-dim", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=3, help="encoder and decoder layers of the Transformers")
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--rnn-hidden", type=int, default=256, help="RNN encoder GRU size per direction (decoder: twice)")
    parser.add_argument("--dropout", type=float, default=0.3)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--max-len-a", type=float, default=1.2,
                        help="hypotheses stop at max-len-a * source length + max-len-b pieces (validation and test)")
    parser.add_argument("--max-len-b", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2, help="fairseq-preprocess workers")
    return parser.parse_args(argv)


def check_data(data: str, langs: Sequence[str]) -> Dict[str, int]:
    """Every file present and the languages of a split line-aligned; returns lines per split."""
    counts: Dict[str, int] = {}
    for split, stem in SPLITS.items():
        lines = {}
        for lang in langs:
            path = os.path.join(data, f"{stem}.lc.norm.tok.{lang}")
            if not os.path.isfile(path):
                sys.exit(f"multi30k_multisource.py: error: {path} not found; pass the directory holding Multi30k task 1's tokenised files "
                         f"(data/task1/tok of https://github.com/multi30k/dataset)")
            with open(path, encoding="utf-8") as handle:
                lines[path] = sum(1 for _ in handle)
        if len(set(lines.values())) != 1:
            sys.exit(f"multi30k_multisource.py: error: the {stem} files are not line-aligned: "
                     + ", ".join(f"{p} has {n} lines" for p, n in lines.items())
                     + "; use the four files of one Multi30k release")
        counts[split] = next(iter(lines.values()))
    return counts


def train_sentencepiece(data: str, work: Path, langs: Sequence[str], vocab: int) -> Path:
    """Joint BPE over the training text of all languages, applied to every split (``spm/{split}.{lang}``)."""
    import sentencepiece as spm

    out = work / "spm"
    if (out / "done").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    spm.SentencePieceTrainer.train(
        input=",".join(os.path.join(data, f"train.lc.norm.tok.{lang}") for lang in langs),
        model_prefix=str(out / "spm"), vocab_size=vocab, model_type="bpe", character_coverage=1.0,
        normalization_rule_name="identity", hard_vocab_limit=False, num_threads=1, minloglevel=2)
    processor = spm.SentencePieceProcessor(model_file=str(out / "spm.model"))
    for split, stem in SPLITS.items():
        for lang in langs:
            with open(os.path.join(data, f"{stem}.lc.norm.tok.{lang}"), encoding="utf-8") as handle:
                lines = handle.read().splitlines()
            with open(out / f"{split}.{lang}", "w", encoding="utf-8") as handle:
                handle.writelines(" ".join(pieces) + "\n" for pieces in processor.encode(lines, out_type=str))
    (out / "done").write_text("")
    return out


def binarize(spm_dir: Path, work: Path, extra_langs: Sequence[str], workers: int) -> List[Step]:
    """One dictionary over the sentencepiece text of all languages (shared embeddings); en-de and
    each extra source (``{split}.{lang}-de.{lang}``) binarized with it into ``data-bin``."""
    data_bin, dict_dir = work / "data-bin", work / "dict"
    prefixes = [item for kind, split in (("train", "train"), ("valid", "valid"), ("test", "test"))
                for item in (f"--{kind}pref", str(spm_dir / split))]
    dictionary = str(dict_dir / "dict.all.txt")
    steps = [Step("fairseq-preprocess", ["--only-source", "--source-lang", "all", "--trainpref", str(spm_dir / "train"),
                                         "--destdir", str(dict_dir), "--dict-only", "--workers", str(workers)]),
             Step("fairseq-preprocess", ["--source-lang", SOURCE, "--target-lang", TARGET, *prefixes,
                                         "--srcdict", dictionary, "--tgtdict", dictionary, "--destdir", str(data_bin),
                                         "--workers", str(workers)])]
    for lang in extra_langs:
        steps.append(Step("fairseq-preprocess", ["--only-source", "--source-lang", lang, "--target-lang", TARGET,
                                                 *prefixes, "--srcdict", dictionary,
                                                 "--destdir", str(work / f"{lang}-bin"), "--workers", str(workers)]))
    if (data_bin / "done").exists():
        return steps
    with open(spm_dir / "train.all", "w", encoding="utf-8") as joint:
        for lang in [SOURCE, TARGET, *extra_langs]:
            joint.write((spm_dir / f"train.{lang}").read_text(encoding="utf-8"))
    for step in steps:
        run(step)
    for lang in extra_langs:
        for split in SPLITS:
            for ext in ("bin", "idx"):
                name = f"{split}.{lang}-{TARGET}.{lang}.{ext}"
                os.replace(work / f"{lang}-bin" / name, data_bin / name)
    (data_bin / "done").write_text("")
    return steps


def run(step: Step) -> Optional[str]:
    """Run a fairseq / fairseq-ctx tool in this process (one interpreter: no start-up per command)."""
    from fairseq import options

    logging.getLogger(__name__).info("$ %s", step.shell)
    if step.tool == "fairseq-preprocess":
        from fairseq_cli import preprocess

        preprocess.main(options.get_preprocessing_parser().parse_args(step.argv))
    elif step.tool == "fairseq-train":
        from fairseq import checkpoint_utils
        from fairseq.dataclass.utils import convert_namespace_to_omegaconf
        from fairseq.distributed import utils as distributed_utils
        from fairseq_cli import train

        # fairseq keeps the best validation score of a run on these functions; a new model starts afresh
        for function in (checkpoint_utils.save_checkpoint, train.should_stop_early):
            if hasattr(function, "best"):
                del function.best
        args = options.parse_args_and_arch(options.get_training_parser(), step.argv)
        distributed_utils.call_main(convert_namespace_to_omegaconf(args), train.main)
    elif step.tool == "fairseq-generate":
        from fairseq_cli import generate

        generate.main(options.parse_args_and_arch(options.get_generation_parser(), step.argv))
    elif step.tool == "fairseq-ctx-score":
        from fairseq_ctx.cli import score

        with contextlib.redirect_stdout(io.StringIO()) as printed:
            score.main(step.argv)
        return printed.getvalue()
    else:
        raise ValueError(f"unknown tool {step.tool}")
    return None


def model_args(model: Model, args: argparse.Namespace) -> List[str]:
    aux = [] if model.extra is None else ["--extra-source-langs", model.extra]
    if model.strategy == "rnn-hierarchical":
        arch = ["--arch", "multisource_rnn", "--combination", "hierarchical", "--encoder-embed-dim", str(args.embed_dim),
                "--decoder-embed-dim", str(args.embed_dim), "--encoder-hidden-size", str(args.rnn_hidden),
                "--decoder-hidden-size", str(2 * args.rnn_hidden), "--attention-dim", str(args.embed_dim)]
    else:
        arch = ["--arch", "hierarchical_attention_decoder", "--share-all-embeddings"]
        if model.strategy != "text-only":
            arch += ["--combination", model.strategy]
        for side in ("encoder", "decoder"):
            arch += [f"--{side}-embed-dim", str(args.embed_dim), f"--{side}-ffn-embed-dim", str(args.ffn_dim),
                     f"--{side}-layers", str(args.layers), f"--{side}-attention-heads", str(args.heads)]
    return aux + arch


def train_step(model: Model, data_bin: Path, user_dir: str, ckpt: Path, args: argparse.Namespace) -> Step:
    return Step("fairseq-train", [
        str(data_bin), "--user-dir", user_dir, "--task", "multimodal_translation", "-s", SOURCE, "-t", TARGET,
        *model_args(model, args), "--dropout", str(args.dropout),
        "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--clip-norm", "1.0", "--lr", str(args.lr),
        "--lr-scheduler", "inverse_sqrt", "--warmup-updates", str(args.warmup_updates),
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
        "--batch-size", str(args.batch_size), "--max-update", str(args.max_update), "--seed", str(args.seed), "--cpu",
        "--validate-interval", "100000", "--save-interval", "100000",
        "--validate-interval-updates", str(args.validate_every), "--save-interval-updates", str(args.validate_every),
        "--keep-interval-updates", "1", "--no-epoch-checkpoints",
        "--eval-bleu", "--eval-bleu-args",
        json.dumps({"beam": 1, "max_len_a": args.max_len_a, "max_len_b": args.max_len_b}), "--eval-bleu-remove-bpe", "sentencepiece",
        "--eval-tokenized-bleu", "--best-checkpoint-metric", "bleu", "--maximize-best-checkpoint-metric",
        "--num-workers", "0", "--log-format", "simple", "--log-interval", "50", "--save-dir", str(ckpt)])


def generate_step(model: Model, data_bin: Path, user_dir: str, path: Path, out: Path, args: argparse.Namespace) -> Step:
    aux = [] if model.extra is None else ["--extra-source-langs", model.extra]
    return Step("fairseq-generate", [
        str(data_bin), "--user-dir", user_dir, "--task", "multimodal_translation", "-s", SOURCE, "-t", TARGET, *aux,
        "--path", str(path), "--gen-subset", "test", "--beam", str(args.beam), "--batch-size", "64",
        "--max-len-a", str(args.max_len_a), "--max-len-b", str(args.max_len_b), "--num-workers", "0",
        "--required-batch-size-multiple", "1", "--post-process", "sentencepiece", "--cpu", "--results-path", str(out)])


def score_step(generated: Path, reference: str, out: Path) -> Step:
    return Step("fairseq-ctx-score", [str(generated), "--ref", reference, "--tokenize", "none", "--no-comet",
                                      "--json", str(out)])


@contextlib.contextmanager
def captured_log(path: Path):
    """Append every log record of the enclosed steps to ``path`` (a resumed training run keeps the
    validations logged before it stopped)."""
    handler = logging.FileHandler(path, mode="a", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s | %(levelname)s | %(name)s | %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        handler.close()


def shuffled_data_dir(data_bin: Path, target: str, lang: str, seed: int) -> None:
    """``data_bin`` with the test split's extra source ``lang`` permuted across the test set, as
    ``fairseq-ctx-adversarial --shuffle LANG`` builds it."""
    import numpy as np

    from fairseq_ctx.multisource.adversarial import link_data_dir, shuffle_text

    skip = shuffle_text(str(data_bin), target, "test", lang, TARGET, np.random.default_rng(seed))
    link_data_dir(str(data_bin), target, skip)


def test_reference(data: str) -> str:
    """The lc.norm.tok German references of test_2016_flickr, which every test score is against."""
    return os.path.join(data, f"{SPLITS['test']}.lc.norm.tok.{TARGET}")


def run_model(model: Model, args: argparse.Namespace, work: Path, user_dir: str) -> dict:
    data_bin, ckpt, out = work / "data-bin", work / "checkpoints" / model.name, work / "eval" / model.name
    out.mkdir(parents=True, exist_ok=True)
    reference = test_reference(args.data)
    train = train_step(model, data_bin, user_dir, ckpt, args)
    start = time.time()
    with captured_log(out / "train.log"):
        run(train)
    train_wall = time.time() - start
    best = ckpt / "checkpoint_best.pt"
    start = time.time()
    steps = [train, generate_step(model, data_bin, user_dir, best, out, args),
             score_step(out / "generate-test.txt", reference, out / "score.json")]
    for step in steps[1:]:
        run(step)
    scores = json.loads((out / "score.json").read_text())
    result = {"name": model.name, "strategy": model.strategy, "second_source": model.extra, "pair": model.pair,
              "updates": args.max_update, "bleu": scores["bleu"], "chrf": scores["chrf"],
              "bleu_signature": scores["bleu_signature"], "chrf_signature": scores["chrf_signature"],
              "valid_bleu": validation_curve((out / "train.log").read_text(encoding="utf-8"), "bleu")}
    if model.extra is not None:
        shuffled = out / "shuffled"
        shuffled.mkdir(exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            shuffled_data_dir(data_bin, tmp, model.extra, args.seed)
            attack = [generate_step(model, Path(tmp), user_dir, best, shuffled, args),
                      score_step(shuffled / "generate-test.txt", reference, shuffled / "score.json")]
            for step in attack:
                run(step)
        steps += attack
        attacked = json.loads((shuffled / "score.json").read_text())
        result.update(bleu_shuffled=attacked["bleu"], chrf_shuffled=attacked["chrf"],
                      bleu_drop=scores["bleu"] - attacked["bleu"])
    result.update(train_wall_s=train_wall, eval_wall_s=time.time() - start, commands=[s.shell for s in steps])
    return result


def significance_against_text_only(work: Path, names: Sequence[str], reference: str) -> Dict[str, Dict[str, float]]:
    """Paired bootstrap p-values (Koehn, 2004; 1000 resamples) of each finished multi-source model's test
    BLEU and chrF difference from text-only's, ``{name: {"bleu_p", "chrf_p"}}``; empty without text-only."""
    from fairseq_ctx.core.scoring import load_translations, paired_bootstrap

    def translations(name: str) -> Tuple[List[str], List[str]]:
        hypotheses, references, _ = load_translations(str(work / "eval" / name / "generate-test.txt"), ref=reference)
        return hypotheses, references

    if "text-only" not in names:
        return {}
    baseline, references = translations("text-only")
    systems = {name: translations(name)[0] for name in names if name != "text-only"}
    return paired_bootstrap(baseline, systems, references, tokenize="none")


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    strategies = [s for s in args.models.split(",") if s]
    pairs = [p for p in args.pairs.split(",") if p]
    for name, chosen, known in (("--models", strategies, STRATEGIES), ("--pairs", pairs, PAIRS)):
        unknown = sorted(set(chosen) - set(known))
        if unknown:
            sys.exit(f"multi30k_multisource.py: error: {name} {','.join(unknown)} unknown; choose from {','.join(known)}")
    models = [Model(s, None) for s in strategies if s == "text-only"]
    models += [Model(s, p) for p in pairs for s in strategies if s != "text-only"]
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s", level=logging.INFO, stream=sys.stdout)
    counts = check_data(args.data, [SOURCE, TARGET, *PAIRS])
    work = Path(args.work).resolve()
    if work == Path(args.data).resolve():
        sys.exit(f"multi30k_multisource.py: error: --work {work} is the data directory; choose another directory")
    work.mkdir(parents=True, exist_ok=True)
    results_dir = work / "results"
    results_dir.mkdir(exist_ok=True)
    user_dir = str(Path(__import__("fairseq_ctx").__file__).parent)
    start = time.time()
    spm_dir = train_sentencepiece(args.data, work, [SOURCE, TARGET, *PAIRS], args.spm_vocab)
    data_steps = binarize(spm_dir, work, PAIRS, args.workers)
    settings = {k: v for k, v in vars(args).items() if k not in ("data", "work", "results", "models", "pairs")}
    for model in models:
        path = results_dir / f"{model.name}.json"
        if path.exists():
            if json.loads(path.read_text())["settings"] != settings:
                sys.exit(f"multi30k_multisource.py: error: {path} was trained with other settings "
                         f"(its 'settings' entry); delete it to retrain {model.name}, or use another --work")
            logging.getLogger(__name__).info("%s: results exist (%s), skipped", model.name, path)
            continue
        result = {**run_model(model, args, work, user_dir), "settings": settings}
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(result, indent=2))
        os.replace(tmp, path)
    from multi30k_results import write_results

    run_info = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "machine": this_machine().as_dict(), "command": " ".join(shlex.quote(a) for a in ["examples/multimodal_mt/multi30k_multisource.py",
                                                                 *(sys.argv[1:] if argv is None else argv)]),
                "this_invocation_wall_s": time.time() - start, "sentences": counts,
                "settings": settings,
                "data_commands": [s.shell for s in data_steps]}
    significance = significance_against_text_only(work, sorted(p.stem for p in results_dir.glob("*.json")),
                                                  test_reference(args.data))
    written = write_results(results_dir, Path(args.results), run_info, significance)
    print("\n".join(str(p) for p in written))


if __name__ == "__main__":
    main()
