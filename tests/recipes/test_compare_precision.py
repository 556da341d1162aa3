"""examples/multimodal_mt/compare_precision.py: float32 and --amp results of the same recipe side by
side, judged by the stated BLEU tolerance; runs of other settings are refused."""
import json
from pathlib import Path

import pytest

from examples.multimodal_mt import compare_precision

SETTINGS = {"max_update": 2000, "batch_size": 64, "lr": 0.001, "seed": 1, "workers": 1}


def write(path: Path, models, settings=SETTINGS, per_model=False) -> str:
    if per_model:
        path.write_text(json.dumps({**models[0], "settings": settings}))
    else:
        path.write_text(json.dumps({"settings": settings, "models": models}))
    return str(path)


def model(name, bleu, chrf, curve):
    return {"name": name, "bleu": bleu, "chrf": chrf, "valid_bleu": curve, "train_wall_s": 100.0}


def test_models_on_both_sides_are_compared_within_the_tolerance(tmp_path):
    fp32 = write(tmp_path / "fp32.json", [model("text-only", 30.06, 54.35, [[200, 1.9], [400, 8.1]]),
                                          model("serial-fr", 31.69, 56.31, [[200, 3.5], [400, 8.7]])])
    amp = [write(tmp_path / "t.json", [model("text-only", 30.31, 54.90, [[200, 2.0], [400, 8.0]])],
                 {**SETTINGS, "amp": True, "workers": 2}, per_model=True),
           write(tmp_path / "s.json", [model("serial-fr", 31.00, 55.80, [[200, 3.0], [400, 9.0]])],
                 {**SETTINGS, "amp": True}, per_model=True)]
    compare_precision.main(["--fp32", fp32, "--amp", *amp, "--out", str(tmp_path / "out")])
    result = json.loads((tmp_path / "out" / "precision.json").read_text())
    rows = {row["name"]: row for row in result["models"]}
    assert rows["text-only"]["bleu_diff"] == pytest.approx(0.25) and rows["text-only"]["within_tolerance"]
    assert rows["serial-fr"]["bleu_diff"] == pytest.approx(-0.69) and not rows["serial-fr"]["within_tolerance"]
    text = (tmp_path / "out" / "precision.md").read_text()
    assert "| text-only | 2000 | 30.06 | 30.31 | +0.25 |" in text and "400: 8.10 / 8.00" in text


def test_runs_of_other_settings_are_refused(tmp_path):
    fp32 = write(tmp_path / "fp32.json", [model("text-only", 30.0, 54.0, [[200, 1.9]])])
    amp = write(tmp_path / "amp.json", [model("text-only", 30.0, 54.0, [[200, 1.9]])], {**SETTINGS, "lr": 0.002})
    with pytest.raises(SystemExit, match="other settings .*lr"):
        compare_precision.main(["--fp32", fp32, "--amp", amp, "--out", str(tmp_path / "out")])
