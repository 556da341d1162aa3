"""The GPU check of the package, in one run of at most 8 minutes on one GPU: half-precision training
of every registered arch, decoding on the GPU with target context, and the speed of the context and
multimodal models against their sentence-level and text-only baselines.

Everything runs in this process through the stock entry points (``fairseq_cli.train``,
``fairseq_cli.generate``, ``fairseq_cli.interactive``, ``fairseq-ctx-translate-doc``'s ``main`` and
the hub) on corpora generated under ``--work``, where each run's log is kept (``WORK/logs``).

1. Training. Every arch fairseq_ctx registers (``arch_matrix.plugin_archs()``) trains 50 updates
   with the tiny sizes and task options of ``devtools/arch_matrix.py`` (the test suite's
   production matrix) in float32, with ``--fp16`` and with ``--amp``, from the same seed. The
   per-update losses come from the ``--log-format json --log-interval 1`` log. With W = updates / 5
   (10 of 50), a run passes when
   - it logs a loss for every update and every loss is finite;
   - the loss falls: the mean of the last W losses (the final loss) is below the mean of the first W;
   - a half-precision run's final loss is within 5 % (relative) of the float32 run's.
   Why 5 %: bfloat16 ``--amp`` on the CPU ends within 0.03 % of float32 on every arch (measured, 50
   updates), so rounding alone moves the final loss far less; but the loss scaling of ``--fp16`` and
   of CUDA ``--amp`` skips a batch whose gradients overflow, after which every update trains on the
   batch after the one float32 trained on, while the loss still falls 0.3–1.4 % per update around
   update 45 (float32, measured on the CPU). 5 % leaves room for a few such skips; a run that learns
   markedly worse in half precision falls outside it (the final loss of a float32 run is 11–34 %
   below its first).
2. Decoding. hmce trained 50 updates with ``--fp16``, ``--context-size 1 --target-context-size 1``,
   translates the generated test documents, beam 2 and fairseq's length limit, in float32 on the GPU, with
   ``fairseq-generate`` (binarized split), ``fairseq-interactive`` (raw text, a blank line between
   documents), ``fairseq-ctx-translate-doc`` and the hub (``fairseq_ctx.context.hub``). A forward
   pre-hook on every module of every model loaded records the device of each tensor the module is
   given (positional and keyword arguments, inside lists, tuples and dicts). A path passes when its
   model is on the GPU, every tensor given to every module is on the model's device, every
   sentence gets a non-empty translation, and the translations equal fairseq-generate's: with
   target context each path reads the model's own previous translations, and docs/inference.md
   says that they all equal decoding one sentence at a time.
3. Speed. Training target words/s (fairseq's ``wps``, median over updates 11–30 of 30) with
   ``--fp16`` at the Transformer-base size (512 dims, FFN 2048, 8 heads, 6+6 layers): hmce
   (``--context-size 2``) against the sentence-level transformer on generated documents of
   ~17-token lines, and ``hierarchical_attention_decoder`` reading 196 image regions of 2048 dims
   against the same arch reading the text only. The ratios are printed and recorded (no
   threshold); a run that fails counts as a failure.

The results (date, GPU, torch/CUDA versions, command, a row per arch and precision, per decoding
path and per timed pair, wall time of each part) are printed and appended to ``--results``
(default docs/gpu-checks.md); the exit status is 1 when any check failed.

``--dry-run`` runs the same flow on the CPU (``--cpu``): float32 and ``--amp`` (bfloat16 mixed
precision on the CPU) only, since fairseq's ``--fp16`` needs CUDA; 10 updates per arch (W = 2), the
decoding model trained 30 updates in float32, tiny timing runs (4 updates, the tiny model size) on
small corpora with the same 196×2048 image features. It writes nothing into the repository unless
``--results`` is given. On two CPU cores every arch takes about a minute (two to three on a busy
machine), ``--archs hmce,tmde`` about half of that.

    python -m benchmarks.gpu_fp16_check --results gpu-check.md     # on a GPU, every arch
    python -m benchmarks.gpu_fp16_check --dry-run --archs hmce,tmde
"""
import argparse
import functools
import math
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple


import torch

from benchmarks.device_watch import DeviceWatch
from devtools.in_process_tools import ToolFailed, quiet_console, run_tool, tool_session
from devtools.arch_matrix import (
    EMBEDDING_PAIRS, TASK_FIXTURES, TINY_MODEL, USER_DIR, per_update, plugin_archs, task_of, train_args,
)
from devtools.results_file import script_command
from devtools.machine_facts import this_machine, utc_now
from fairseq_ctx.context.demo.demo_binarize import binarize_context_corpus
from fairseq_ctx.context.demo.synthetic_corpus import CorpusSizes
from fairseq_ctx.embedding.data.multilingual_binarize import binarize_multilingual
from fairseq_ctx.embedding.demo.multilingual_corpus import MultilingualSizes, write_multilingual_corpus
from fairseq_ctx.multisource.demo.multimodal_binarize import binarize_multimodal_corpus
from fairseq_ctx.multisource.demo.multimodal_corpus import MultimodalCorpusSizes

ROOT = Path(__file__).resolve().parent.parent
CHECKS = ("training", "decoding", "timing")
PRECISION_FLAGS = {"float32": [], "fp16": ["--fp16"], "amp": ["--amp"]}
LOSS_TOLERANCE = 0.05  # relative: final loss of a half-precision run against the float32 run's
# Every path searches with beam 2 and fairseq's length limit (max_len_a 0, max_len_b 200, also the hub's
# default): with max_len_a > 0 the limit of a batch is a multiple of its longest source, so a translation
# that reaches it would depend on the sentences batched with it, which differ between the paths.
SEARCH_SETTINGS = {"beam": 2, "max_len_a": 0, "max_len_b": 200}
SEARCH = [item for name, value in SEARCH_SETTINGS.items() for item in (f"--{name.replace('_', '-')}", str(value))]
DECODE_BATCH = 3


def transformer_size(dims: int, ffn: int, heads: int, encoder_layers: int, decoder_layers: int) -> Tuple[str, ...]:
    layers = {"encoder": encoder_layers, "decoder": decoder_layers}
    return tuple(item for side in layers for item in (
        f"--{side}-embed-dim", str(dims), f"--{side}-ffn-embed-dim", str(ffn), f"--{side}-attention-heads",
        str(heads), f"--{side}-layers", str(layers[side])))


@dataclass(frozen=True)
class Plan:
    """The sizes of one run: the GPU check, or its dry run on the CPU."""

    device: str  # cuda | cpu
    precisions: Tuple[str, ...]  # float32 first: the others are compared with it
    updates: int
    decode_updates: int
    decode_precision: str
    timing_precision: str
    timing_size: Tuple[str, ...]
    timing_updates: int
    timing_warmup: int  # updates left out of the median
    document_sentences: int
    image_sentences: int
    image_batch: int

    @property
    def device_flags(self) -> List[str]:
        return ["--cpu"] if self.device == "cpu" else ["--distributed-world-size", "1"]


GPU_PLAN = Plan(device="cuda", precisions=("float32", "fp16", "amp"), updates=50, decode_updates=50,
                decode_precision="fp16", timing_precision="fp16", timing_size=transformer_size(512, 2048, 8, 6, 6),
                timing_updates=30, timing_warmup=10, document_sentences=3000, image_sentences=480, image_batch=48)
DRY_PLAN = Plan(device="cpu", precisions=("float32", "amp"), updates=10, decode_updates=30,
                decode_precision="float32", timing_precision="float32", timing_size=transformer_size(32, 64, 4, 2, 1),
                timing_updates=4, timing_warmup=1, document_sentences=150, image_sentences=16, image_batch=8)


class Corpora:
    """The generated data-bins of one run, each built on first use under ``root``: the tiny corpora
    of the test suite's fixtures (``tiny_data``, ``multilingual_data``, ``multimodal_data``, named
    by arch_matrix's TASK_FIXTURES) and the larger ones of the timing runs."""

    def __init__(self, root: Path, plan: Plan) -> None:
        self.root, self.plan = root, plan

    def fixture(self, name: str) -> Path:
        return getattr(self, name)

    @functools.cached_property
    def tiny_data(self) -> Path:
        return binarize_context_corpus(self.root / "context", CorpusSizes(train=40, valid=6, test=6))

    @functools.cached_property
    def multilingual_data(self) -> Path:
        raw = self.root / "multilingual" / "raw"
        write_multilingual_corpus(str(raw), MultilingualSizes(100, 10, 20), seed=3)
        return binarize_multilingual(raw, self.root / "multilingual" / "data-bin", EMBEDDING_PAIRS.split(","),
                                     ["pa", "pb", "xa"])

    @functools.cached_property
    def multimodal_data(self) -> Path:
        return binarize_multimodal_corpus(
            self.root / "multimodal", MultimodalCorpusSizes(train=240, valid=16, test=16, regions=3, feature_dim=8))

    @functools.cached_property
    def documents(self) -> Path:
        """Documents of ~17-token lines (three generated sentences each, as benchmarks/context_speed.py)."""
        from benchmarks.context_speed import build_data as build_document_data  # silences the libraries' loggers when imported

        build_document_data(self.root / "documents", seed=1, train_sentences=self.plan.document_sentences,
                            test_sentences=30, per_line=3)
        return self.root / "documents" / "data-bin"

    @functools.cached_property
    def images(self) -> Path:
        """Sentences with 196 image regions of 2048 dims (a ResNet's last convolutional layer)."""
        return binarize_multimodal_corpus(self.root / "images", MultimodalCorpusSizes(
            train=self.plan.image_sentences, valid=8, test=8, regions=196, feature_dim=2048))


# ---- 1. training -------------------------------------------------------------------------------
def window(updates: int) -> int:
    """How many updates the first and the final loss average over."""
    return max(1, updates // 5)


@dataclass
class TrainingRow:
    """One arch trained in one precision: its per-update losses, or why it has none."""

    arch: str
    precision: str
    updates: int
    losses: Dict[int, float] = field(default_factory=dict)
    error: Optional[str] = None
    problems: List[str] = field(default_factory=list)

    def complete(self) -> bool:
        """Whether a loss was logged for every update."""
        return self.error is None and all(u in self.losses for u in range(1, self.updates + 1))

    def first(self) -> float:
        return statistics.fmean(self.losses[u] for u in range(1, window(self.updates) + 1))

    def final(self) -> float:
        return statistics.fmean(self.losses[u] for u in range(self.updates - window(self.updates) + 1, self.updates + 1))

    def judge(self, reference: Optional["TrainingRow"]) -> List[str]:
        """What breaks the rules of the module docstring (empty when the run passes); ``reference``:
        the float32 run a half-precision run is compared with."""
        if self.error:
            return [self.error]
        if not self.complete():
            missing = [u for u in range(1, self.updates + 1) if u not in self.losses]
            return [f"no loss logged for {len(missing)} of {self.updates} updates (first: update {missing[0]})"]
        non_finite = [u for u, loss in sorted(self.losses.items()) if not math.isfinite(loss)]
        if non_finite:
            return [f"non-finite loss at update {non_finite[0]}"]
        problems = []
        if not self.final() < self.first():
            problems.append(f"loss not falling: final {self.final():.3f} ≥ first {self.first():.3f}")
        if reference is not None:
            if reference.problems:
                problems.append("the float32 run it is compared with failed")
            elif abs(self.final() - reference.final()) > LOSS_TOLERANCE * abs(reference.final()):
                problems.append(f"final loss {self.final():.3f} not within {LOSS_TOLERANCE:.0%} of float32's "
                                f"{reference.final():.3f}")
        return problems


def train_arch(arch: str, precision: str, data: Path, plan: Plan, work: Path, updates: int) -> TrainingRow:
    """fairseq-train for ``updates`` updates with arch_matrix's arguments on ``plan``'s device."""
    save_dir = work / "checkpoints" / f"{arch}-{precision}"
    args = [a for a in train_args(data, task_of(arch), arch, save_dir, updates) if a != "--cpu"]
    log = work / "logs" / f"train-{arch}-{precision}.log"
    row = TrainingRow(arch, precision, updates)
    try:
        run_tool("fairseq-train", [*args, *plan.device_flags, "--no-save", *PRECISION_FLAGS[precision]], log)
        row.losses = per_update(log.read_text(encoding="utf-8"))
    except ToolFailed as failure:
        row.error = str(failure)
    return row


def check_training(archs: Sequence[str], plan: Plan, work: Path, corpora: Corpora, updates: int) -> List[TrainingRow]:
    rows = []
    for arch in archs:
        task = task_of(arch)
        if task not in TASK_FIXTURES:
            rows.append(TrainingRow(arch, "—", updates, problems=[
                f"its task {task} has no tiny data fixture: add one to TASK_FIXTURES (and its model class to "
                f"model_tasks()) in devtools/arch_matrix.py"]))
            continue
        reference = None
        for precision in plan.precisions:
            row = train_arch(arch, precision, corpora.fixture(TASK_FIXTURES[task].data_fixture), plan, work, updates)
            row.problems = row.judge(reference)
            if reference is None:
                reference = row
            rows.append(row)
            say(f"train {arch} {precision}: {verdict(row.problems)}")
    return rows


# ---- 2. decoding -------------------------------------------------------------------------------
@dataclass
class DecodingRow:
    """One decoding path: its translations, what the device watch saw, and what fails."""

    path: str
    translations: List[str] = field(default_factory=list)
    calls: int = 0
    model_devices: List[str] = field(default_factory=list)
    off_device: List[str] = field(default_factory=list)
    error: Optional[str] = None
    problems: List[str] = field(default_factory=list)

    def judge(self, device: str, sentences: int, reference: Optional[List[str]]) -> List[str]:
        """``reference``: fairseq-generate's translations, which the other paths must equal."""
        if self.error:
            return [self.error]
        problems = []
        if self.calls == 0:
            problems.append("no module call was watched")
        if [d.split(":")[0] for d in self.model_devices] != [device]:
            problems.append(f"model on {', '.join(self.model_devices) or 'no device'}, expected {device}")
        if self.off_device:
            problems.append(f"{len(self.off_device)} tensors off the model's device, e.g. {self.off_device[0]}")
        if len(self.translations) != sentences:
            problems.append(f"{len(self.translations)} translations of {sentences} sentences")
        empty = sum(not t.strip() for t in self.translations)
        if empty:
            problems.append(f"{empty} empty translations")
        if reference is not None and self.translations != reference:
            differing = [i for i, (a, b) in enumerate(zip(self.translations, reference)) if a != b]
            problems.append(f"differs from fairseq-generate in {len(differing)} sentences"
                            + (f", first sentence {differing[0]}" if differing else ""))
        return problems


def hypotheses(printed: str) -> List[str]:
    """The ``H-<id>`` lines of fairseq-generate's / fairseq-interactive's output, in id order."""
    found = {}
    for line in printed.splitlines():
        if line.startswith("H-"):
            number, _, text = line.split("\t")
            found[int(number[2:])] = text
    return [found[n] for n in sorted(found)]


def decoding_paths(data: Path, checkpoint: Path, documents: Path, plan: Plan,
                   work: Path) -> Dict[str, Callable[[], List[str]]]:
    """Each path as a function returning its translations of the test documents, in order."""
    cpu = ["--cpu"] if plan.device == "cpu" else []
    source = documents.read_text(encoding="utf-8").splitlines()

    def of_sentences(outputs: Sequence[str]) -> List[str]:
        """The outputs of the non-blank input lines, from one output line per input line."""
        return [output for line, output in zip(source, outputs) if line.strip()]

    common = [str(data), "--user-dir", USER_DIR, "--task", "context_translation", "--context-size", "1",
              "--target-context-size", "1", "--path", str(checkpoint), *SEARCH, *cpu]

    def generate() -> List[str]:
        results = work / "generate"
        run_tool("fairseq-generate", [*common, "--gen-subset", "test", "--batch-size", str(DECODE_BATCH),
                                      "--required-batch-size-multiple", "1", "--results-path", str(results)],
                 work / "logs" / "fairseq-generate.log")
        return hypotheses((results / "generate-test.txt").read_text(encoding="utf-8"))

    def interactive() -> List[str]:
        return hypotheses(run_tool("fairseq-interactive", [
            *common, "--buffer-size", "4", "--batch-size", str(DECODE_BATCH), "--input", str(documents)],
            work / "logs" / "fairseq-interactive.log"))

    def translate_doc() -> List[str]:
        printed = run_tool("fairseq-ctx-translate-doc", [
            str(checkpoint), "--data", str(data), "--input", str(documents), *SEARCH, "--batch-size", str(DECODE_BATCH),
            *cpu], work / "logs" / "fairseq-ctx-translate-doc.log")
        return of_sentences(printed.splitlines())

    def hub() -> List[str]:
        from fairseq_ctx.context import hub as context_hub

        with tool_session("hub", work / "logs" / "hub.log"):
            translator = context_hub.load(str(checkpoint), data=str(data), cpu=plan.device == "cpu", **SEARCH_SETTINGS)
            return of_sentences(list(translator.translate_stream(source, batch_size=DECODE_BATCH)))

    return {"fairseq-generate": generate, "fairseq-interactive": interactive,
            "fairseq-ctx-translate-doc": translate_doc, "hub translate_stream": hub}


def check_decoding(plan: Plan, work: Path, corpora: Corpora) -> List[DecodingRow]:
    data = corpora.tiny_data
    documents = data.parent / "raw" / "test.en"  # blank line between documents
    sentences = sum(1 for line in documents.read_text(encoding="utf-8").splitlines() if line.strip())
    save_dir = work / "checkpoints" / "decoding-hmce"
    try:
        run_tool("fairseq-train", [
            str(data), "--user-dir", USER_DIR, "--task", "context_translation", "--context-size", "1",
            "--target-context-size", "1", "--arch", "hmce", *TINY_MODEL, "--optimizer", "adam", "--lr", "5e-3",
            "--max-tokens", "2000", "--max-update", str(plan.decode_updates), "--criterion",
            "label_smoothed_cross_entropy", "--seed", "1", "--dropout", "0.0", "--save-dir", str(save_dir),
            "--no-epoch-checkpoints", "--disable-validation", "--num-workers", "0", *plan.device_flags,
            *PRECISION_FLAGS[plan.decode_precision]], work / "logs" / "train-decoding-hmce.log")
    except ToolFailed as failure:
        return [DecodingRow("training the model", problems=[str(failure)])]
    rows: List[DecodingRow] = []
    for path, decode in decoding_paths(data, save_dir / "checkpoint_last.pt", documents, plan, work).items():
        watch, row = DeviceWatch(), DecodingRow(path)
        try:
            with watch.active():
                row.translations = decode()
        except ToolFailed as failure:
            row.error = str(failure)
        row.calls, row.model_devices, row.off_device = watch.calls, sorted(watch.model_devices), watch.off_device
        reference = rows[0].translations if rows and not rows[0].error else None
        row.problems = row.judge(plan.device, sentences, reference)
        rows.append(row)
        say(f"decode {path}: {len(row.translations)} translations, {row.calls} module calls watched: "
            f"{verdict(row.problems)}")
    return rows


# ---- 3. timing ---------------------------------------------------------------------------------
@dataclass
class TimingRow:
    """Training words/s of a model and of its baseline."""

    pair: str
    model: str
    baseline: str
    words_per_second: Optional[float] = None
    baseline_words_per_second: Optional[float] = None
    errors: List[str] = field(default_factory=list)

    @property
    def ratio(self) -> Optional[float]:
        if self.words_per_second is None or self.baseline_words_per_second is None:
            return None
        return self.words_per_second / self.baseline_words_per_second


def timing_rows(plan: Plan, corpora: Corpora) -> List[Tuple[TimingRow, Path, List[str], List[str]]]:
    """Each pair with its data and the fairseq-train options of its model and of its baseline."""
    context = ["--task", "context_translation", "--share-all-embeddings", *plan.timing_size, "--max-tokens", "4096"]
    text_only = ["--task", "multimodal_translation", "-s", "en", "-t", "de", "--arch", "hierarchical_attention_decoder",
                 "--share-all-embeddings", *plan.timing_size, "--batch-size", str(plan.image_batch)]
    return [
        (TimingRow("hmce / transformer (context_translation)", "hmce --context-size 2", "transformer"),
         corpora.documents, [*context, "--arch", "hmce", "--context-size", "2"],
         [*context, "--arch", "transformer", "--context-size", "0"]),
        (TimingRow("hierarchical_attention_decoder: 196×2048 image regions / text-only", "with images", "text-only"),
         corpora.images, [*text_only, "--feature-inputs", "img", "--combination", "hierarchical"], text_only),
    ]


def words_per_second(log: str, warmup: int) -> float:
    """Median of fairseq's per-update ``wps`` after the first ``warmup`` updates."""
    timed = [rate for update, rate in per_update(log, key="wps").items() if update > warmup]
    if not timed:
        raise ToolFailed(f"no wps logged after update {warmup}")
    return statistics.median(timed)


def check_timing(plan: Plan, work: Path, corpora: Corpora) -> List[TimingRow]:
    rows = []
    for number, (row, data, model, baseline) in enumerate(timing_rows(plan, corpora)):
        rates = []
        for name, options in ((f"{number}-model", model), (f"{number}-baseline", baseline)):
            log = work / "logs" / f"timing-{name}.log"
            try:
                run_tool("fairseq-train", [
                    str(data), "--user-dir", USER_DIR, *options, "--criterion", "label_smoothed_cross_entropy",
                    "--label-smoothing", "0.1", "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--lr", "1e-4",
                    "--dropout", "0.1", "--max-update", str(plan.timing_updates), "--seed", "1", "--no-save",
                    "--disable-validation", "--num-workers", "0", "--log-format", "json", "--log-interval", "1",
                    *plan.device_flags, *PRECISION_FLAGS[plan.timing_precision]], log)
                rates.append(words_per_second(log.read_text(encoding="utf-8"), plan.timing_warmup))
            except ToolFailed as failure:
                rates.append(None)
                row.errors.append(str(failure))
        row.words_per_second, row.baseline_words_per_second = rates
        rows.append(row)
        say(f"time {row.pair}: {shown(row.ratio, 2) if not row.errors else verdict(row.errors)}")
    return rows


# ---- 4. results --------------------------------------------------------------------------------
def verdict(problems: Sequence[str]) -> str:
    return "PASS" if not problems else "FAIL: " + "; ".join(p.replace("|", "/") for p in problems)


def shown(value: Optional[float], digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def training_table(rows: Sequence[TrainingRow], plan: Plan, updates: int) -> List[str]:
    fp16 = ("fp16: fairseq's --fp16 (float16 model, float32 master weights)" if "fp16" in plan.precisions else
            "no fp16 rows: fairseq's --fp16 needs CUDA")
    amp = "float16 autocast (fairseq's, CUDA)" if plan.device == "cuda" else "bfloat16 autocast on the CPU"
    lines = [f"### Training: {updates} updates per arch and precision on {plan.device}", "",
             f"{fp16}; amp: --amp, {amp}. First / final loss: mean over the first / last {window(updates)} updates. PASS: every loss finite, "
             f"final < first, and a half-precision final loss within {LOSS_TOLERANCE:.0%} of float32's.", "",
             "| arch | precision | first loss | final loss | vs float32 | verdict |", "|---|---|---|---|---|---|"]
    finals = {(row.arch, row.precision): row.final() for row in rows if row.complete()}
    for row in rows:
        final, reference = finals.get((row.arch, row.precision)), finals.get((row.arch, "float32"))
        change = "—" if final is None or reference is None or row.precision == "float32" else \
            f"{(final - reference) / reference:+.2%}"
        lines.append(f"| {row.arch} | {row.precision} | {shown(row.first() if final is not None else None)} | "
                     f"{shown(final)} | {change} | {verdict(row.problems)} |")
    return lines


def decoding_table(rows: Sequence[DecodingRow], plan: Plan) -> List[str]:
    lines = [f"### Decoding: hmce --context-size 1 --target-context-size 1 ({plan.decode_updates} updates, "
             f"{plan.decode_precision}), beam 2, float32 on {plan.device}", "",
             "PASS: model on the device, every tensor given to a module on the model's device, a non-empty "
             "translation per sentence, equal to fairseq-generate's.", "",
             "| path | translations | distinct | module calls watched | model device | tensors off its device | verdict |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row.path} | {len(row.translations)} | {len(set(row.translations))} | {row.calls} | "
                     f"{', '.join(row.model_devices) or '—'} | {len(row.off_device)} | {verdict(row.problems)} |")
    return lines


def timing_table(rows: Sequence[TimingRow], plan: Plan) -> List[str]:
    lines = [f"### Speed: training target words/s, {plan.timing_precision} on {plan.device}, median of updates "
             f"{plan.timing_warmup + 1}–{plan.timing_updates}", "", f"Model size: `{' '.join(plan.timing_size)}`.", "",
             "| pair | model | words/s | baseline | words/s | ratio |", "|---|---|---|---|---|---|"]
    for row in rows:
        ratio = shown(row.ratio, 2) if not row.errors else verdict(row.errors)
        lines.append(f"| {row.pair} | {row.model} | {shown(row.words_per_second, 0)} | {row.baseline} | "
                     f"{shown(row.baseline_words_per_second, 0)} | {ratio} |")
    return lines


def results_markdown(header: Dict[str, str], sections: Sequence[List[str]]) -> str:
    title = header["GPU"] if header["GPU"] != "none" else "dry run on the CPU"
    lines = [f"## {header['date']}: {title}", "", *[f"- {key}: {value}" for key, value in header.items()], ""]
    for section in sections:
        lines += [*section, ""]
    return "\n".join(lines)


def run_header(plan: Plan, argv: Sequence[str], failures: int, seconds: Dict[str, float]) -> Dict[str, str]:
    cuda = torch.cuda.is_available()
    gpu = "none"
    if plan.device == "cuda":
        gpu = f"{torch.cuda.get_device_name(0)} ({torch.cuda.get_device_properties(0).total_memory / 2 ** 30:.0f} GiB)"
    return {
        "date": utc_now(),
        "GPU": gpu,
        "versions": f"torch {torch.__version__}, CUDA {torch.version.cuda or '—'}, "
                    f"cuDNN {torch.backends.cudnn.version() if cuda else '—'}",
        "machine": this_machine().describe(),
        "command": script_command("benchmarks/gpu_fp16_check.py", argv),
        "wall time": f"{sum(seconds.values()):.0f} s (" + ", ".join(f"{k} {v:.0f} s" for k, v in seconds.items()) + ")",
        "result": "PASS" if not failures else f"FAIL ({failures} failed rows)",
    }


# ---- command line ------------------------------------------------------------------------------
def say(line: str) -> None:
    print(line, flush=True)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true",
                        help="the same flow on the CPU: float32 and --amp only (--fp16 needs CUDA), 10 updates, "
                             "tiny timing runs; writes results only where --results says")
    parser.add_argument("--archs", default="", help="comma-separated archs (default: every registered one)")
    parser.add_argument("--checks", default=",".join(CHECKS), help=f"comma-separated subset of {','.join(CHECKS)}")
    parser.add_argument("--updates", type=int, help="training updates per arch and precision (default: 50; dry run 10)")
    parser.add_argument("--work", help="directory for corpora, checkpoints and logs (default: a new temporary one)")
    parser.add_argument("--results", help="markdown file the results section is appended to (default: "
                                          "docs/gpu-checks.md; in a dry run, none)")
    args = parser.parse_args(argv)
    registered = plugin_archs()
    args.archs = [a for a in args.archs.split(",") if a] or registered
    unknown = sorted(set(args.archs) - set(registered))
    if unknown:
        parser.error(f"--archs: {','.join(unknown)} not registered by fairseq_ctx; choose from {','.join(registered)}")
    args.checks = [c for c in args.checks.split(",") if c]
    if not args.checks or set(args.checks) - set(CHECKS):
        parser.error(f"--checks: choose from {','.join(CHECKS)}")
    if args.updates is not None and args.updates < 2:
        parser.error("--updates must be at least 2 (the first and the final loss are compared)")
    if not args.dry_run and not torch.cuda.is_available():
        parser.error("no CUDA device: fairseq's --fp16 needs a GPU; --dry-run runs the same flow on the CPU")
    if args.work and (Path(args.work) / "corpora").exists():
        parser.error(f"--work {args.work} holds the corpora of an earlier run; pass a new directory")
    if args.results is None and not args.dry_run:
        args.results = str(ROOT / "docs" / "gpu-checks.md")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    plan = DRY_PLAN if args.dry_run else GPU_PLAN
    updates = args.updates or plan.updates
    work = Path(args.work or tempfile.mkdtemp(prefix="gpu_check_")).resolve()
    say(f"gpu_fp16_check: {'dry run on the CPU' if args.dry_run else torch.cuda.get_device_name(0)}; work: {work}")
    corpora = Corpora(work / "corpora", plan)
    sections: List[List[str]] = []
    seconds: Dict[str, float] = {}
    failures = 0
    with quiet_console():
        for check in args.checks:
            start = time.time()
            if check == "training":
                training = check_training(args.archs, plan, work, corpora, updates)
                failures += sum(bool(row.problems) for row in training)
                sections.append(training_table(training, plan, updates))
            elif check == "decoding":
                decoding = check_decoding(plan, work, corpora)
                failures += sum(bool(row.problems) for row in decoding)
                sections.append(decoding_table(decoding, plan))
            else:
                timing = check_timing(plan, work, corpora)
                failures += sum(bool(row.errors) for row in timing)
                sections.append(timing_table(timing, plan))
            seconds[check] = time.time() - start
    text = results_markdown(run_header(plan, argv, failures, seconds), sections)
    say("\n" + text)
    if args.results:
        with open(args.results, "a", encoding="utf-8") as handle:
            handle.write("\n" + text)
        say(f"appended to {args.results}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
