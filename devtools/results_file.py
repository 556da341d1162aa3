"""The results files of a benchmark or tool script: ``STEM.md`` (a title, the facts of the run as
bullets, the tables) and ``STEM.json`` (the same facts and the numbers), each written whole."""
import shlex
import sys
from pathlib import Path
from typing import Mapping, Optional, Sequence

from devtools.recipe_tools import write_json, write_whole


def script_module(script: str) -> str:
    """The module ``python -m`` runs for ``script``, a path from the repository root:
    ``examples/context_mt/scat_en_fr.py`` is ``examples.context_mt.scat_en_fr``."""
    return script[:-len(".py")].replace("/", ".") if script.endswith(".py") else script


def script_command(script: str, argv: Optional[Sequence[str]]) -> str:
    """``python -m MODULE ARGS`` as typed in a shell at the repository root (``script`` a path from
    there); ``argv`` None: this process's own arguments."""
    return shlex.join(["python", "-m", script_module(script), *(sys.argv[1:] if argv is None else argv)])


def results_page(title: str, facts: Mapping[str, object], body: Sequence[str]) -> str:
    """``# title``, one ``- key: value`` bullet per fact, then ``body``'s lines."""
    return "\n".join([f"# {title}", "", *[f"- {key}: {value}" for key, value in facts.items()], "", *body]) + "\n"


def write_results(directory: Optional[str], stem: str, page: str, record: Mapping[str, object]) -> None:
    """``page`` to ``directory/STEM.md`` and ``record`` to ``directory/STEM.json``; nothing without a directory."""
    if directory:
        write_whole(Path(directory) / f"{stem}.md", page)
        write_json(Path(directory) / f"{stem}.json", record)
