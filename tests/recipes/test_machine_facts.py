"""The machine facts every results file states come from one place and survive their JSON form."""
import os

import torch

from devtools.machine_facts import MachineFacts, this_machine


def test_this_machine_names_the_cores_threads_and_no_gpu_on_a_cpu_machine():
    facts = this_machine()
    assert facts.cpu_cores == os.cpu_count() and facts.torch_threads == torch.get_num_threads()
    assert facts.gpu == ("none" if not torch.cuda.is_available() else torch.cuda.get_device_name(0))
    line = facts.describe()
    assert line.startswith(f"{os.cpu_count()} CPU cores (") and f"torch {torch.__version__}" in line


def test_the_threads_of_other_processes_are_stated_when_given_and_the_json_form_round_trips():
    facts = this_machine(torch_threads=7)
    assert "7 torch thread(s)" in facts.describe()
    assert MachineFacts(**facts.as_dict()) == facts
