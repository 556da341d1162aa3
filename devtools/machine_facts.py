"""The machine a result was measured on, as results files state it (with the date, updates, wall
time and command): CPU cores and model, GPU, torch threads, torch version and platform."""
import dataclasses
import datetime
import os
import platform
from typing import Dict, Optional, Union

import torch


@dataclasses.dataclass(frozen=True)
class MachineFacts:
    """What a results table needs to say about the machine; ``as_dict`` is its JSON form."""

    cpu_cores: int
    cpu: str
    gpu: str
    torch_threads: int
    torch: str
    platform: str
    native_bfloat16: Optional[bool] = None  # not recorded before 2026-12-03

    def describe(self) -> str:
        """One line for a results file, e.g. ``2 CPU cores (AMD EPYC, native bfloat16), 1 torch thread(s);
        GPU: none; torch 2.13.0+cpu, Linux-…``."""
        bf16 = {None: "", True: ", native bfloat16", False: ", no native bfloat16"}[self.native_bfloat16]
        return (f"{self.cpu_cores} CPU cores ({self.cpu}{bf16}), {self.torch_threads} torch thread(s); GPU: {self.gpu}; "
                f"torch {self.torch}, {self.platform}")

    def as_dict(self) -> Dict[str, Union[int, str]]:
        return dataclasses.asdict(self)


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo where there is one, else what :mod:`platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            return next(line.split(":", 1)[1].strip() for line in handle if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def this_machine(torch_threads: Optional[int] = None) -> MachineFacts:
    """Facts of the machine running this process. ``torch_threads``: the intra-op threads of the
    processes that did the measured work when they are not this one (default: this process's)."""
    from fairseq_ctx.core.mixed_precision import native_bfloat16

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return MachineFacts(cpu_cores=os.cpu_count() or 1, cpu=cpu_model(), gpu=gpu,
                        torch_threads=torch.get_num_threads() if torch_threads is None else torch_threads,
                        torch=torch.__version__, platform=platform.platform(), native_bfloat16=native_bfloat16())


def utc_now() -> str:
    """The date and time a result is written, as results files state it."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
