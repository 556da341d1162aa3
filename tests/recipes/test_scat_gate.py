"""examples/context_mt/scat_gate.py: the gate of each gated model read on every SCAT test sentence
with context, over all of them and by where the antecedent is, written as a results table."""
import json
import random

from examples.context_mt import scat_gate
from tests.recipes.test_recipe_scat import write_scat


def test_the_gate_is_read_on_every_sentence_with_context_and_by_support(trained_baselines, tiny_data, tmp_path):
    scat = tmp_path / "scat"
    scat.mkdir()
    write_scat(scat, "test", 12, random.Random(3))
    checkpoint = trained_baselines["dat"][0] / "checkpoint_last.pt"
    scat_gate.main(["--scat-dir", str(scat), "--model", f"dat.seed1={checkpoint}", "--data", str(tiny_data),
                    "--results", str(tmp_path / "out")])
    record = json.loads((tmp_path / "out" / "scat_gate.json").read_text())
    groups = record["models"]["dat.seed1"]
    with_context = sum(1 for line in (scat / "highlighted.test.context.en").read_text().splitlines() if line.strip())
    assert 0 < with_context < 12 and groups["all"]["gate"]["sentences"] == with_context
    assert sum(g["gate"]["sentences"] for name, g in groups.items() if name.startswith("support: ")) == with_context
    assert 0 < groups["all"]["gate"]["min"] <= groups["all"]["gate"]["mean"] <= groups["all"]["gate"]["max"] < 1
    assert f"| dat.seed1 (all) | {with_context} |" in (tmp_path / "out" / "scat_gate.md").read_text()
