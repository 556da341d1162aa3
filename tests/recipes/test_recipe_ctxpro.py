"""The ctxpro recipe (examples/context_mt/ctxpro_en_fr.py) on a set in ctxpro's released layout
with two trained models: per rule, the counts are the generative tool's (which are ctxpro score's),
the difference is the two models' accuracies apart, the intervals are bootstrap intervals, and a
rerun translates nothing again."""
import json

import pytest

from devtools.bootstrap_intervals import accuracy_interval, paired_difference_interval
from tests.context.test_ctxpro_sets import write_set

pytest.importorskip("ctxpro")



def test_bootstrap_intervals_of_known_outcomes():
    assert accuracy_interval([True] * 5) == {"accuracy": 1.0, "low": 1.0, "high": 1.0}
    half = accuracy_interval([True, False] * 200)
    assert half["accuracy"] == 0.5 and 0.44 < half["low"] < 0.47 and 0.53 < half["high"] < 0.56  # ±1.96·0.025
    same = paired_difference_interval([True, False, True], [True, False, True])
    assert (same["difference"], same["low"], same["high"], same["p"]) == (0.0, 0.0, 0.0, 1.0)
    better = paired_difference_interval([True] * 60, [True] * 30 + [False] * 30)
    assert better["difference"] == 0.5 and better["low"] > 0.3 and better["p"] == 0.0


def test_the_recipe_reports_each_rule_of_each_model_against_the_baseline(trained_baselines, tiny_data, tmp_path):
    from fairseq_ctx.context import hub

    from examples.context_mt import ctxpro_en_fr as recipe
    write_set(tmp_path, hub.load(str(trained_baselines["dat"][0] / "checkpoint_last.pt"), beam=2))
    argv = ["--set", str(tmp_path / "set.json"), "--model",
            f"sentence={trained_baselines['transformer'][0] / 'checkpoint_last.pt'}", "--model",
            f"dat={trained_baselines['dat'][0] / 'checkpoint_last.pt'}", "--baseline", "sentence", "--data",
            str(tiny_data), "--lang", "de", "--beam", "2", "--work", str(tmp_path / "work"), "--results",
            str(tmp_path / "results")]
    recipe.main(argv)
    commands = (tmp_path / "work" / "commands.sh").read_text()
    assert commands.count("fairseq-ctx-generative") == 2
    result = json.loads((tmp_path / "results" / "ctxpro_en_fr.json").read_text())
    rows = {row["rule"]: row for row in result["rules"]["set"]}
    assert list(rows) == ["A.RULE", "B.RULE", "all"]
    for name in ("sentence", "dat"):
        tool = json.loads((tmp_path / "work" / f"set.{name}.json").read_text())
        for rule, scores in tool["rules"].items():
            assert rows[rule]["accuracy"][name]["accuracy"] == scores["accuracy"]
        assert rows["all"]["accuracy"][name]["accuracy"] == tool["accuracy"]
        kept = (tmp_path / "results" / "ctxpro_en_fr.translations" / f"set.{name}.fr").read_text().splitlines()
        assert kept == [e["translation"] for e in tool["examples"]]
    for row in rows.values():
        difference = row["difference"]["dat"]
        assert difference["difference"] == pytest.approx(row["accuracy"]["dat"]["accuracy"]
                                                         - row["accuracy"]["sentence"]["accuracy"])
        assert difference["low"] <= difference["difference"] <= difference["high"]
    markdown = (tmp_path / "results" / "ctxpro_en_fr.md").read_text()
    assert "| rule | examples | sentence | dat | dat − sentence |" in markdown
    assert "3 differences are reported" in markdown
    recipe.main(argv)
    assert (tmp_path / "work" / "commands.sh").read_text() == commands  # nothing translated again


def test_the_recipe_refuses_a_baseline_that_is_not_a_model(tmp_path, capsys):
    from examples.context_mt import ctxpro_en_fr as recipe
    (tmp_path / "s.json").write_text("[]")
    (tmp_path / "s.input").write_text("")
    (tmp_path / "m.pt").write_text("")
    with pytest.raises(SystemExit):
        recipe.main(["--set", str(tmp_path / "s.json"), "--model", f"a={tmp_path / 'm.pt'}", "--baseline", "b",
                     "--data", str(tmp_path)])
    assert "--baseline b is none of the --model names (a)" in capsys.readouterr().err
