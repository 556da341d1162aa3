"""Speed of the context models against the sentence-level Transformer, on one generated corpus.

Usage: ``python -m benchmarks.context_speed [--quick] [--size base] [--context-encoder-layers K]
[--json PATH]`` (``--help`` lists the rest).

Method
------
1. Data: documents from ``DocumentGenerator(seed, min_episodes=8, max_episodes=12)``. The
   generator's sentences are short (~5.5 tokens) while real MT sentences are ~20 subword
   tokens (IWSLT17 TED talks); per-sentence costs of a context model (the upper level over N
   slot vectors, the sentences before each window) weigh per sentence, not per token, so
   5-token lines overstate them about 3×. Each line therefore joins ``--sentences-per-line``
   K consecutive generated sentences (default 3: ~17 tokens per line), and a document joins K
   generated documents so that it keeps about 20 lines (N=8 finds 8 previous lines for most
   examples); ``--sentences-per-line 1`` gives the generator's own sentences →
   ``prepare`` (the code of ``fairseq-ctx-prepare-docs``) → ``fairseq-preprocess
   --joined-dictionary`` into a temporary directory, docids copied next to the binarized
   splits (the pipeline of ``examples/context_mt/demo.sh``).
2. Models: built in-process through fairseq's own parser, task and criterion
   (``context_translation``, ``label_smoothed_cross_entropy`` 0.1, fairseq's Adam), with the
   same dimensions for every model: ``transformer`` (``--context-size 0``), ``hce`` and
   ``hmce`` at N=2, ``hmce`` at N = 1, 2, 4, 8 (the N=2 run is shared), and the baselines
   ``ctx_concat`` and ``dct`` against ``hce``/``hmce`` at N=4.
3. Training: ``task.get_batch_iterator`` with a fixed number of sentences per batch and one
   seed. Every model is batched the way its task batches it by default: the sentence-level
   transformer in fairseq's length-sorted order, the context models in document windows
   (``--document-window``, runs of consecutive sentences whose contexts are mostly in the
   same batch; pass ``--document-window 0`` here to give them the length-sorted order too).
   All context settings share the same batches (checked). Batches are collated before timing;
   a timed update is forward + backward (``task.train_step``) + optimizer step. Warm-up updates are excluded. Reported: the median over the timed
   updates of seconds per update and of training words/s (target tokens / seconds).
4. Generation: fairseq's SequenceGenerator (``task.build_generator``, beam 5) through
   ``task.inference_step`` on test batches of the same size, eval mode, ``torch.no_grad()``,
   one warm-up batch excluded. Generation tokens/s = generated tokens of the best hypothesis
   (with ``</s>``, as ``fairseq-generate`` counts them) / seconds, median over the timed
   batches. The models are barely trained and would stop at arbitrary lengths, so every
   model generates with fairseq's ``--match-source-len`` (output length = source length,
   which is close to the reference length in this corpus): all models then decode exactly
   the same number of tokens and tokens/s compares their cost, not when they stop.
   hmce at N=4 is also run with ``--no-context-cache`` (the sentence of every context slot of
   every example encoded on its own, no reuse) on the same batches, to measure what the
   context cache saves; the encoder alone is also timed over the test batches (in order, from
   an empty cache), which shows the saving where the cache acts, without beam search around it.

Targets
-------
- hmce training words/s / transformer training words/s at N=2 >= 0.8;
- hmce seconds per update at N=8 / at N=1 <= 2.0;
- hmce generation tokens/s with / without the context cache at N=4 >= 1.3.
- at N=4, hce and hmce training words/s / ctx_concat's and / dct's > 1 (the thesis' Table 3.4:
  HCE trains ~15% faster than TwC and ~1.9x faster than DCT).

Timings are wall-clock (``time.perf_counter``) with torch's default number of threads, or
with ``--clock cpu`` this process's CPU time (``time.process_time``, summed over its threads),
which other processes on a shared machine distort much less (use it with ``--threads 1``); the
load average is printed because other processes on the machine distort them (medians damp
occasional interruptions, not a busy machine).
"""
import argparse
import itertools
import json
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from fairseq import optim, options, tasks, utils
from fairseq.dataclass.configs import GenerationConfig
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

import fairseq_ctx
from benchmarks.quiet import quiet_libraries
from devtools.arch_matrix import context_arch_options
fairseq_ctx.register()
from fairseq_ctx.context.data.prepare_docs import prepare
from fairseq_ctx.context.demo.synthetic_corpus import DocumentGenerator

USER_DIR = os.path.dirname(os.path.abspath(fairseq_ctx.__file__))
SRC, TGT = "en", "de"
BEAM = 5
TRAIN_RATIO_TARGET = 0.8
SCALING_RATIO_TARGET = 2.0
CACHE_RATIO_TARGET = 1.3
CLOCK = time.perf_counter


@dataclass(frozen=True)
class ModelSize:
    embed: int
    ffn: int
    heads: int
    layers: int

    def fairseq_args(self) -> List[str]:
        args = []
        for side in ("encoder", "decoder"):
            args += [
                f"--{side}-embed-dim", str(self.embed), f"--{side}-ffn-embed-dim", str(self.ffn),
                f"--{side}-attention-heads", str(self.heads), f"--{side}-layers", str(self.layers),
            ]
        return args + ["--share-all-embeddings", "--dropout", "0.1"]


SIZES = {
    "medium": ModelSize(embed=256, ffn=1024, heads=4, layers=3),
    "base": ModelSize(embed=512, ffn=2048, heads=8, layers=6),  # the thesis' Transformer-base
}


@dataclass(frozen=True)
class Setting:
    arch: str
    context_size: int
    context_cache: bool = True

    @property
    def label(self) -> str:
        return f"{self.arch}@N={self.context_size}" + ("" if self.context_cache else " (no cache)")


COMPARISON = [Setting("transformer", 0), Setting("hce", 2), Setting("hmce", 2)]
SCALING = [Setting("hmce", n) for n in (1, 2, 4, 8)]
CACHE = [Setting("hmce", 4), Setting("hmce", 4, context_cache=False)]
BASELINES_N4 = [Setting("ctx_concat", 4), Setting("dct", 4), Setting("hce", 4), Setting("hmce", 4)]


@dataclass
class Measurement:
    arch: str
    context_size: int
    context_cache: bool
    params: int
    context_per_sentence: float
    train_words_per_s: float
    sec_per_update: float
    gen_tokens_per_s: float
    gen_mean_length: float
    encode_sentences_per_s: float


def parse_cli(argv: Optional[Sequence[str]] = None, description: str = __doc__) -> argparse.Namespace:
    """This benchmark's options (also those of the benchmarks that reuse its method)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="smoke check: 1 warm-up + 3 timed updates and 1 timed generation batch per model "
                             "(overrides --warmup-updates, --updates, --gen-batches)")
    parser.add_argument("--size", choices=sorted(SIZES), default="base",
                        help="base: 512 embed, 2048 FFN, 8 heads, 6+6 layers (the thesis' size and hmce's "
                             "default); medium: 256, 1024, 4, 3+3 (quicker, not the thesis setting)")
    parser.add_argument("--sentences-per-line", type=int, default=3,
                        help="generated sentences joined per corpus line (3: ~17 tokens, realistic MT lengths; "
                             "1: the generator's ~5.5-token sentences)")
    parser.add_argument("--context-encoder-layers", type=int, default=None,
                        help="passed to hce/hmce (default: not passed, i.e. the model default)")
    parser.add_argument("--document-window", type=int, default=None,
                        help="passed to the context models' task (default: not passed, i.e. the task default)")
    parser.add_argument("--batch-size", type=int, default=128,
                        help="lines per batch, training and generation (128: ~2200 tokens)")
    parser.add_argument("--warmup-updates", type=int, default=2, help="untimed updates before timing")
    parser.add_argument("--updates", type=int, default=10, help="timed updates per model")
    parser.add_argument("--gen-batches", type=int, default=3, help="timed generation batches per model")
    parser.add_argument("--train-sentences", type=int, default=3000, help="at least this many training lines")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall-clock time, or this process's CPU time (robust on a busy shared machine)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's default)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", metavar="PATH", help="also write every number to this JSON file")
    args = parser.parse_args(argv)
    if args.quick:
        args.warmup_updates, args.updates, args.gen_batches = 1, 3, 1
    for name in ("batch_size", "updates", "gen_batches", "train_sentences", "sentences_per_line"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup_updates < 0:
        parser.error("--warmup-updates must be >= 0")
    layers = SIZES[args.size].layers
    if args.context_encoder_layers is not None and not 0 <= args.context_encoder_layers <= layers:
        parser.error(f"--context-encoder-layers must be between 0 and the {layers} encoder layers of --size {args.size}"
                     f" (the context encoder shares the source encoder's layers)")
    return args


def joined_document(generator: DocumentGenerator, per_line: int) -> List[Tuple[str, str]]:
    """``per_line`` generated documents as one, each line joining ``per_line`` consecutive
    generated sentence pairs (realistic line lengths, about as many lines as one document)."""
    sentences = [pair for _ in range(per_line) for pair in generator.document()]
    return [
        tuple(" ".join(pair[side] for pair in sentences[start:start + per_line]) for side in (0, 1))
        for start in range(0, len(sentences), per_line)
    ]


def write_documents(prefix: Path, seed: int, min_sentences: int, per_line: int) -> Dict[str, int]:
    """Blank-line-separated documents in ``prefix.{SRC,TGT}``; returns document/line counts."""
    generator = DocumentGenerator(seed, min_episodes=8, max_episodes=12)
    docs: List[list] = []
    while sum(len(doc) for doc in docs) < min_sentences:
        docs.append(joined_document(generator, per_line))
    prefix.parent.mkdir(parents=True, exist_ok=True)
    for lang, column in ((SRC, 0), (TGT, 1)):
        text = "\n\n".join("\n".join(sentence[column] for sentence in doc) for doc in docs)
        Path(f"{prefix}.{lang}").write_text(text + "\n", encoding="utf-8")
    return {"documents": len(docs), "sentences": sum(len(doc) for doc in docs),
            "tokens": sum(len(pair[0].split()) + 1 for doc in docs for pair in doc)}


def build_data(root: Path, seed: int, train_sentences: int, test_sentences: int,
               per_line: int) -> Dict[str, Dict[str, int]]:
    """Generated documents → prepare → fairseq-preprocess (in this process) into ``root/data-bin`` (+ docids)."""
    from fairseq_cli import preprocess

    raw, prep, data_bin = root / "raw", root / "prep", root / "data-bin"
    counts = {
        "train": write_documents(raw / "train", seed, train_sentences, per_line),
        "test": write_documents(raw / "test", seed + 1, test_sentences, per_line),
    }
    for split in counts:
        prepare(str(raw / f"{split}.{SRC}"), str(raw / f"{split}.{TGT}"), str(prep / split), SRC, TGT, "doc")
    preprocess.main(options.get_preprocessing_parser().parse_args([
        "--source-lang", SRC, "--target-lang", TGT, "--trainpref", str(prep / "train"), "--testpref",
        str(prep / "test"), "--destdir", str(data_bin), "--joined-dictionary", "--workers", "2"]))
    for split in counts:
        shutil.copy(prep / f"{split}.docids", data_bin / f"{split}.docids")
    return counts


def fairseq_cfg(data_bin: Path, setting: Setting, args: argparse.Namespace):
    input_args = [
        str(data_bin), "--user-dir", USER_DIR, "--task", "context_translation",
        "--context-size", str(setting.context_size), "--arch", setting.arch, "--cpu", "--seed", str(args.seed),
        *SIZES[args.size].fairseq_args(),
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
        "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--lr", "5e-4",
        "--batch-size", str(args.batch_size),
    ]
    both_tools, training = context_arch_options(setting.arch, setting.context_size)
    input_args += both_tools + training
    if setting.arch in ("hce", "hmce") and args.context_encoder_layers is not None:
        input_args += ["--context-encoder-layers", str(args.context_encoder_layers)]
    if args.document_window is not None:
        input_args += ["--document-window", str(args.document_window)]
    if not setting.context_cache:
        input_args.append("--no-context-cache")
    parser = options.get_training_parser()
    return convert_namespace_to_omegaconf(options.parse_args_and_arch(parser, input_args=input_args))


def fixed_batches(task, model, cfg, split: str, count: int, shuffle: bool) -> List[dict]:
    """The first ``count`` collated batches of ``cfg.dataset.batch_size`` sentences of ``split``."""
    iterator = task.get_batch_iterator(
        dataset=task.dataset(split),
        max_tokens=cfg.dataset.max_tokens,
        max_sentences=cfg.dataset.batch_size,
        max_positions=utils.resolve_max_positions(task.max_positions(), model.max_positions()),
        seed=cfg.common.seed,
    ).next_epoch_itr(shuffle=shuffle)
    batches = list(itertools.islice(iterator, count))
    if len(batches) < count:
        raise SystemExit(f"split '{split}' has only {len(batches)} batches, {count} needed: use more sentences")
    return batches


def context_per_sentence(batches: Sequence[dict]) -> float:
    """Mean number of filled context slots per example (0 for sentence-level batches)."""
    filled = sum(int(b["net_input"]["context_index"].ge(0).sum()) for b in batches if "context_index" in b["net_input"])
    return filled / sum(b["nsentences"] for b in batches)


def time_training(task, model, criterion, optimizer, batches: Sequence[dict], warmup: int) -> Dict[str, float]:
    seconds, words_per_s = [], []
    for update_num, sample in enumerate(batches):
        start = CLOCK()
        task.train_step(sample, model, criterion, optimizer, update_num)
        optimizer.step()
        optimizer.zero_grad()
        if update_num >= warmup:
            seconds.append(CLOCK() - start)
            words_per_s.append(sample["ntokens"] / seconds[-1])
    return {"train_words_per_s": statistics.median(words_per_s), "sec_per_update": statistics.median(seconds)}


def time_generation(task, model, batches: Sequence[dict]) -> Dict[str, float]:
    """Beam search over ``batches``; the first one is a warm-up."""
    generator = task.build_generator([model], GenerationConfig(beam=BEAM, match_source_len=True))
    model.eval()
    tokens_per_s, tokens, sentences = [], 0, 0
    with torch.no_grad():
        for number, sample in enumerate(batches):
            start = CLOCK()
            hypos = task.inference_step(generator, [model], sample)
            elapsed = CLOCK() - start
            if number > 0:
                generated = sum(h[0]["tokens"].numel() for h in hypos)
                tokens_per_s.append(generated / elapsed)
                tokens += generated
                sentences += len(hypos)
    return {"gen_tokens_per_s": statistics.median(tokens_per_s), "gen_mean_length": tokens / sentences}


def time_encoding(model, batches: Sequence[dict]) -> Dict[str, float]:
    """The encoder alone (context included) over ``batches`` in order, eval mode, starting from an
    empty context cache; the first batch is a warm-up. Sentences/s, median over the batches."""
    model.eval()
    if hasattr(model.encoder, "context_cache") and model.encoder.context_cache is not None:
        model.encoder.context_cache.clear()
    rates = []
    with torch.no_grad():
        for number, sample in enumerate(batches):
            net_input = {k: v for k, v in sample["net_input"].items() if k != "prev_output_tokens"}
            start = CLOCK()
            model.encoder(**net_input)
            if number > 0:
                rates.append(sample["nsentences"] / (CLOCK() - start))
    return {"encode_sentences_per_s": statistics.median(rates)}


def measure(data_bin: Path, setting: Setting, args: argparse.Namespace,
            reference_ids: Dict[int, List[List[int]]]) -> Measurement:
    """Build one model through fairseq and time it; ``reference_ids`` (filled by the first
    call per context size) guarantees that the settings of one N train on the same batches."""
    cfg = fairseq_cfg(data_bin, setting, args)
    torch.manual_seed(args.seed)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    task.load_dataset("test")
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    optimizer = optim.build_optimizer(cfg.optimizer, list(model.parameters()))
    train = fixed_batches(task, model, cfg, "train", args.warmup_updates + args.updates, shuffle=True)
    ids = [b["id"].tolist() for b in train]
    if reference_ids.setdefault(setting.context_size, ids) != ids:
        raise RuntimeError(f"{setting.label} got different training batches than the other N={setting.context_size} models")
    test = fixed_batches(task, model, cfg, "test", args.gen_batches + 1, shuffle=False)
    return Measurement(
        arch=setting.arch,
        context_size=setting.context_size,
        context_cache=setting.context_cache,
        params=sum(p.numel() for p in model.parameters()),
        context_per_sentence=context_per_sentence(train[args.warmup_updates:]),
        **time_training(task, model, criterion, optimizer, train, args.warmup_updates),
        **time_generation(task, model, test),
        **time_encoding(model, test),
    )


def table(rows: Sequence[Measurement]) -> List[str]:
    lines = [f"{'model':<18}{'N':>3}{'cache':>6}{'params':>10}{'ctx/sent':>10}{'train words/s':>15}"
             f"{'s/update':>10}{'gen tokens/s':>14}{'gen len':>9}{'enc sent/s':>12}"]
    for m in rows:
        lines.append(f"{m.arch:<18}{m.context_size:>3}{'yes' if m.context_cache else 'no':>6}{m.params / 1e6:>9.2f}M{m.context_per_sentence:>10.2f}"
                     f"{m.train_words_per_s:>15.0f}{m.sec_per_update:>10.4f}{m.gen_tokens_per_s:>14.0f}"
                     f"{m.gen_mean_length:>9.1f}{m.encode_sentences_per_s:>12.0f}")
    return lines


@dataclass
class Ratio:
    description: str
    value: float
    target: Optional[str]
    passed: Optional[bool]

    def line(self) -> str:
        if self.target is None:
            return f"{self.description:<50}{self.value:>7.3f}  (no target: what the cache saves where it acts)"
        return f"{self.description:<50}{self.value:>7.3f}  (target {self.target})  {'PASS' if self.passed else 'FAIL'}"


def target_ratios(results: Dict[Setting, Measurement]) -> List[Ratio]:
    train = results[Setting("hmce", 2)].train_words_per_s / results[Setting("transformer", 0)].train_words_per_s
    scaling = results[Setting("hmce", 8)].sec_per_update / results[Setting("hmce", 1)].sec_per_update
    cache = results[CACHE[0]].gen_tokens_per_s / results[CACHE[1]].gen_tokens_per_s
    encoder_cache = results[CACHE[0]].encode_sentences_per_s / results[CACHE[1]].encode_sentences_per_s
    ratios = [
        Ratio("hmce / transformer training words/s at N=2", train, f">= {TRAIN_RATIO_TARGET}",
              train >= TRAIN_RATIO_TARGET),
        Ratio("hmce seconds per update N=8 / N=1", scaling, f"<= {SCALING_RATIO_TARGET}",
              scaling <= SCALING_RATIO_TARGET),
        Ratio("hmce generation tokens/s cache / no cache at N=4", cache, f">= {CACHE_RATIO_TARGET}",
              cache >= CACHE_RATIO_TARGET),
        Ratio("hmce encoder alone sentences/s cache / no cache N=4", encoder_cache, None, None),
    ]
    for ours in ("hce", "hmce"):
        for baseline in ("ctx_concat", "dct"):
            ratio = results[Setting(ours, 4)].train_words_per_s / results[Setting(baseline, 4)].train_words_per_s
            ratios.append(Ratio(f"{ours} / {baseline} training words/s at N=4", ratio, "> 1", ratio > 1))
    return ratios


def report(args: argparse.Namespace, counts: Dict[str, Dict[str, int]], results: Dict[Setting, Measurement],
           ratios: Sequence[Ratio], load: Sequence[float], seconds: float) -> List[str]:
    size = SIZES[args.size]
    ctx_layers = "model default" if args.context_encoder_layers is None else args.context_encoder_layers
    return [
        f"data: {counts['train']['sentences']} training lines in {counts['train']['documents']} documents, "
        f"{counts['test']['sentences']} test lines (seed {args.seed}), {args.sentences_per_line} generated "
        f"sentence(s) per line, {counts['train']['tokens'] / counts['train']['sentences']:.1f} tokens per line",
        f"model: {args.size} (embed {size.embed}, FFN {size.ffn}, {size.heads} heads, {size.layers}+{size.layers} "
        f"layers, shared embeddings); hce/hmce context encoder layers: {ctx_layers}",
        f"training: {args.batch_size} lines/batch; transformer length-sorted, context models by document "
        f"window ({'task default' if args.document_window is None else args.document_window}); "
        f"{args.warmup_updates} warm-up + {args.updates} timed updates",
        f"generation: beam {BEAM}, output length = source length, 1 warm-up + {args.gen_batches} timed batches",
        f"timings: medians of {args.clock} time; torch threads {torch.get_num_threads()}; load average (1 min) before/after "
        f"{load[0]:.2f}/{load[1]:.2f} on {os.cpu_count()} CPUs",
        "",
        "1. sentence-level vs context models (N=2)",
        *table([results[s] for s in COMPARISON]),
        "",
        "2. hmce, context size N",
        *table([results[s] for s in SCALING]),
        "",
        "3. hmce at N=4 with and without the context cache (same batches)",
        *table([results[s] for s in CACHE]),
        "",
        "4. context baselines vs hce/hmce (N=4)",
        *table([results[s] for s in BASELINES_N4]),
        "",
        "5. targets",
        *(ratio.line() for ratio in ratios),
        "",
        f"total time: {seconds:.0f} s",
    ]


def write_json(path: str, args: argparse.Namespace, counts: Dict[str, Dict[str, int]],
               results: Dict[Setting, Measurement], ratios: Sequence[Ratio], load: Sequence[float],
               seconds: float) -> None:
    summary = {
        "settings": {k: v for k, v in vars(args).items() if k != "json"},
        "model_size": asdict(SIZES[args.size]),
        "torch_threads": torch.get_num_threads(),
        "load_average_before_after": list(load),
        "data": counts,
        "results": [asdict(m) for m in results.values()],
        "ratios": [asdict(r) for r in ratios],
        "total_seconds": seconds,
    }
    Path(path).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_cli(argv)
    quiet_libraries()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="context_speed_") as root:
        counts = build_data(Path(root), args.seed, args.train_sentences, (args.gen_batches + 1) * args.batch_size,
                            args.sentences_per_line)
        reference_ids: Dict[int, List[List[int]]] = {}
        results = {s: measure(Path(root) / "data-bin", s, args, reference_ids)
                   for s in dict.fromkeys(COMPARISON + SCALING + CACHE + BASELINES_N4)}
    ratios = target_ratios(results)
    load, seconds = (load_before, os.getloadavg()[0]), time.perf_counter() - started
    print("\n".join(report(args, counts, results, ratios, load, seconds)))
    if args.json:
        write_json(args.json, args, counts, results, ratios, load, seconds)


if __name__ == "__main__":
    main()
