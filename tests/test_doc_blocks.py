"""The code blocks of README.md and docs/*.md are complete and copy-pasteable: every bash block
parses, every fairseq-ctx tool it names exists, and the cheap blocks run end to end on a
generated corpus (the README's user-dir line, the data preparation of docs/context.md)."""
import re
import subprocess
from pathlib import Path

import pytest

from conftest import BIN_DIR

ROOT = Path(__file__).resolve().parents[1]
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
    env = {"PATH": f"{BIN_DIR}:/usr/bin:/bin", "OMP_NUM_THREADS": "1", "HOME": str(cwd)}
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
