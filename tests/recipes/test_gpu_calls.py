"""examples/gpu_calls.py: each prepared GPU call is the recipe's own grid on ``--device cuda``, and
its ``--dry-run`` runs that grid on the CPU end to end on generated data in the recipes' layouts,
writing the results files the GPU call writes (every model × seed a row). The dry runs train 16
and 10 tiny runs (about 4 minutes on 2 cores): they are ``long`` tests, run by ``make test-full``."""
import json
import shlex
import subprocess

import pytest

from tests.helpers import run_module
from tests.recipes.test_recipe_multi30k_multisource import write_fixture
from tests.recipes.test_recipe_scat import write_data

def call(*argv: str) -> subprocess.CompletedProcess:
    return run_module("examples.gpu_calls", argv, capture_output=True, text=True, timeout=900)


def command_of(*argv: str) -> list:
    """The recipe commands a call runs (``--print``: shown, not run)."""
    result = call(*argv, "--print")
    assert result.returncode == 0, result.stderr
    return [shlex.split(line[2:]) for line in result.stdout.splitlines() if line.startswith("$ ")]


def test_the_gpu_calls_run_the_recipes_grids_on_the_gpu(tmp_path):
    [scat] = command_of("scat-grid", "--scat-dir", "s", "--multi30k-dir", "m", "--work", "w", "--results", "r")
    assert scat[1:3] == ["-m", "examples.context_mt.scat_en_fr"]
    models = scat[scat.index("--models") + 1:scat.index("--models") + 6]
    assert models == ["sentence_scat", "hmce", "hce", "ctx_concat", "hmce_target"]
    assert scat[scat.index("--seeds") + 1] == "1,2,3" and scat[scat.index("--device") + 1] == "cuda"
    assert "--sentence-updates" not in scat and "--context-updates" not in scat  # the recipe's published budgets
    multi30k, report = command_of("multi30k-grid", "--multi30k-tok", "t", "--seed", "2", "--work", "w", "--results", "r")
    assert multi30k[1:3] == ["-m", "examples.multimodal_mt.multi30k_multisource"]
    assert multi30k[multi30k.index("--models") + 1] == "text-only,serial,parallel,flat,hierarchical"
    assert multi30k[multi30k.index("--max-update") + 1] == "8000" and multi30k[multi30k.index("--pairs") + 1] == "fr"
    assert multi30k[multi30k.index("--seeds") + 1] == "2" and multi30k[multi30k.index("--device") + 1] == "cuda"
    assert report[-1] == "--report-only" and report[report.index("--seeds") + 1] == "1,2,3"
    missing = call("multi30k-grid", "--work", "w", "--results", "r")
    assert missing.returncode == 2 and "multi30k-grid needs --multi30k-tok" in missing.stderr


@pytest.mark.long
def test_the_scat_call_dry_run_writes_every_model_and_seed(tmp_path):
    scat, multi30k = write_data(tmp_path)
    result = call("scat-grid", "--dry-run", "--scat-dir", str(scat), "--multi30k-dir", str(multi30k), "--work",
                  str(tmp_path / "work"), "--results", str(tmp_path / "results"))
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "results" / "scat_en_fr.json").read_text())
    runs = {(row["model"], row["seed"]) for row in summary["rows"]}
    assert runs == {("sentence", 1)} | {(m, s) for m in ("sentence_scat", "hmce", "hce", "ctx_concat", "hmce_target")
                                        for s in (1, 2, 3)}
    assert summary["device"] == "cpu" and not summary["unfinished"]


@pytest.mark.long
def test_the_multi30k_call_dry_run_writes_every_model_of_its_seed(tmp_path):
    data = tmp_path / "multi30k"
    data.mkdir()
    write_fixture(data)
    for seed in ("1", "2"):
        result = call("multi30k-grid", "--dry-run", "--multi30k-tok", str(data), "--seed", seed, "--work",
                      str(tmp_path / "work"), "--results", str(tmp_path / "results"))
        assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "results" / "multi30k_multisource.json").read_text())
    models = ("text-only", "serial-fr", "parallel-fr", "flat-fr", "hierarchical-fr")
    assert set(summary["runs"]) == {f"{m}/seed{s}" for m in models for s in (1, 2)}  # both calls side by side
    assert [(run["name"], run["seed"]) for run in summary["unfinished"]] == [(m, 3) for m in models]
