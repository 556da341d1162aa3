"""Training and generation speed of ``--amp`` (bfloat16 mixed precision on the CPU) against float32,
for every family's models, in one run.

Each model is built twice from the same seed through fairseq's own parser, task, criterion and
``Trainer`` — once as ``fairseq-train --cpu`` and once as ``fairseq-train --cpu --amp`` builds it —
and both take turns on the same collated training batches (fp32 update, --amp update, fp32 update,
…), so a change in the machine's load affects both alike. A timed update is fairseq's
``Trainer.train_step``: forward, backward, gradient clipping and the Adam step. Reported: training
target words/s of each (median over the timed updates) and the ratio --amp / fp32, with PASS/FAIL
against the targets (Transformer-based models: >= 1.8 at 256 dims, >= 2.2 at 512 dims; the
recurrent ones report their ratio). For the translation models, beam search (beam 5, fairseq's
SequenceGenerator through ``task.inference_step``, ``--match-source-len`` so both precisions decode
the same number of tokens) is timed in float32 and under bfloat16 autocast. The context models'
speeds are also divided by the transformer's of the same dims in the same run (hmce's target:
>= 0.9 of the transformer's training words/s in both precisions).

Data, generated: context documents (three generated sentences per line, ~17 tokens), multimodal
sentences with 196 image regions of 2048 dimensions (a ResNet's last convolutional layer), and
the multilingual sentences of the embedding tests (three per line). Model sizes: ``--dims 256``
(FFN 1024, 4 heads, 3+3 layers; RNNs 256 units), ``--dims 512`` (the Transformer-base: FFN 2048,
8 heads, 6+6 layers; RNNs 512 units) and ``--dims 128`` (the Transformer-tiny of the Multi30k
recipe, Wu et al. (2021): FFN 256, 4 heads, 4+4 layers; no target, it says whether --amp pays there).

Use ``--clock cpu --threads 1`` on a shared machine (this process's CPU time of one thread, which
other processes distort much less than wall time). ``--results DIR`` writes
``cpu_mixed_precision.{md,json}`` with the date, machine, command and every number.

    python -m benchmarks.cpu_mixed_precision --clock cpu --threads 1 [--dims 256,512] [--models hmce,tmde]

``--translation-data DIR`` times the transformer on a real binarized pair instead (its vocabulary
sizes the output layer and the loss, which at 128 dims cost as much as the layers):

    python -m benchmarks.cpu_mixed_precision --dims 128 --models transformer --translation-data WORK/data-bin \
        --max-tokens 7000 --gen-batches 0
"""
import argparse
import os
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import torch
from fairseq import options, tasks, utils
from fairseq.dataclass.configs import GenerationConfig
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.trainer import Trainer

import fairseq_ctx
fairseq_ctx.register()
from benchmarks.context_speed import build_data as build_context_data
from benchmarks.embedding_speed import join_lines
from benchmarks.quiet import quiet_libraries
from devtools.machine_facts import this_machine, utc_now
from devtools.results_file import script_command, write_results
from fairseq_ctx.embedding.data.multilingual_binarize import binarize_multilingual
from fairseq_ctx.embedding.demo.multilingual_corpus import MultilingualSizes, write_multilingual_corpus
from fairseq_ctx.multisource.demo.multimodal_binarize import binarize_multimodal_corpus
from fairseq_ctx.multisource.demo.multimodal_corpus import MultimodalCorpusSizes

USER_DIR = os.path.dirname(os.path.abspath(fairseq_ctx.__file__))
CLOCKS: Dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}
TARGETS = {256: 1.8, 512: 2.2}  # --amp / fp32 training words/s, Transformer-based models
CONTEXT_MODELS = ("hmce", "hce", "ctx_concat")  # compared with the transformer of the same dims in the same run
HMCE_TARGET = 0.9  # hmce / transformer training words/s, in float32 and under --amp
SIZES = {128: (4, 4, 2), 256: (4, 3, 4), 512: (8, 6, 4)}  # dims -> heads, layers, FFN / dims
EMBEDDING_PAIRS = "xa-pa,xa-pb,pa-pb,pb-pa"
BEAM = 5
GEN_SENTENCES = 16  # sentences per beam-search batch
MULTIMODAL_BATCH = 48  # sentences per training batch of the multimodal models (each with 196 x 2048 features)


@dataclass(frozen=True)
class Model:
    """One benchmarked model: its task's data, arch and options, and whether it is recurrent."""

    name: str
    data: str  # context | multimodal | embedding | translation (--translation-data)
    options: Sequence[str]
    recurrent: bool = False
    batch_sentences: Optional[int] = None  # sentences per training batch (default: --max-tokens alone)

    def translates(self) -> bool:
        return self.data != "embedding"


def transformer_size(dims: int, prefix_sides: Sequence[str] = ("encoder", "decoder")) -> List[str]:
    heads, layers, ffn = SIZES[dims]
    return [item for side in prefix_sides for item in (
        f"--{side}-embed-dim", str(dims), f"--{side}-ffn-embed-dim", str(ffn * dims),
        f"--{side}-attention-heads", str(heads), f"--{side}-layers", str(layers))]


def rnn_size(dims: int) -> List[str]:
    return ["--encoder-embed-dim", str(dims), "--decoder-embed-dim", str(dims), "--encoder-hidden-size", str(dims)]


def models(dims: int) -> List[Model]:
    context = ["--task", "context_translation", "--share-all-embeddings", *transformer_size(dims)]
    multimodal = ["--task", "multimodal_translation", "-s", "en", "-t", "de"]
    embedding = ["--task", "multilingual_embedding", "--lang-pairs", EMBEDDING_PAIRS]
    return [
        Model("transformer", "context", [*context, "--arch", "transformer", "--context-size", "0"]),
        Model("hmce", "context", [*context, "--arch", "hmce", "--context-size", "2"]),
        Model("hce", "context", [*context, "--arch", "hce", "--context-size", "2"]),
        Model("ctx_concat", "context", [*context, "--arch", "ctx_concat", "--context-size", "2"]),
        Model("hierarchical_attention_decoder", "multimodal",
              [*multimodal, "--arch", "hierarchical_attention_decoder", "--share-all-embeddings", "--feature-inputs", "img",
               "--combination", "hierarchical", *transformer_size(dims)], batch_sentences=MULTIMODAL_BATCH),
        Model("tmde", "embedding", [*embedding, "--arch", "tmde", "--criterion", "label_smoothed_cross_entropy",
                                    *transformer_size(dims, ("encoder",))]),
        Model("ct_mde", "embedding", [*embedding, "--arch", "ct_mde", *transformer_size(dims, ("encoder",))]),
        Model("laser_bilstm", "embedding",
              [*embedding, "--arch", "laser_bilstm", "--criterion", "label_smoothed_cross_entropy",
               *rnn_size(dims), "--decoder-hidden-size", str(dims), "--decoder-lang-embed-dim", "32"], recurrent=True),
        Model("multisource_rnn", "multimodal",
              [*multimodal, "--arch", "multisource_rnn", "--feature-inputs", "img", "--combination", "hierarchical",
               *rnn_size(dims), "--decoder-hidden-size", str(2 * dims), "--attention-dim", str(dims)], recurrent=True,
              batch_sentences=MULTIMODAL_BATCH),
    ]


def generated_data(root: Path, kind: str) -> Path:
    """A data-bin of generated sentences of realistic length for ``kind``."""
    if kind == "context":
        build_context_data(root, seed=1, train_sentences=2500, test_sentences=100, per_line=3)
        return root / "data-bin"
    if kind == "multimodal":
        return binarize_multimodal_corpus(
            root, MultimodalCorpusSizes(train=10 * MULTIMODAL_BATCH, valid=8, test=48, regions=196, feature_dim=2048))
    raw = root / "raw"
    write_multilingual_corpus(str(raw), MultilingualSizes(600, 10, 20), seed=3)
    join_lines(raw, 3)
    return binarize_multilingual(raw, root / "data-bin", EMBEDDING_PAIRS.split(","), ["pa", "pb", "xa"])


def trainer(data: Path, model: Model, amp: bool, max_tokens: int) -> Trainer:
    argv = [str(data), "--user-dir", USER_DIR, *model.options, "--cpu", "--seed", "1", "--dropout", "0.1",
            "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--lr", "1e-4", "--clip-norm", "1.0",
            "--max-tokens", str(max_tokens), *(["--amp"] if amp else [])]
    if "--criterion" not in model.options and model.data != "embedding":
        argv += ["--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1"]
    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), input_args=argv))
    utils.set_torch_seed(1)
    task = tasks.setup_task(cfg.task)
    return Trainer(cfg, task, task.build_model(cfg.model), task.build_criterion(cfg.criterion))


def batches(fp32: Trainer, split: str, count: int, max_sentences: Optional[int] = None) -> List[dict]:
    task = fp32.task
    task.load_dataset(split)
    iterator = task.get_batch_iterator(
        dataset=task.dataset(split), max_tokens=fp32.cfg.dataset.max_tokens, max_sentences=max_sentences,
        max_positions=utils.resolve_max_positions(task.max_positions(), fp32.model.max_positions()), seed=1,
    ).next_epoch_itr(shuffle=split == "train")
    collated = [sample for sample, _ in zip(iterator, range(count))]
    if len(collated) < count:
        raise SystemExit(f"the {split} split gives {len(collated)} batches, {count} needed: lower --warmup / --updates "
                         f"or --max-tokens")
    return collated


def time_training(pair: Dict[str, Trainer], samples: Sequence[dict], warmup: int,
                  clock: Callable[[], float]) -> Dict[str, float]:
    """Median training words/s of each trainer; they take turns on every batch."""
    rates: Dict[str, List[float]] = {name: [] for name in pair}
    for index, sample in enumerate(samples):
        for name, timed in pair.items():
            start = clock()
            timed.train_step([sample])
            if index >= warmup:
                rates[name].append(sample["ntokens"] / (clock() - start))
    return {name: statistics.median(values) for name, values in rates.items()}


def time_generation(fp32: Trainer, samples: Sequence[dict], clock: Callable[[], float]) -> Dict[str, float]:
    """Beam-search tokens/s of the fp32 model in float32 and under bfloat16 autocast (turn by turn;
    the first batch of each is a warm-up)."""
    task, model = fp32.task, fp32.model
    generator = task.build_generator([model], GenerationConfig(beam=BEAM, match_source_len=True))
    model.eval()
    rates: Dict[str, List[float]] = {"fp32": [], "amp": []}
    with torch.no_grad():
        for index, sample in enumerate(samples):
            for name in rates:
                start = clock()
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=name == "amp"):
                    hypotheses = task.inference_step(generator, [model], sample)
                if index > 0:
                    rates[name].append(sum(h[0]["tokens"].numel() for h in hypotheses) / (clock() - start))
    return {name: statistics.median(values) for name, values in rates.items()}


def matmul_ceiling(dims: int, clock: Callable[[], float], tokens: int = 3000, repeats: int = 5) -> float:
    """bfloat16 / float32 speed of the products a Transformer layer of ``dims`` trains with: the
    projections (tokens × dims × dims), the FFN (tokens × dims × ffn) and their weight gradients
    (contracting over the tokens). No model step can gain more than its products do."""
    ffn = SIZES[dims][2] * dims
    shapes = [((tokens, dims), (dims, dims)), ((tokens, dims), (dims, ffn)), ((tokens, ffn), (ffn, dims)),
              ((dims, tokens), (tokens, dims)), ((ffn, tokens), (tokens, dims))]
    seconds = {}
    for dtype in (torch.float32, torch.bfloat16):
        pairs = [(torch.randn(*a, dtype=dtype), torch.randn(*b, dtype=dtype)) for a, b in shapes]
        for left, right in pairs:
            left @ right
        start = clock()
        for _ in range(repeats):
            for left, right in pairs:
                left @ right
        seconds[dtype] = clock() - start
    return seconds[torch.float32] / seconds[torch.bfloat16]


@dataclass
class Row:
    model: str
    dims: int
    recurrent: bool
    train_wps_fp32: float
    train_wps_amp: float
    gen_tps_fp32: Optional[float] = None
    gen_tps_amp: Optional[float] = None

    @property
    def train_ratio(self) -> float:
        return self.train_wps_amp / self.train_wps_fp32

    @property
    def gen_ratio(self) -> Optional[float]:
        return None if self.gen_tps_fp32 is None else self.gen_tps_amp / self.gen_tps_fp32

    def verdict(self) -> str:
        if self.recurrent:
            return "reported (recurrent)"
        if self.dims not in TARGETS:
            return "reported (no target at this size)"
        return "PASS" if self.train_ratio >= TARGETS[self.dims] else "FAIL"


def measure(model: Model, data: Path, dims: int, args: argparse.Namespace, clock: Callable[[], float]) -> Row:
    pair = {"fp32": trainer(data, model, False, args.max_tokens), "amp": trainer(data, model, True, args.max_tokens)}
    samples = batches(pair["fp32"], "train", args.warmup + args.updates, model.batch_sentences)
    train = time_training(pair, samples, args.warmup, clock)
    row = Row(model.name, dims, model.recurrent, train["fp32"], train["amp"])
    if model.translates() and args.gen_batches:
        generation = time_generation(pair["fp32"], batches(pair["fp32"], "test", args.gen_batches + 1, GEN_SENTENCES), clock)
        row.gen_tps_fp32, row.gen_tps_amp = generation["fp32"], generation["amp"]
    return row


def markdown(rows: Sequence[Row], header: Dict[str, str], ceilings: Dict[int, float]) -> str:
    lines = ["# `--amp` (bfloat16 mixed precision) against float32 on the CPU", ""]
    lines += [f"- {key}: {value}" for key, value in header.items()]
    lines += [f"- matrix products alone, bfloat16 / float32 (the ceiling of any model's ratio): "
              + ", ".join(f"{ratio:.2f} at {dims} dims" for dims, ratio in ceilings.items())]
    lines += ["", "| model | dims | train words/s fp32 | --amp | ratio | target | generation tokens/s fp32 | bf16 | ratio |",
              "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        target = "—" if row.recurrent or row.dims not in TARGETS else f"≥ {TARGETS[row.dims]}: {row.verdict()}"
        gen = ("—", "—", "—") if row.gen_ratio is None else (
            f"{row.gen_tps_fp32:.0f}", f"{row.gen_tps_amp:.0f}", f"{row.gen_ratio:.2f}")
        lines.append(f"| {row.model} | {row.dims} | {row.train_wps_fp32:.0f} | {row.train_wps_amp:.0f} | "
                     f"{row.train_ratio:.2f} | {target} | {' | '.join(gen)} |")
    return "\n".join(lines) + "\n"


def against_transformer(rows: Sequence[Row]) -> List[Dict[str, Optional[float]]]:
    """Each context model's speeds divided by the transformer's of the same dims, both measured in
    this run (per target word: a context model's batches carry fewer target words per token)."""
    base = {row.dims: row for row in rows if row.model == "transformer"}
    ratios = []
    for row in rows:
        if row.model not in CONTEXT_MODELS or row.dims not in base:
            continue
        reference = base[row.dims]
        ratios.append({"model": row.model, "dims": row.dims, **{
            key: None if getattr(row, field) is None or getattr(reference, field) is None
            else getattr(row, field) / getattr(reference, field)
            for key, field in (("train_fp32", "train_wps_fp32"), ("train_amp", "train_wps_amp"),
                               ("gen_fp32", "gen_tps_fp32"), ("gen_amp", "gen_tps_amp"))}})
    return ratios


def against_transformer_markdown(ratios: Sequence[Dict[str, Optional[float]]]) -> List[str]:
    if not ratios:
        return []
    lines = ["", "Context models against the transformer of the same dims (this run's words/s divided; hmce's target: "
             f"≥ {HMCE_TARGET} in training, float32 and --amp):", "",
             "| model | dims | train fp32 | train --amp | generation fp32 | generation bf16 | target |",
             "|---|---|---|---|---|---|---|"]
    for ratio in ratios:
        cells = ["—" if ratio[key] is None else f"{ratio[key]:.2f}" for key in ("train_fp32", "train_amp", "gen_fp32",
                                                                                 "gen_amp")]
        target = "—" if ratio["model"] != "hmce" else (
            "PASS" if min(ratio["train_fp32"], ratio["train_amp"]) >= HMCE_TARGET else "FAIL")
        lines.append(f"| {ratio['model']} | {ratio['dims']} | {' | '.join(cells)} | {target} |")
    return lines


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dims", default="256,512",
                        help="model sizes, of 128 (Transformer-tiny of the Multi30k recipe: FFN 256, 4 heads, 4+4 "
                             "layers; no target, it tells whether --amp pays at that size), 256 and 512")
    parser.add_argument("--models", default="", help="comma-separated subset of the models (default: all)")
    parser.add_argument("--max-tokens", type=int, default=3000, help="tokens per training batch")
    parser.add_argument("--warmup", type=int, default=2, help="untimed updates per precision")
    parser.add_argument("--updates", type=int, default=6, help="timed updates per precision")
    parser.add_argument("--gen-batches", type=int, default=2, help="timed beam-search batches (0: no generation)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--results", help="directory for cpu_mixed_precision.{md,json}")
    parser.add_argument("--translation-data", metavar="DIR",
                        help="time the transformer on this binarized language pair (fairseq-preprocess output, "
                             "e.g. the Multi30k recipe's data-bin: its real vocabulary sizes the output layer, which "
                             "decides much of a small model's step) instead of generated context data")
    parser.add_argument("--pair", default="en-de", help="with --translation-data: its source-target pair")
    args = parser.parse_args(argv)
    args.dims = [int(d) for d in args.dims.split(",") if d]
    if not args.dims or any(d not in SIZES for d in args.dims):
        parser.error(f"--dims: choose from {','.join(map(str, SIZES))}")
    known = [m.name for m in models(256)]
    args.models = [m for m in args.models.split(",") if m] or known
    unknown = sorted(set(args.models) - set(known))
    if unknown:
        parser.error(f"--models: unknown {','.join(unknown)}; choose from {','.join(known)}")
    return args


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    quiet_libraries()
    torch.set_num_threads(args.threads)
    clock = CLOCKS[args.clock]
    start = time.time()
    rows: List[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        data: Dict[str, Path] = {}
        for dims in args.dims:
            for model in models(dims):
                if model.name not in args.models:
                    continue
                if args.translation_data and model.name == "transformer":
                    src, tgt = args.pair.split("-")
                    model = Model(model.name, "translation", ["--task", "translation", "-s", src, "-t", tgt,
                                                               "--share-all-embeddings", *transformer_size(dims),
                                                               "--arch", "transformer"])
                    data["translation"] = Path(args.translation_data)
                if model.data not in data:
                    data[model.data] = generated_data(Path(tmp) / model.data, model.data)
                rows.append(measure(model, data[model.data], dims, args, clock))
                print(markdown(rows[-1:], {}, {}).splitlines()[-1], flush=True)
    header = {
        "date": utc_now(),
        "machine": this_machine().describe(),
        "precision": "float32 vs --amp (bfloat16 autocast, float32 weights, gradients, optimizer and losses)",
        "clock": f"{args.clock} ({'process CPU time' if args.clock == 'cpu' else 'wall time'}), {args.threads} thread(s)",
        "updates": f"{args.warmup} untimed + {args.updates} timed per precision, turn by turn; "
                   f"{args.gen_batches} timed beam-search batches",
        "wall time": f"{time.time() - start:.0f} s",
        "command": script_command("benchmarks/cpu_mixed_precision.py", argv),
    }
    ceilings = {dims: matmul_ceiling(dims, clock) for dims in args.dims}
    ratios = against_transformer(rows)
    text = markdown(rows, header, ceilings) + "".join(f"{line}\n" for line in against_transformer_markdown(ratios))
    print(text)
    write_results(args.results, "cpu_mixed_precision", text, {
        **header, "matmul_ceiling": ceilings, "against_transformer": ratios,
        "rows": [{**asdict(r), "train_ratio": r.train_ratio, "gen_ratio": r.gen_ratio} for r in rows]})


if __name__ == "__main__":
    main()
