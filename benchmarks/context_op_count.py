"""Operations per training step of the context models against the sentence-level Transformer.

Usage: ``python -m benchmarks.context_op_count [--size base] [--max-tokens 4096] [--device cuda] [--amp]
[--results DIR]``

Why: on a GPU a training step of a Transformer-sized model costs about one kernel launch per
operation before it costs arithmetic, so a model that runs many more, smaller operations than
the Transformer trains far slower there than its multiply-adds say, while on the CPU (where
arithmetic dominates) the same model can be close. The operation count is that cost, measured
on the CPU: it depends on the model's code and the batch, not on the device.

Method: the documents of ``benchmarks/context_speed.py`` (~17-token lines) batched by
``--max-tokens`` as ``fairseq-train`` batches them (document windows for the context models),
and for each setting the first ``--batches`` training batches, each one forward + backward
(``task.train_step``), counted at torch's dispatcher (the operations that reach a device,
backward included, composite ones split into the ones they run) by ``OperationCount``: every
operation except views (a view launches no kernel; in-place and out= operations do), the matrix
products among them, and the host syncs: the operations that make the host wait for the device
because they read the values of a tensor that is on the device in a GPU run (a tensor read as a
Python number, ``nonzero``, ``masked_select``, ``equal``, indexing with a boolean mask). Which
tensors those are is tracked from the model's parameters and buffers and the batch's tensors
(what a GPU run moves there) through every operation that reads them; reading a tensor built on
the host (from Python numbers or shapes) costs no sync and is not counted (``OperationCount``
says what the CPU cannot decide). hce/hmce are counted twice: with their CPU path
(``--train-length-chunks``, default 3: a batch of mixed lengths runs as up to 3 chunks of
similar lengths) and with the single pass that a batch on a GPU always runs.

With ``--device cuda`` (the single-pass rows only: there is no other path on a GPU) each batch is
also run twice more after one untimed warm-up step: timed (seconds per step, median over the
batches), and through torch's profiler, which gives what the count stands for there: CUDA kernels
(and copies) launched per step, the GPU's busy share of the step (the kernels' summed time / the
timed step's time; far below 1 when the step is bound by launching kernels) and the host's waits for the device
(``cudaStreamSynchronize``/``cudaDeviceSynchronize`` calls). On the CPU, time the models with
``benchmarks/context_speed.py``. ``--amp``: forward
passes under autocast (bfloat16 on the CPU, float16 on CUDA), as fairseq's ``--amp``. No optimizer
step is taken: the numbers are the forward and backward pass's.
"""
import argparse
import os
import statistics
import tempfile
import time
import weakref
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import torch
from fairseq import options, tasks, utils
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from benchmarks.context_speed import SIZES, USER_DIR, build_data
from devtools.machine_facts import this_machine, utc_now
from devtools.results_file import results_page, script_command, write_results

SETTINGS = [("transformer", 0, False), ("ctx_concat", 2, False), ("hce", 2, False), ("hce", 2, True),
            ("hmce", 2, False), ("hmce", 2, True)]
CHUNKED = {"hce", "hmce"}  # their rows without single_pass run the CPU-only length chunks
DEVICE_WAITS = {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize"}
# operations that read a tensor's values on the host (what the host waits for when it is on the device):
# the tensors read are the arguments at these positions (for indexing, the boolean masks among the indices)
READS = {"aten._local_scalar_dense.default": (0,), "aten.nonzero.default": (0,), "aten.masked_select.default": (1,),
         "aten.equal.default": (0, 1)}
# reads of a tensor's values that dispatch nothing on the CPU, seen at torch's function layer
HOST_COPIES = {torch.Tensor.tolist, torch.Tensor.cpu, torch.Tensor.numpy}
MASK_INDEXING = {"aten.index.Tensor", "aten.index_put.default", "aten.index_put_.default",
                 "aten._index_put_impl_.default"}
LEGEND = ("Counted at torch's dispatcher, backward included: operations = those that launch a kernel, i.e. all but "
          "views (an operation whose results are all unwritten aliases of its input); in-place and out= operations "
          "count. Host syncs = reads of a device-resident tensor's values on the host: a tensor read as a Python "
          "number, nonzero, masked_select, equal, indexing (or index assignment) with a boolean mask. Device-resident: "
          "the model's parameters and buffers, the batch's tensors, and whatever an operation computes from them; "
          "tensors built on the host (from Python numbers, shapes, factories given no such tensor) are read without "
          "a sync. .tolist(), .cpu() and .numpy() of a device-resident tensor count as syncs too (seen at torch's "
          "function layer: they dispatch nothing on the CPU). A copy of a host tensor to the device is not counted. On a GPU each operation is about one kernel launch. hce/hmce without 'single pass' run their CPU "
          "path: --train-length-chunks 3.")
PRODUCTS = {"aten.mm.default", "aten.bmm.default", "aten.addmm.default", "aten.baddbmm.default"}


def tensors_in(tree) -> List[torch.Tensor]:
    return [leaf for leaf in tree_flatten(tree)[0] if isinstance(leaf, torch.Tensor)]


class OperationCount(TorchDispatchMode):
    """Counts, for a step that runs on the CPU, what it would cost on a GPU: the operations that
    launch a kernel, the matrix products among them, and the host syncs.

    ``OperationCount(model, sample)``: the tensors that a GPU run keeps on the device, as
    ``model.to("cuda")`` and ``utils.move_to_cuda(sample)`` put them there (a module's parameters
    and buffers; the tensors of a nested dict/list/tuple). They and every tensor that an operation
    writes with one of them among its inputs (outputs, in-place and out= arguments) are
    device-resident; everything else was built on the host and stays there on a GPU too. Marks
    are kept per storage (while a marked tensor on it lives), so views and the saved tensors that
    backward reads are device-resident as well, and gradients are: backward's inputs descend from
    the loss and the parameters.

    - operations: every operation except views. An operation is a view when it returns results
      and all are aliases of an input that it does not write (``Tensor(a)``); an in-place or out=
      operation's result is a written alias (``Tensor(a!)``) and launches a kernel, and so does an
      operation that returns nothing (``_foreach_add_``).
    - syncs: the operations that read a device-resident tensor's values on the host (a Python
      number: ``.item()``, ``int(t)``, ``bool(t)``; a result whose size depends on the values:
      ``nonzero``, ``masked_select``, indexing or index assignment with a boolean mask, and
      ``equal``; and ``.tolist()``, ``.cpu()``, ``.numpy()``, which dispatch nothing on the CPU and
      are seen at torch's function layer). The same reads of a host-side tensor are free on a GPU
      and not counted.

    Undecidable on the CPU, so not counted as the GPU would: a factory given a device-resident
    tensor's ``.device`` (``torch.arange(n, device=x.device)``) cannot be told from one built on
    the host (both get the CPU), so its result is host-side until an operation combines it with a
    device-resident tensor; and ``.to(device)``/``.cuda()`` of a host tensor (a copy to the
    device, which waits for the device) dispatches nothing on the CPU and is not counted.
    """

    def __init__(self, *device_resident) -> None:
        super().__init__()
        self.operations = self.products = self.syncs = 0
        # storage address -> weak references to the marked tensors on that storage (weak ones
        # keep nothing alive; a live one proves the address is still that storage's)
        self._resident: Dict[int, Dict[int, weakref.ref]] = {}
        for source in device_resident:
            if isinstance(source, torch.nn.Module):
                self._mark([*source.parameters(), *source.buffers()])
            else:
                self._mark(tensors_in(source))

    def __enter__(self):
        self._host_copies = HostCopyReads(self)
        self._host_copies.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        result = super().__exit__(*exc)
        self._host_copies.__exit__(*exc)
        return result

    def _mark(self, tensors: Sequence[torch.Tensor]) -> None:
        for tensor in tensors:
            self._resident.setdefault(tensor.untyped_storage()._cdata, {})[id(tensor)] = weakref.ref(tensor)

    def is_device_resident(self, tensor: torch.Tensor) -> bool:
        storage = tensor.untyped_storage()._cdata
        marked = self._resident.get(storage, {})
        for key, ref in list(marked.items()):
            alive = ref()
            if alive is not None and alive.untyped_storage()._cdata == storage:
                return True
            del marked[key]
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func)
        returns = func._schema.returns
        self.operations += not (returns and all(r.alias_info is not None and not r.alias_info.is_write for r in returns))
        self.products += name in PRODUCTS
        read = [args[position] for position in READS.get(name, ())]
        if name in MASK_INDEXING:
            read = [index for index in args[1] if index is not None and index.dtype in (torch.bool, torch.uint8)]
        self.syncs += any(self.is_device_resident(tensor) for tensor in read)
        inputs = tensors_in((args, kwargs))
        result = func(*args, **kwargs)
        if any(self.is_device_resident(tensor) for tensor in inputs):
            self._mark(tensors_in(result))
        return result


class HostCopyReads(TorchFunctionMode):
    """Counts into ``count.syncs`` the ``.tolist()``, ``.cpu()`` and ``.numpy()`` of device-resident
    tensors (host syncs on a GPU that dispatch nothing on the CPU)."""

    def __init__(self, count: OperationCount) -> None:
        super().__init__()
        self.count = count

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in HOST_COPIES and args and self.count.is_device_resident(args[0]):
            self.count.syncs += 1
        return func(*args, **(kwargs or {}))


@dataclass
class Row:
    setting: str
    target_tokens: float
    operations: float
    matrix_products: float
    host_syncs: float
    seconds_per_step: Optional[float] = None  # CUDA only, with the profiler's numbers below
    kernels: Optional[float] = None
    gpu_busy: Optional[float] = None
    device_waits: Optional[float] = None


def profiled(step: Callable[[], None]) -> Dict[str, float]:
    """The CUDA kernels (and copies) of one run of ``step`` under torch's profiler, their summed
    time in seconds, and the host's waits for the device."""
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    events = prof.events()
    kernels = [event for event in events if event.device_type == DeviceType.CUDA]
    return {"kernels": len(kernels), "kernel_seconds": sum(event.time_range.elapsed_us() for event in kernels) / 1e6,
            "device_waits": sum(event.name in DEVICE_WAITS for event in events)}


def parse_cli(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), default="base", help="model size (context_speed.py's)")
    parser.add_argument("--max-tokens", type=int, default=4096, help="fairseq's --max-tokens of every batch")
    parser.add_argument("--batches", type=int, default=3, help="training batches counted per setting (mean reported)")
    parser.add_argument("--train-sentences", type=int, default=3000, help="generated training sentences")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="cuda: also the kernels, the GPU's busy share and the waits per step (profiler)")
    parser.add_argument("--amp", action="store_true", help="forward passes under autocast (fairseq's --amp)")
    parser.add_argument("--results", help="directory for context_op_count.{md,json}")
    return parser.parse_args(argv)


def measure_setting(data_bin: Path, arch: str, context_size: int, single_pass: bool,
                    args: argparse.Namespace) -> Row:
    parser = options.get_training_parser()
    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(parser, input_args=[
        str(data_bin), "--user-dir", USER_DIR, "--task", "context_translation", "--context-size", str(context_size),
        "--arch", arch, "--seed", "1", *SIZES[args.size].fairseq_args(), "--criterion",
        "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--max-tokens", str(args.max_tokens)]))
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    model = task.build_model(cfg.model).to(args.device)
    criterion = task.build_criterion(cfg.criterion)
    if single_pass:
        model.use_single_pass()
    batches = task.get_batch_iterator(task.dataset("train"), max_tokens=args.max_tokens, seed=1).next_epoch_itr(
        shuffle=True)
    samples = [utils.move_to_cuda(sample) if args.device == "cuda" else sample
               for _, sample in zip(range(args.batches), batches)]
    model.train()

    def step(sample: dict) -> None:
        with torch.autocast(args.device, enabled=args.amp):
            loss, _, _ = criterion(model, sample)
        loss.backward()
        model.zero_grad()

    counts: List[OperationCount] = []
    seconds, device = [], []
    for sample in samples:
        with OperationCount(model, sample) as count:
            step(sample)
        counts.append(count)
    if args.device == "cuda":
        step(samples[0])
        for sample in samples:
            torch.cuda.synchronize()
            start = time.perf_counter()
            step(sample)
            torch.cuda.synchronize()
            seconds.append(time.perf_counter() - start)
            device.append(profiled(lambda: step(sample)))
    name = f"{arch} --context-size {context_size}" + (" (single pass, as on a GPU)" if single_pass else "")
    row = Row(name, statistics.mean(sample["ntokens"] for sample in samples),
              *(statistics.mean(getattr(c, key) for c in counts) for key in ("operations", "products", "syncs")))
    if device:
        row.seconds_per_step = statistics.median(seconds)
        row.kernels = statistics.mean(d["kernels"] for d in device)
        row.gpu_busy = statistics.median(d["kernel_seconds"] for d in device) / row.seconds_per_step
        row.device_waits = statistics.mean(d["device_waits"] for d in device)
    return row


def table(rows: Sequence[Row]) -> List[str]:
    baseline = rows[0]
    lines = ["| setting | target tokens | operations | / transformer's | matrix products | host syncs | s/step "
             "| kernels | GPU busy | device waits |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        device = ("— | — | — | —" if row.seconds_per_step is None else
                  f"{row.seconds_per_step:.3f} | {row.kernels:.0f} | {row.gpu_busy:.0%} | {row.device_waits:.0f}")
        lines.append(f"| {row.setting} | {row.target_tokens:.0f} | {row.operations:.0f} | "
                     f"{row.operations / baseline.operations:.2f} | {row.matrix_products:.0f} | {row.host_syncs:.0f} | "
                     f"{device} |")
    return lines


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_cli(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device here (torch.cuda.is_available() is False)")
    torch.manual_seed(1)
    start, load = time.time(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="context_op_count_") as root:
        build_data(Path(root), seed=1, train_sentences=args.train_sentences, test_sentences=30, per_line=3)
        settings = [(arch, size, single) for arch, size, single in SETTINGS
                    if args.device == "cpu" or single or arch not in CHUNKED]
        rows = [measure_setting(Path(root) / "data-bin", *setting, args) for setting in settings]
    header = {
        "date": utc_now(), "machine": this_machine().describe(), "load average before": f"{load:.2f}",
        "device": args.device, "precision": "autocast (--amp)" if args.amp else "float32",
        "seed": "1 (generated documents, initialisation, batch order)",
        "model size": f"{args.size} ({' '.join(SIZES[args.size].fairseq_args())})",
        "batches": f"--max-tokens {args.max_tokens}, the first {args.batches} training batches of each setting (mean)",
        "wall time": f"{time.time() - start:.0f} s",
        "command": script_command("benchmarks/context_op_count.py", argv),
    }
    page = results_page("Operations per training step (forward + backward) of the context models", header,
                        [*table(rows), "", LEGEND])
    print(page)
    write_results(args.results, "context_op_count", page, {**header, "rows": [asdict(r) for r in rows]})


if __name__ == "__main__":
    main()
