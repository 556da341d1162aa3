"""What ships speaks to package users: no file refers to material they do not have (the
developers' specification or shared folder), nor to the machine it was developed on."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = [
    (re.compile(r"\bSPEC\b"), "the developers' specification"),
    (re.compile(r"\.\./shared"), "the developers' shared folder"),
    (re.compile(r"(?i)\bmeasured here\b|\bGPU (was |has been )?lent\b|\bno GPU lent\b"), "the development machine"),
    (re.compile(r"(?<![\w.~-])/work/\w"), "a path on the development machine"),
]


def shipped_files():
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for name in names:
        path = ROOT / name
        if name.startswith(("tests/fixtures/", ".ci/")) or path.suffix in (".png", ".npy", ".ckpt") or not path.is_file():
            continue
        yield name, path


def test_no_shipped_file_refers_to_developer_material():
    hits = []
    for name, path in shipped_files():
        if name == "tests/core/test_shipped_text.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for pattern, what in FORBIDDEN:
                if pattern.search(line):
                    hits.append(f"{name}:{number}: refers to {what}: {line.strip()[:100]}")
    assert not hits, "\n".join(hits)


def test_readme_is_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 200


SYS_PATH_EDIT = re.compile(r"sys\.path\s*(\.(insert|append|extend|remove)\b|\[[^\]]*\]\s*=|\s*[+]?=)|syspath_prepend|"
                           r"spec_from_file_location")


def test_no_python_file_edits_the_import_path():
    """Recipes, benchmarks and tests import each other as packages from the repository root."""
    hits = [f"{name}:{number}: {line.strip()}" for name, path in shipped_files() if path.suffix == ".py"
            and name != "tests/core/test_shipped_text.py"
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if SYS_PATH_EDIT.search(line)]
    assert not hits, "\n".join(hits)
