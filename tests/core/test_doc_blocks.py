"""The code blocks of README.md and docs/*.md are complete and copy-pasteable: every bash block
parses, every fairseq-ctx tool it names exists, and the cheap blocks run end to end on a
generated corpus (the README's user-dir line, the data preparation and the quick start of
docs/context.md)."""
import ast
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers import BIN_DIR

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```bash\n(.*?)```", re.S)


def bash_blocks(path: Path):
    return BLOCK.findall(path.read_text(encoding="utf-8"))


def block_starting(path: Path, first_line: str) -> str:
    matches = [b for b in bash_blocks(path) if b.startswith(first_line)]
    assert len(matches) == 1, f"{path.name}: expected one bash block starting with {first_line!r}"
    return matches[0]


def console_scripts():
    setup = (ROOT / "setup.py").read_text(encoding="utf-8")
    return set(re.findall(r'"(fairseq-ctx-[a-z-]+)=', setup))


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_every_bash_block_parses_and_names_existing_tools(path):
    tools = console_scripts()
    for block in bash_blocks(path):
        result = subprocess.run(["bash", "-n"], input=block, capture_output=True, text=True)
        assert result.returncode == 0, f"{path.name}: block does not parse:\n{block}\n{result.stderr}"
        for name in re.findall(r"\bfairseq-ctx-[a-z-]+[a-z]", block):
            assert name in tools, f"{path.name}: names {name}, which setup.py does not install"


def run_block(block: str, cwd: Path) -> subprocess.CompletedProcess:
    """The block in a clean environment: the test interpreter's scripts on PATH (and its PYTHONPATH,
    so the blocks run the code under test)."""
    env = {"PATH": f"{BIN_DIR}:/usr/bin:/bin", "OMP_NUM_THREADS": "1", "HOME": str(cwd)}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=cwd, env=env, capture_output=True, text=True)


def test_readme_user_dir_line_prints_the_package(tmp_path):
    block = block_starting(ROOT / "README.md", "pip install torch")
    line = next(line for line in block.splitlines() if line.startswith("fairseq-ctx-user-dir"))
    result = run_block(line, tmp_path)
    assert result.returncode == 0, result.stderr
    assert (Path(result.stdout.strip()) / "context" / "__init__.py").is_file()


def test_context_data_preparation_block_runs(tmp_path):
    corpus = run_block("fairseq-ctx-make-corpus raw --train-docs 12 --valid-docs 3 --test-docs 3", tmp_path)
    assert corpus.returncode == 0, corpus.stderr
    block = block_starting(ROOT / "docs" / "context.md", "# raw/{train,valid,test}.{en,de}")
    result = run_block(block, tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    for split in ("train", "valid", "test"):
        lines = (tmp_path / "prep" / f"{split}.en").read_text().count("\n")
        docids = (tmp_path / "data-bin" / f"{split}.docids").read_text().splitlines()
        assert len(docids) == lines > 0
        assert (tmp_path / "data-bin" / f"{split}.en-de.en.bin").is_file()


def test_context_quick_start_runs_every_decoding_path(tmp_path):
    """Raw documents → sentencepiece → fairseq-preprocess → train → fairseq-generate,
    fairseq-interactive, fairseq-ctx-translate-doc, the hub → contrastive accuracy on a set in
    DiscEvalMT's layout; each decoding path logs its context once."""
    block = block_starting(ROOT / "docs" / "context.md", "# 1. Your documents")
    result = run_block(block, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    sources = (tmp_path / "raw" / "test.en").read_text().splitlines()
    sentences = sum(1 for line in sources if line.strip())
    for output in ("generate.out", "interactive.out"):
        assert sum(line.startswith("H-") for line in (tmp_path / output).read_text().splitlines()) == sentences
    translations = (tmp_path / "test.hyp.de").read_text().splitlines()
    assert [bool(line.strip()) for line in translations] == [bool(line.strip()) for line in sources]
    hub_output = [line for line in result.stdout.splitlines() if line.startswith("[")]
    assert len(hub_output) == 1 and len(ast.literal_eval(hub_output[0])) == 2
    report = json.loads((tmp_path / "contrastive.json").read_text())
    assert report["total"] == 40 and 0.0 <= report["accuracy"] <= 1.0
    context = ("source context 1 previous sentence, target context 1 previous sentence (the model's own "
               "translations)")
    lines = [line for line in result.stderr.splitlines() if context in line]
    assert [("(decoding)" in line, "(fairseq-interactive)" in line, "DocumentTranslator" in line) for line in lines] \
        == [(True, False, False), (False, True, False), (False, False, True), (False, False, True)]


def test_multisource_quick_start_runs_from_raw_text_to_a_score(tmp_path):
    """Generated corpus → fairseq-preprocess (the second source with its own dictionary) → train →
    fairseq-generate without repeating the inputs → fairseq-ctx-score → fairseq-ctx-adversarial."""
    block = block_starting(ROOT / "docs" / "multisource.md", "# 1. Your data: raw/{train,valid,test}.{en,de,fr}")
    result = run_block(block, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sum(line.startswith("H-") for line in (tmp_path / "generate.out").read_text().splitlines()) == 40
    score = json.loads((tmp_path / "score.json").read_text())
    assert 0.0 <= score["bleu"] <= 100.0
    assert set(json.loads((tmp_path / "adversarial.json").read_text())) == {"original", "shuffled img", "shuffled fr"}


def test_embedding_quick_start_runs_from_raw_text_to_retrieval_errors(tmp_path):
    """Generated corpus → one shared dictionary → fairseq-preprocess per pair → train T-MDE →
    fairseq-ctx-embed → fairseq-ctx-xsim, both directions."""
    block = block_starting(ROOT / "docs" / "embedding.md", "# 1. Your data: raw/{train,valid,test}.{lang}")
    result = run_block(block, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = len((tmp_path / "raw" / "test.xa").read_text().splitlines())
    import numpy as np

    assert np.load(tmp_path / "xa.npy").shape[0] == np.load(tmp_path / "xb.npy").shape[0] == rows
    report = json.loads((tmp_path / "xsim.json").read_text())
    assert report["results"] and all(0 <= error["errors"] <= rows for directions in report["results"].values()
                                     for error in directions.values())


def test_analysis_quick_start_compares_the_heads_of_two_models(tmp_path):
    """Generated corpus → two tiny transformers (one with drophead) → fairseq-ctx-analyze-heads with
    --compare-path: inter-head tables of both and the layer × layer comparison."""
    block = block_starting(ROOT / "docs" / "analysis.md", "# 1. A corpus (yours: raw/{train,valid,test}.{en,de}")
    result = run_block(block, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    heads = json.loads((tmp_path / "heads" / "heads.json").read_text())
    assert set(heads) == {"base", "drophead"} and all(heads[tag] for tag in heads)
    layers = json.loads((tmp_path / "heads" / "layers.json").read_text())
    assert layers and all(0.0 <= value <= 1.0 + 1e-6 for item in layers.values() for row in item["cka"] for value in row)
