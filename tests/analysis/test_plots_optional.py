"""matplotlib is optional (the ``plots`` extra): without it every tool and recipe that draws says
so, naming ``pip install "fairseq-ctx[plots]"``, before any computation; the tools whose plots
come with tables or dumps (analyze-heads, attention-plot) write those. Also analyze-heads
comparing a model without target-side context with one that reads it."""
import csv
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from fairseq_ctx.core.plots import PLOTS_INSTALL
from tests.context.test_inference_paths import train

INSTALL = 'pip install "fairseq-ctx[plots]"'


@pytest.fixture
def no_matplotlib(monkeypatch):
    """Imports of matplotlib fail and find_spec finds none, as on a base install."""
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)


@pytest.fixture(scope="module")
def hmce_checkpoints(tiny_data, tmp_path_factory):
    """hmce with source context only and hmce that also reads the previous target sentence, one update each."""
    root = tmp_path_factory.mktemp("heads")
    source = train(tiny_data, root / "source", ["--task", "context_translation", "--arch", "hmce"], 1)
    target = train(tiny_data, root / "target", ["--task", "context_translation", "--arch", "hmce",
                                                "--target-context-size", "1"], 1)
    return source / "checkpoint_last.pt", target / "checkpoint_last.pt"


def test_the_install_command_is_the_extra():
    assert PLOTS_INSTALL == INSTALL


def test_plot_embeddings_says_what_to_install_before_reading_anything(no_matplotlib, tmp_path, capsys):
    from fairseq_ctx.cli import plot_embeddings

    rows = np.random.RandomState(0).randn(6, 4)
    rows[2] = np.nan  # a bad file would be reported if the tool read it first
    np.save(tmp_path / "x.npy", rows)
    with pytest.raises(SystemExit) as stop:
        plot_embeddings.main(["--input", f"x={tmp_path / 'x.npy'}", "--output", str(tmp_path / "x.png")])
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert "fairseq-ctx-plot-embeddings needs matplotlib, which is not installed: " + INSTALL in err
    assert "NaN" not in err and not (tmp_path / "x.png").exists()


def test_analyze_heads_writes_its_tables_without_matplotlib(no_matplotlib, hmce_checkpoints, tiny_data, tmp_path,
                                                             caplog, capsys):
    from fairseq_ctx.cli import analyze_heads

    source, _ = hmce_checkpoints
    out = tmp_path / "heads"
    analyze_heads.main([str(source), "--data", str(tiny_data), "--compare-path", str(source), "--split", "valid",
                        "--max-positions", "60", "--output-dir", str(out), "--tag", "a", "--compare-tag", "b"])
    assert "mean inter-head CKA" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["heads.csv", "heads.json", "layers.csv", "layers.json"]
    assert {row["model"] for row in csv.DictReader(open(out / "heads.csv"))} == {"a", "b"}
    warning = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "matplotlib" in r.getMessage()]
    assert len(warning) == 1 and INSTALL in warning[0] and "without the PNG heatmaps" in warning[0]


def test_analyze_heads_compares_with_a_model_that_reads_target_context(hmce_checkpoints, tiny_data, tmp_path):
    """Each checkpoint reads batches of its own task: the second gets its target-context entries
    (the previous reference sentence), over the same sentences as the first."""
    from fairseq_ctx.cli import analyze_heads

    source, target = hmce_checkpoints
    for first, second in ((source, target), (target, source)):
        out = tmp_path / f"{first.parent.name}-{second.parent.name}"
        analyze_heads.main([str(first), "--data", str(tiny_data), "--compare-path", str(second), "--split", "valid",
                            "--max-positions", "60", "--output-dir", str(out)])
        layers = json.load(open(out / "layers.json"))
        assert len(layers["encoder_self"]["cka"]) == 2
        report = json.load(open(out / "heads.json"))
        for name, module in report["model"].items():
            if module["kind"] != "other":
                assert module["positions"] == report["other"][name]["positions"] == 60, name


def test_attention_plot_writes_its_json_without_matplotlib(no_matplotlib, multimodal_data, tmp_path, caplog, capsys):
    from fairseq_ctx.cli import attention_plot

    save_dir = train(multimodal_data, tmp_path / "ckpt", ["--task", "multimodal_translation", "--feature-inputs",
                                                          "img", "--source-lang", "en", "--target-lang", "de",
                                                          "--arch", "hierarchical_attention_decoder"], 1)
    out = tmp_path / "attention"
    attention_plot.main([str(save_dir), "--checkpoint-file", "checkpoint_last.pt", "--data", str(multimodal_data),
                         "--feature-inputs", "img", "--sentences", "0,1", "--out", str(out)])
    assert capsys.readouterr().out.strip() == f"wrote {out}.json"
    assert len(json.load(open(f"{out}.json"))["sentences"]) == 2 and not Path(f"{out}.png").exists()
    assert any(INSTALL in r.getMessage() for r in caplog.records if r.levelname == "WARNING")


def test_a_recipe_stops_before_training(no_matplotlib, tmp_path, monkeypatch):
    from examples.context_mt import compare

    work = tmp_path / "work"
    monkeypatch.setattr(sys, "argv", ["compare.py", "--work", str(work), "--out", str(tmp_path / "out")])
    with pytest.raises(SystemExit, match=r"compare\.py: compare\.py \(compare_\{setting\}\.png\) needs matplotlib, "
                                         r"which is not installed: " + INSTALL.replace("[", r"\[").replace("]", r"\]")):
        compare.main()
    assert not work.exists()
