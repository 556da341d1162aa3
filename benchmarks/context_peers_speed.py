"""Training speed and memory of the caching models and of sequence shortening (latent grouping;
Mąka et al., 2024) and of focused concatenation (Lupo et al., 2022; sK-to-K with the discounted
context loss) beside ctx_concat and hmce at context sizes 2 and 8, against the sentence-level
Transformer.

Usage: ``python -m benchmarks.context_peers_speed [--size base] [--clock cpu --threads 1]
[--json DIR/context_peers_speed.json]`` (the options of ``benchmarks.context_speed``, whose data,
batches, timing and generation this benchmark reuses: see its method). With ``--json``, the
same directory gets ``context_peers_speed.md``: the date, machine, precision (float32), seed,
updates, wall time and command, then the printed tables.

Added here: activation memory, the bytes of the tensors a training forward (criterion
included) keeps for the backward pass, counted with ``torch.autograd.graph.saved_tensors_hooks``
once per distinct storage, parameters excluded, on the first training batch. It is what grows
with the context and with the batch, and it is the same on every device (the peak of a GPU step
adds the parameters, gradients, optimizer state and the allocator's slack).

Printed: the table of ``context_speed`` with the activation memory, and the ratios of each
peer model to ctx_concat and to hmce at N=2 and N=8 (training words/s and activation
memory; no targets: the issue asks for the numbers).
"""
import os
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from dataclasses import asdict, dataclass

import torch
from fairseq import tasks

from benchmarks import context_speed
from benchmarks.context_speed import (Measurement, Setting, build_data, fairseq_cfg, fixed_batches, measure,
                                      parse_cli, table)
from benchmarks.quiet import quiet_libraries
from devtools.machine_facts import this_machine, utc_now
from devtools.results_file import results_page, script_command, write_results

PEERS = ["ctx_concat", "focused_concat", "caching_tokens", "caching_sentence", "shortening_grouping", "hmce"]
OURS = ["focused_concat", "caching_tokens", "caching_sentence", "shortening_grouping"]
SIZES_N = (2, 8)
SETTINGS = [Setting("transformer", 0)] + [Setting(arch, n) for n in SIZES_N for arch in PEERS]


@dataclass
class PeerRatio:
    description: str
    value: float


def activation_bytes(data_bin: Path, setting: Setting, args) -> int:
    """Bytes saved for backward by one training forward on the first training batch."""
    cfg = fairseq_cfg(data_bin, setting, args)
    torch.manual_seed(args.seed)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    sample = fixed_batches(task, model, cfg, "train", 1, shuffle=True)[0]
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages: Dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    model.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss, _, _ = criterion(model, sample)
    loss.backward()
    return sum(storages.values())


def peer_ratios(results: Dict[Setting, Measurement], memory: Dict[Setting, int]) -> List[PeerRatio]:
    ratios = []
    for n in SIZES_N:
        for ours in OURS:
            for other in ("ctx_concat", "hmce"):
                mine, theirs = Setting(ours, n), Setting(other, n)
                ratios.append(PeerRatio(f"{ours} / {other} training words/s at N={n}",
                                        results[mine].train_words_per_s / results[theirs].train_words_per_s))
                ratios.append(PeerRatio(f"{ours} / {other} activation memory at N={n}", memory[mine] / memory[theirs]))
    return ratios


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_cli(argv, __doc__)
    quiet_libraries()
    context_speed.CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="context_peers_") as root:
        counts = build_data(Path(root), args.seed, args.train_sentences, (args.gen_batches + 1) * args.batch_size,
                            args.sentences_per_line)
        data_bin, reference_ids = Path(root) / "data-bin", {}
        results = {s: measure(data_bin, s, args, reference_ids) for s in SETTINGS}
        memory = {s: activation_bytes(data_bin, s, args) for s in SETTINGS}
    ratios = peer_ratios(results, memory)
    seconds = time.perf_counter() - started
    lines = [
        f"data: {counts['train']['sentences']} training lines, {counts['test']['sentences']} test lines "
        f"(seed {args.seed}), {args.sentences_per_line} generated sentence(s) per line",
        f"model size: {args.size}; {args.batch_size} lines/batch; {args.warmup_updates} warm-up + {args.updates} timed "
        f"updates; {args.clock} clock; torch threads {torch.get_num_threads()}; load average (1 min) before/after "
        f"{load_before:.2f}/{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs",
        "",
        *table([results[s] for s in SETTINGS]),
        "",
        f"{'model':<18}{'N':>3}{'activation MB':>15}",
        *(f"{s.arch:<18}{s.context_size:>3}{memory[s] / 2**20:>15.1f}" for s in SETTINGS),
        "",
        *(f"{r.description:<60}{r.value:>7.3f}" for r in ratios),
        "",
        f"total time: {seconds:.0f} s",
    ]
    print("\n".join(lines))
    if args.json:
        facts = {"date": utc_now(), "machine": this_machine(torch.get_num_threads()).describe(),
                 "precision": "float32", "seed": f"{args.seed} (generated documents, initialisation, batch order)",
                 "updates": f"{args.warmup_updates} warm-up + {args.updates} timed per setting",
                 "wall time": f"{seconds:.0f} s", "command": script_command("benchmarks/context_peers_speed.py", argv)}
        record = {**facts, "settings": {k: v for k, v in vars(args).items() if k != "json"}, "data": counts,
                  "results": [asdict(results[s]) | {"activation_bytes": memory[s]} for s in SETTINGS],
                  "ratios": [asdict(r) for r in ratios]}
        page = results_page("Training speed and memory of the peers' context models beside ctx_concat and hmce",
                            facts,
                            ["```", *lines, "```"])
        write_results(str(Path(args.json).parent), "context_peers_speed", page, record)


if __name__ == "__main__":
    main()
