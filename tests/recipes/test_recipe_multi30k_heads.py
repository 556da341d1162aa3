"""The inter-head diversity recipe on Multi30k (examples/cka/multi30k_heads.py) end to end on the
multi-source recipe's generated fixture: the baseline is the multi-source recipe's text-only
model, the controls change it, and the tables' similarity, BLEU and verdicts are the numbers of
the head analyses and of the kept hypotheses."""
import json
import logging
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers import BIN_DIR
from devtools.seed_statistics import direction_verdict, no_cost_verdict, paired_t_test
from tests.recipes.test_recipe_multi30k_multisource import SMALL, write_fixture

SETTINGS = [*SMALL[:SMALL.index("--heads")], "--heads", "4", *SMALL[SMALL.index("--heads") + 2:]]


@pytest.fixture(scope="module")
def heads_recipe():
    from examples.cka import multi30k_heads

    yield multi30k_heads


@pytest.fixture(scope="module")
def controls(heads_recipe, tmp_path_factory):
    """Baseline, drophead 0.3 and HSIC 0.1 with seeds 1 and 2, and the multi-source recipe's
    text-only model with seed 1, all with the same settings."""
    root = tmp_path_factory.mktemp("heads")
    data, work = root / "multi30k", root / "work"
    data.mkdir()
    write_fixture(data)
    from examples.multimodal_mt import multi30k_multisource

    multi30k_multisource.main([str(data), "--work", str(root / "multisource"), "--models", "text-only", "--pairs", "fr",
                               "--jobs", "1", *SETTINGS])
    heads_recipe.main([str(data), "--work", str(work), "--seeds", "1,2", "--variants", "baseline,drophead0.3,hsic0.1",
                       "--max-positions", "300", "--jobs", "1", *SETTINGS])
    results = work / "results-tables"
    return SimpleNamespace(data=data, work=work, root=root, results=results,
                           summary=json.loads((results / "multi30k_heads.json").read_text()),
                           table=(results / "multi30k_heads.md").read_text())


def test_the_baseline_is_the_multi_source_recipes_text_only_model(controls):
    text_only = json.loads((controls.root / "multisource" / "results" / "text-only.json").read_text())
    baseline = json.loads((controls.work / "seed1" / "results" / "baseline.json").read_text())
    assert baseline["valid_bleu"] == text_only["valid_bleu"]
    assert "--criterion head_diversity --label-smoothing 0.1 " in baseline["train_command"]
    same = controls.root / "multisource" / "results-tables" / "hypotheses" / "text-only.seed1.test_2016_flickr.de"
    assert (controls.results / "hypotheses" / "baseline.seed1.test_2016_flickr.de").read_text() == same.read_text()
    for variant, option in (("drophead0.3", "--drophead 0.3"), ("hsic0.1", "--hsic-lambda 0.1")):
        record = json.loads((controls.work / "seed1" / "results" / f"{variant}.json").read_text())
        assert f"--criterion head_diversity --label-smoothing 0.1 {option} " in record["train_command"]


def test_the_baseline_can_be_the_multi_source_run_itself_without_training_it_again(heads_recipe, controls, tmp_path):
    source, work = controls.root / "multisource", tmp_path / "adopted"
    before = {path: path.stat().st_mtime_ns for path in source.rglob("*") if path.is_file()}
    heads_recipe.main([str(controls.data), "--work", str(work), "--seed", "1", "--variants", "baseline",
                       "--baseline-from", str(source), "--max-positions", "300", "--jobs", "1", *SETTINGS])
    record = json.loads((work / "results" / "baseline.json").read_text())
    text_only = json.loads((source / "results" / "text-only.json").read_text())
    assert (record["valid_bleu"], record["train_command"]) == (text_only["valid_bleu"], text_only["train_command"])
    assert record["baseline_from"] == str((source / "results" / "text-only.json").resolve())
    assert (work / "checkpoints" / "baseline").resolve() == (source / "checkpoints" / "text-only").resolve()
    results = work / "results-tables"
    same = source / "results-tables" / "hypotheses" / "text-only.seed1.test_2016_flickr.de"
    assert (results / "hypotheses" / "baseline.seed1.test_2016_flickr.de").read_text() == same.read_text()
    adopted = json.loads((work / "heads" / "baseline" / "heads.json").read_text())["baseline"]
    trained = json.loads((controls.work / "seed1" / "heads" / "baseline" / "heads.json").read_text())["baseline"]
    assert {m: v["mean_cka"] for m, v in adopted.items()} == pytest.approx({m: v["mean_cka"] for m, v in trained.items()})
    assert "The baseline of seed 1 is the multi-source recipe's text-only run of that seed (`--baseline-from`)" \
        in (results / "multi30k_heads.md").read_text()
    # training never writes through the link: without --baseline-from the baseline is not trained there
    (work / "results" / "baseline.json").unlink()
    with pytest.raises(SystemExit, match="links to another run's checkpoints, which training would write into"):
        heads_recipe.main([str(controls.data), "--work", str(work), "--seed", "1", "--variants", "baseline",
                           "--max-positions", "300", "--jobs", "1", *SETTINGS])
    # each variant's job gets the recipe's options, --baseline-from too: a job without the baseline runs
    heads_recipe.main([str(controls.data), "--work", str(work), "--seed", "1", "--variants", "drophead0.3",
                       "--baseline-from", str(source), "--report-only", *SETTINGS])
    assert before == {path: path.stat().st_mtime_ns for path in source.rglob("*") if path.is_file()}


def test_a_baseline_from_a_run_without_the_seed_or_with_other_settings_is_refused_before_any_work(
        heads_recipe, controls, tmp_path, capsys):
    source, work = str(controls.root / "multisource"), tmp_path / "refused"
    for extra, message in (
            (["--seeds", "1,2"], f"{Path(source).resolve()}/seed2/results/text-only.json does not exist"),
            (["--seed", "1", "--lr", "5e-3"], "text-only.json was trained with other settings (lr: 0.01 there, 0.005 now)")):
        with pytest.raises(SystemExit):
            heads_recipe.main([str(controls.data), "--work", str(work), "--baseline-from", source, *SETTINGS, *extra])
        assert message in capsys.readouterr().err
        assert not (work / "data-bin").exists() and not (work / "seed1").exists()


def test_similarity_is_the_mean_of_the_head_analysis_and_the_verdicts_follow_it(controls):
    rows = {row["name"]: row for row in controls.summary["similarity"]}
    assert sorted(rows) == ["baseline", "drophead0.3", "hsic0.1"]
    for name, row in rows.items():
        for seed in (1, 2):
            modules = json.loads((controls.work / f"seed{seed}" / "heads" / name / "heads.json").read_text())[name]
            assert {m["kind"] for m in modules.values()} == {"encoder_self", "decoder_self", "encoder_decoder"}
            per_seed = row["per_seed"][str(seed)]
            assert per_seed["cka"] == pytest.approx(sum(m["mean_cka"] for m in modules.values()) / len(modules))
            assert per_seed["svcca"] == pytest.approx(sum(m["mean_svcca"] for m in modules.values()) / len(modules))
            assert f"| {name} | {seed} | {per_seed['cka']:.4f} | {per_seed['svcca']:.4f} |" in controls.table
    base = rows["baseline"]
    for name, sign in (("drophead0.3", 1), ("hsic0.1", -1)):
        versus = rows[name]["vs_baseline_cka"]
        test = paired_t_test([rows[name]["per_seed"][s]["cka"] for s in ("1", "2")],
                             [base["per_seed"][s]["cka"] for s in ("1", "2")])
        assert versus["delta"]["mean"] == pytest.approx(test.mean) and versus["p"] == pytest.approx(test.p)
        expected = direction_verdict(sign * test.mean, test.p)
        assert versus["verdict"] == expected and f"{name}: {expected}" in controls.table
        assert rows[name]["per_seed"]["1"]["cka"] != base["per_seed"]["1"]["cka"]  # the control changes the model
    assert rows["hsic0.1"]["per_seed"]["1"]["valid_hsic"] > 0 and base["per_seed"]["1"]["valid_hsic"] is None
    for heading in ("Yun (2022), Table 4.5", "Yun (2022), Table 4.4", "- Date:", "- Machine:", "- Precision: fp32",
                    "- Seeds: 1, 2\n", "- Budget: 40 updates of 50 sentences per variant",
                    "- Command: `python -m examples.cka.multi30k_heads", "- Convergence: baseline (seed 1): not judged",
                    "- Verdicts: an expected direction held when"):
        assert heading in controls.table
    assert (controls.results / "heads_drophead0.3.seed1.png").read_bytes()[:4] == b"\x89PNG"


def test_bleu_is_sacrebleus_on_the_kept_hypotheses_and_the_no_cost_verdict_follows_it(controls):
    rows = {row["name"]: row for row in controls.summary["test_sets"]["test_2016_flickr"]["variants"]}
    reference = str(controls.data / "test_2016_flickr.lc.norm.tok.de")
    for name, row in rows.items():
        for seed, scores in row["per_seed"].items():
            printed = subprocess.run([str(BIN_DIR / "sacrebleu"), reference, "-i", str(controls.results / scores["hypotheses"]),
                                      "-m", "bleu", "--tokenize", "none", "-w", "2"], capture_output=True, text=True,
                                     check=True).stdout
            assert json.loads(printed)["score"] == round(scores["bleu"], 2)
        if name != "baseline":
            versus = row["vs_baseline"]
            assert versus["verdict"] == no_cost_verdict(versus["delta_bleu"]["mean"], versus["t_bleu"]["p"])


def test_a_variant_is_resumed_from_where_it_stopped(heads_recipe, controls, tmp_path):
    """A variant whose head analysis did not finish is listed with its command, which runs only the analysis."""
    import shutil

    work = tmp_path / "work"
    shutil.copytree(controls.work / "seed1", work / "seed1")
    record_path = work / "seed1" / "results" / "hsic0.1.json"
    record = json.loads(record_path.read_text())
    del record["heads"]
    record_path.write_text(json.dumps(record))
    shutil.rmtree(work / "seed1" / "heads" / "hsic0.1")
    args = [str(controls.data), "--work", str(work), "--seeds", "1", "--variants", "baseline,hsic0.1",
            "--max-positions", "300", "--jobs", "1", *SETTINGS]
    heads_recipe.main([*args, "--report-only"])
    summary = json.loads((work / "results-tables" / "multi30k_heads.json").read_text())
    assert [(u["name"], u["state"]) for u in summary["unfinished"]] == [("hsic0.1", "missing: head analysis")]
    # the variants with results are reported (drophead0.3's results file too, though not asked for)
    assert [row["name"] for row in summary["similarity"]] == ["baseline", "drophead0.3"]
    heads_recipe.main(summary["unfinished"][0]["command"].split()[3:])  # python -m MODULE ARGS
    again = json.loads((work / "seed1" / "heads" / "hsic0.1" / "heads.json").read_text())
    first = json.loads((controls.work / "seed1" / "heads" / "hsic0.1" / "heads.json").read_text())
    assert again == first  # the same checkpoint and validation positions give the same numbers
    assert json.loads(record_path.read_text())["train_wall_s"] == record["train_wall_s"]  # not trained again


def test_runs_of_an_earlier_results_folder_stand_in_for_a_work_directory_that_is_gone(heads_recipe, controls, tmp_path):
    """Seed 1's work directory gone, its runs come from the results folder it was reported in: not
    trained again, and the tables' numbers and verdicts are those of the full work directory."""
    import shutil

    work, results = tmp_path / "work", tmp_path / "tables"
    shutil.copytree(controls.work / "seed2", work / "seed2")
    heads_recipe.main([str(controls.data), "--work", str(work), "--seeds", "1,2", "--variants",
                       "baseline,drophead0.3,hsic0.1", "--max-positions", "300", "--jobs", "1",
                       "--earlier-results", str(controls.results), "--results", str(results), *SETTINGS])
    assert not (work / "seed1" / "checkpoints").exists()
    summary = json.loads((results / "multi30k_heads.json").read_text())
    for key in ("similarity", "test_sets", "convergence_by_run", "runs", "seeds"):
        assert summary[key] == controls.summary[key], key
    assert summary["unfinished"] == []
    assert summary["earlier_results"]["runs"] == ["baseline/seed1", "drophead0.3/seed1", "hsic0.1/seed1"]
    for kept in (controls.results / "hypotheses").iterdir():
        assert (results / "hypotheses" / kept.name).read_text() == kept.read_text()
    pictures = sorted(path.name for path in controls.results.glob("*.png"))
    assert pictures == sorted(path.name for path in results.glob("*.png"))
    for name in pictures:  # each variant's first seed is seed 1: its heatmap comes from the earlier folder
        assert (results / name).read_bytes() == (controls.results / name).read_bytes()
    assert f"Runs reported from an earlier results folder (`--earlier-results {controls.results}`" in \
        (results / "multi30k_heads.md").read_text()


def test_an_earlier_results_folder_of_other_settings_is_refused_before_any_work(heads_recipe, controls, tmp_path,
                                                                                  capsys):
    work = tmp_path / "refused"
    with pytest.raises(SystemExit):
        heads_recipe.main([str(controls.data), "--work", str(work), "--seeds", "1", "--max-positions", "300",
                           "--earlier-results", str(controls.results), *SETTINGS, "--lr", "5e-3"])
    assert "multi30k_heads.json was written by runs with other settings (lr: 0.01 there, 0.005 now)" in \
        capsys.readouterr().err
    assert not (work / "seed1" / "data-bin").exists()
    with pytest.raises(SystemExit):
        heads_recipe.main([str(controls.data), "--work", str(work), "--seeds", "1", "--max-positions", "300",
                           "--earlier-results", str(controls.results), "--results", str(controls.results), *SETTINGS])
    assert f"--results {controls.results.resolve()} is the --earlier-results folder" in capsys.readouterr().err
    assert not (work / "seed1" / "data-bin").exists()


def test_variants_are_named_by_their_control_and_value(heads_recipe, tmp_path, capsys):
    base = ["--criterion", "head_diversity", "--label-smoothing", "0.1"]
    assert heads_recipe.variant_criterion("baseline") == base
    assert heads_recipe.variant_criterion("drophead0.1") == [*base, "--drophead", "0.1"]
    assert heads_recipe.variant_criterion("hsic1e-7") == [*base, "--hsic-lambda", "1e-7"]
    assert [heads_recipe.variant_criterion(name) for name in ("drophead1.5", "hsic0", "ortho1", "baseline2")] == [None] * 4
    with pytest.raises(SystemExit):
        heads_recipe.main([str(tmp_path), "--variants", "baseline,drophead1.5"])
    assert "multi30k_heads.py: error: --variants 'baseline,drophead1.5': give distinct variants" in \
        capsys.readouterr().err


def test_head_analysis_without_matplotlib_writes_its_tables_and_says_why_no_pictures(controls, tmp_path, monkeypatch,
                                                                                      caplog):
    from fairseq_ctx.cli import analyze_heads
    from fairseq_ctx.cli.tool_logging import QUIET_LIBRARIES

    for name in QUIET_LIBRARIES:  # the tool quiets them for the rest of the process; the later tests need them back
        monkeypatch.setattr(logging.getLogger(name), "level", logging.getLogger(name).level)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    out = tmp_path / "heads"
    with caplog.at_level(logging.WARNING):
        analyze_heads.main([str(controls.work / "seed1" / "data-bin"), "--path",
                            str(controls.work / "seed1" / "checkpoints" / "baseline" / "checkpoint_best.pt"),
                            "--max-positions", "50", "--output-dir", str(out), "--tag", "baseline"])
    assert sorted(p.name for p in out.iterdir()) == ["heads.csv", "heads.json"]
    warned = [r.getMessage() for r in caplog.records if "matplotlib" in r.getMessage()]
    assert len(warned) == 1 and warned[0].endswith("writing heads.csv and heads.json without the PNG heatmaps")


def test_hsic_weight_gives_the_terms_weight_and_gradient_share_linear_in_lambda(controls, tmp_path):
    from examples.cka import hsic_weight  # examples/cka, on the path through the heads_recipe fixture

    seed_dir = controls.work / "seed1"
    hsic_weight.main([str(seed_dir / "checkpoints" / "baseline" / "checkpoint_best.pt"), str(seed_dir / "data-bin"),
                      "--batches", "2", "--max-tokens", "300", "--lambdas", "1e-7,0.01", "--results", str(tmp_path)])
    rows = json.loads((tmp_path / "hsic_weight.json").read_text())["batches"]
    assert len(rows) == 2 and all(row[key] > 0 for row in rows for key in
                                  ("ce_per_token", "hsic", "ce_gradient", "hsic_gradient", "largest_tensor_share"))
    ce = sum(row["ce_per_token"] for row in rows) / 2
    hsic = sum(row["hsic"] for row in rows) / 2
    share = sum(row["hsic_gradient"] / row["ce_gradient"] for row in rows) / 2
    largest = max(row["largest_tensor_share"] for row in rows)
    # the squared global share is a weighted mean of the tensors' squared shares: the largest is at least as large
    assert all(row["largest_tensor_share"] >= row["hsic_gradient"] / row["ce_gradient"] * (1 - 1e-6) for row in rows)
    table = (tmp_path / "hsic_weight.md").read_text()
    assert f"| 1e-07 | {1e-7 * hsic / ce:.3g} | {1e-7 * share:.3g} | {1e-7 * largest:.3g} |" in table
    assert f"| 0.01 | {0.01 * hsic / ce:.3g} | {0.01 * share:.3g} | {0.01 * largest:.3g} |" in table
