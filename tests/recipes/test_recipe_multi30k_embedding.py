"""The Multi30k embedding recipe (examples/embedding/multi30k_embedding.py) end to end on a
200-sentence fixture in Multi30k's layout, written from the generated multilingual corpus: one
seed in the work directory itself with a fixed budget, and two seeds side by side in two jobs,
trained by the plateau rule, with an extra Tatoeba-style test set."""
import json
import os
from pathlib import Path

import pytest

from fairseq_ctx.embedding.demo.multilingual_corpus import MultilingualSizes, write_multilingual_corpus
from fairseq_ctx.embedding.xsim import xsim_files

from examples.embedding.multi30k_embedding_data import RecipeError
from examples.embedding.multi30k_models import Budget, ModelRun, train_args
from devtools.machine_facts import MachineFacts
from devtools.plateau_rule import checkpoint_updates
from devtools.recipe_runs import chosen_precision
from devtools.seed_statistics import direction_verdict, t_test

HERE = chosen_precision("cpu")  # what --precision auto, the default, trains with (the suite forces the probe: conftest.py)

# Generated languages standing in for Multi30k's: the pivots pa, pb play en, de.
AS_MULTI30K = {"en": "pa", "de": "pb", "fr": "xa", "cs": "xb"}
SLICES = {"train": ("train", 200), "valid": ("val", 30), "test": ("test_2016_flickr", 40)}
MODELS = ["tmde", "ct_mde", "tmde_f", "tmde_p", "laser"]
TINY = ["--size", "tiny", "--bpe-vocab", "120"]


def load_recipe():
    from examples.embedding import multi30k_embedding

    return multi30k_embedding


def write_fixture(root: Path) -> Path:
    """{train,val,test_2016_flickr}.lc.norm.tok.{en,de,fr,cs}: 200 / 30 / 40 aligned lines."""
    write_multilingual_corpus(str(root / "generated"), MultilingualSizes(60, 10, 15), seed=2)
    data = root / "multi30k"
    data.mkdir()
    for split, (name, count) in SLICES.items():
        for lang, generated in AS_MULTI30K.items():
            lines = (root / "generated" / f"{split}.{generated}").read_text().splitlines()[:count]
            assert len(lines) == count
            (data / f"{name}.lc.norm.tok.{lang}").write_text("".join(line + "\n" for line in lines))
    return data


def write_tatoeba(root: Path, data: Path) -> tuple:
    """A Tatoeba-style pair tatoeba.fra-eng.{fra,eng}: 12 aligned lines (test lines 40..51 of the
    generated corpus, which the Multi30k fixture does not use)."""
    paths = []
    for lang, suffix in (("fr", "fra"), ("en", "eng")):
        lines = (root / "generated" / f"test.{AS_MULTI30K[lang]}").read_text().splitlines()[40:52]
        assert len(lines) == 12
        path = root / f"tatoeba.fra-eng.{suffix}"
        path.write_text("".join(line + "\n" for line in lines))
        paths.append(str(path))
    return tuple(paths)


@pytest.fixture(scope="module")
def recipe_run(tmp_path_factory):
    """One seed, every model, a fixed budget of 4 updates, default precision (amp), one at a time."""
    root = tmp_path_factory.mktemp("multi30k")
    data = write_fixture(root)
    recipe = load_recipe()
    argv = ["--data", str(data), "--work", str(root / "work"), *TINY, "--updates", "4", "--jobs", "1"]
    report = recipe.main(argv)
    return recipe, root, argv, report


@pytest.fixture(scope="module")
def seeds_run(tmp_path_factory):
    """Seeds 1 and 2 of tmde and ct_mde in two jobs, validation every 2 updates up to 4, fp32, an
    extra test set."""
    root = tmp_path_factory.mktemp("multi30k_seeds")
    data = write_fixture(root)
    recipe = load_recipe()
    argv = ["--data", str(data), "--work", str(root / "work"), *TINY, "--models", "tmde,ct_mde", "--seeds", "1,2",
            "--validate-every", "2", "--updates", "4", "--precision", "fp32", "--results", str(root / "results"),
            "--extra-test", *write_tatoeba(root, data)]
    report = recipe.main(argv)
    return recipe, root, argv, report


def test_results_have_one_row_per_model_and_pair(recipe_run):
    recipe, root, _, report = recipe_run
    results = root / "work" / "results-tables"  # the default: inside --work, never the committed folder
    assert (results / "multi30k_embedding.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads((results / "multi30k_embedding.json").read_text())
    assert saved["rows"] == report["rows"]
    assert list(saved["runs"]) == MODELS and saved["seeds"] == [1]
    assert len(saved["rows"]) == len(MODELS) * 6 * 2  # 6 language pairs, both directions
    for name in MODELS:
        mine = [r for r in saved["rows"] if r["model"] == name]
        assert [(r["src"], r["tgt"]) for r in mine[:2]] == [("fr", "cs"), ("cs", "fr")]  # the unseen pair first
        assert {(r["src"], r["tgt"]) for r in mine} == {(a, b) for a in "en de fr cs".split()
                                                        for b in "en de fr cs".split() if a != b}
        for row in mine:
            assert row["total"] == 40 and 0 <= row["errors"] <= 40 and row["seed"] == 1
            assert row["error_percent"] == pytest.approx(100 * row["errors"] / 40)
            assert row["error_type"] == "text" and row["test_set"] == "test_2016_flickr"
            assert row["seen_in_training"] == ({row["src"], row["tgt"]} != {"fr", "cs"})
        summary = saved["summary"][name]
        assert summary["mean_error_percent"]["1"] == pytest.approx(sum(r["error_percent"] for r in mine) / 12)
        assert summary["unseen_pair_error_percent"]["1"] == pytest.approx((mine[0]["error_percent"]
                                                                           + mine[1]["error_percent"]) / 2)
        run = saved["runs"][name]["1"]
        assert run["updates"] == 4 and run["wall_time_s"] > 0 and run["cpu_time_s"] > 0
        assert run["stopped"] == "fixed" and run["checkpoint"] == "checkpoint_last.pt" and run["precision"] == HERE
    summary = saved["summary"]
    for measure in ("mean_error_percent", "unseen_pair_error_percent"):  # one seed: the point estimate, untested
        for check, (better, worse) in zip(saved["expected"], (("ct_mde", "tmde"), ("tmde", "tmde_f"))):
            held = summary[better][measure]["1"] < summary[worse][measure]["1"]
            assert check[measure]["verdict"] == f"{'held' if held else 'did not hold'} (one seed, untested)"
    assert saved["machine"]["cpu_cores"] == os.cpu_count() and saved["machine"]["gpu"] == "none"
    machine = MachineFacts(**saved["machine"]).describe()  # each run's log records the machine it trained on
    assert saved["trained_on"] == {f"{name} seed 1": [machine] for name in saved["runs"]}
    assert saved["precision"] == HERE and saved["seeds"] == [1] and saved["unfinished"] == []
    markdown = (results / "multi30k_embedding.md").read_text()
    assert sum(line.startswith("| T-MDE_P (pyramid queries) | ") for line in markdown.splitlines()) == 1 + 1 + 12
    assert "--updates 4" in markdown and "GPU: none" in markdown and f"- Precision: {HERE} (" in markdown
    assert "- Seeds: 1\n" in markdown and "- Convergence rule (fixed before the runs): none: a fixed budget of 4 updates" \
        in markdown and "- Convergence: not judged (a fixed budget)" in markdown
    assert "- Verdicts: an expected direction held when" in markdown


def test_retrieval_errors_are_kept_as_text_with_the_wrong_lines(recipe_run):
    _, root, _, report = recipe_run
    tsv = (root / "work" / "results-tables" / "multi30k_embedding.errors.tsv").read_text().splitlines()
    assert tsv[0].startswith("model\tseed\ttest_set\tsrc\ttgt\terrors\ttotal\twrong")
    assert len(tsv) == 1 + len(report["rows"])
    data = root / "multi30k"
    for line, row in zip(tsv[1:], report["rows"]):
        model, seed, test_set, src, tgt, errors, total, wrong = line.split("\t")
        assert (model, int(seed), src, tgt, int(errors), int(total)) == (
            row["model"], row["seed"], row["src"], row["tgt"], row["errors"], row["total"])
        pairs = [tuple(int(i) for i in item.split(">")) for item in wrong.split()]
        assert len(pairs) == row["errors"]
        queries = (data / f"test_2016_flickr.lc.norm.tok.{src}").read_text().splitlines()
        retrieved = (data / f"test_2016_flickr.lc.norm.tok.{tgt}").read_text().splitlines()
        for query, found in pairs:  # textual error: the retrieved line is not the query's translation
            assert query != found and retrieved[query] != retrieved[found] and query < len(queries)


def test_the_checkpoints_were_trained_with_the_recipe_settings(recipe_run):
    import torch

    _, root, _, _ = recipe_run
    state = torch.load(root / "work" / "checkpoints" / "ct_mde" / "checkpoint_last.pt", weights_only=True)
    cfg = state["cfg"]
    assert cfg["task"]["lang_pairs"] == "fr-en,fr-de,cs-en,cs-de,en-de,de-en"
    assert cfg["criterion"]["_name"] == "distance_constraint"
    assert cfg["common"]["amp"] is (HERE == "amp")  # --precision auto, the default
    assert state["optimizer_history"][-1]["num_updates"] == 4


def test_a_rerun_skips_finished_models(recipe_run, capsys):
    recipe, root, argv, report = recipe_run
    checkpoint = root / "work" / "checkpoints" / "tmde" / "checkpoint_last.pt"
    before = checkpoint.stat().st_mtime_ns
    again = recipe.main([*argv, "--models", "tmde"])
    assert "tmde, seed 1: finished earlier, skipped" in capsys.readouterr().out
    assert checkpoint.stat().st_mtime_ns == before
    assert again["rows"] == report["rows"]  # same checkpoints, same retrievals
    assert again["runs"]["tmde"][1]["wall_time_s"] == report["runs"]["tmde"][1]["wall_time_s"]


def test_a_rerun_with_other_settings_is_refused(recipe_run):
    recipe, root, argv, _ = recipe_run
    other_precision = "fp32" if HERE == "amp" else "amp"  # not what --precision auto chose
    for other in (["--updates", "5"], ["--precision", other_precision], ["--validate-every", "2"]):
        with pytest.raises(SystemExit, match=r"tmde in .* was trained with other settings .*use another --work"):
            recipe.main([*argv, "--models", "tmde", *other])
    with pytest.raises(SystemExit, match=r"was prepared with .*'bpe_vocab': 120.*use another --work"):
        recipe.main([*argv, "--models", "tmde", "--bpe-vocab", "100"])


def test_a_run_recorded_by_another_checkout_of_the_package_counts_as_finished(tmp_path):
    """The run record holds --user-dir, the package's place: another checkout resumes the same run."""
    run = ModelRun("tmde", 1, str(tmp_path))
    args = train_args("tmde", str(tmp_path / "data-bin"), run.save_dir, "tiny", 4, 1, "amp", "cpu")
    recorded = [*args]
    recorded[recorded.index("--user-dir") + 1] = "/another/checkout/fairseq_ctx"
    os.makedirs(run.save_dir)
    record = {"args": recorded, "updates": 4, "validate_every": 0, "stopped": "fixed", "command": "earlier"}
    Path(run.run_path).write_text(json.dumps(record))
    assert run.finished(args, Budget(4, 0))
    recorded[recorded.index("--seed") + 1] = "2"
    Path(run.run_path).write_text(json.dumps({**record, "args": recorded}))
    with pytest.raises(RecipeError, match=r"tmde in .* was trained with other settings \(earlier"):
        run.finished(args, Budget(4, 0))


def test_bad_data_stops_before_any_work(tmp_path):
    recipe = load_recipe()
    data = write_fixture(tmp_path)
    work = tmp_path / "work"
    base = ["--data", str(data), "--work", str(work), "--size", "tiny"]
    tatoeba = write_tatoeba(tmp_path, data)
    Path(tatoeba[1]).write_text("one line\n")
    with pytest.raises(SystemExit, match=r"tatoeba.fra-eng.fra has 12 lines but .*tatoeba.fra-eng.eng has 1"):
        recipe.main([*base, "--extra-test", *tatoeba])
    with pytest.raises(SystemExit, match=r"cannot tell its language from the suffix .txt; name it LANG=PATH"):
        recipe.main([*base, "--extra-test", tatoeba[0], str(tmp_path / "b.txt")])
    (data / "val.lc.norm.tok.cs").write_text("one line\n")
    with pytest.raises(SystemExit, match=r"val is not aligned: .*val.lc.norm.tok.cs has 1 lines"):
        recipe.main(base)
    (data / "train.lc.norm.tok.fr").unlink()
    with pytest.raises(SystemExit, match=r"files missing in --data .*: train.lc.norm.tok.fr; give the data/task1/tok"):
        recipe.main(base)
    assert not work.exists()


@pytest.mark.parametrize("size", ["small", "thesis"])
def test_every_model_of_every_size_parses_as_fairseq_train_arguments(recipe_run, size):
    from fairseq import options

    recipe, root, _, _ = recipe_run
    for name in MODELS:
        args = train_args(name, str(root / "work" / "data-bin"), str(root / "unused"), size, 2400, 1, "amp", "cpu")
        parsed = options.parse_args_and_arch(options.get_training_parser(), input_args=args)
        assert parsed.max_update == 2400 and parsed.lang_pairs == "fr-en,fr-de,cs-en,cs-de,en-de,de-en"
        assert parsed.encoder_embed_dim == {"small": 128, "thesis": 320 if name == "laser" else 1024}[size]
        assert parsed.amp
    assert parsed.encoder_layers == {"small": 1, "thesis": 5}[size]  # the LASER BiLSTM, last in MODELS


def test_seeds_train_in_their_own_directories_and_jobs(seeds_run):
    recipe, root, _, report = seeds_run
    work = root / "work"
    for seed in (1, 2):
        for name, other in (("tmde", "ct_mde"), ("ct_mde", "tmde")):
            run = json.loads((work / f"seed{seed}" / "checkpoints" / name / "run.json").read_text())
            assert "--seed" in run["args"] and run["args"][run["args"].index("--seed") + 1] == str(seed)
            log = (work / f"seed{seed}" / f"job.{name}.log").read_text()  # one log per job, never interleaved
            assert f"== train {name}, seed {seed}, to update 4" in log and f"== train {other}" not in log
    assert not (work / "checkpoints").exists()  # with --seeds, nothing in the single-seed place
    assert sorted(report["runs"]) == ["ct_mde", "tmde"] and report["seeds"] == [1, 2]


def test_training_follows_the_plateau_rule_and_tests_the_best_validation_checkpoint(seeds_run):
    recipe, root, _, _ = seeds_run
    for seed in (1, 2):
        save_dir = root / "work" / f"seed{seed}" / "checkpoints" / "tmde"
        run = json.loads((save_dir / "run.json").read_text())
        curve = [tuple(point) for point in run["curve"]]
        assert [updates for updates, _ in curve] == [2, 4]
        assert run["stopped"] == "budget" and run["convergence"] == recipe.PLATEAU.judge(curve).text
        assert run["checkpoint"] == "checkpoint_best_xsim.pt"
        best = min(curve, key=lambda point: point[1])  # the first of equal errors
        assert checkpoint_updates(save_dir / "checkpoint_best_xsim.pt") == best[0]
        assert checkpoint_updates(save_dir / "checkpoint_last.pt") == 4


def test_the_constraint_verdict_is_tested_over_the_seeds(seeds_run):
    _, root, _, _ = seeds_run
    saved = json.loads((root / "results" / "multi30k_embedding.json").read_text())
    constraint = saved["expected"][0]
    for measure in ("mean_error_percent", "unseen_pair_error_percent"):
        errors = saved["summary"]
        differences = [errors["tmde"][measure][s] - errors["ct_mde"][measure][s] for s in ("1", "2")]
        test = t_test(differences)
        assert constraint[measure]["differences"] == pytest.approx(differences)
        assert constraint[measure]["p"] == pytest.approx(test.p)
        assert constraint[measure]["verdict"] == direction_verdict(test.mean, test.p)
    assert saved["expected"][1]["mean_error_percent"]["verdict"] == "not tested (model not run)"
    markdown = (root / "results" / "multi30k_embedding.md").read_text()
    assert "paired t-test over 2 seeds" in markdown and "| T-MDE | 2 | " in markdown
    assert saved["precision"] == "fp32" and "- Precision: fp32" in markdown and "- Seeds: 1, 2\n" in markdown


def test_the_extra_test_set_is_scored_with_the_package_xsim(seeds_run):
    _, root, _, report = seeds_run
    rows = [r for r in report["rows"] if r["test_set"] == "tatoeba.fra-eng"]
    assert [(r["model"], r["seed"], r["src"], r["tgt"]) for r in rows] == [
        (m, s, a, b) for s in (1, 2) for m in ("tmde", "ct_mde") for a, b in (("fr", "en"), ("en", "fr"))]
    for model, seed in (("tmde", 1), ("ct_mde", 2)):
        out = root / "work" / f"seed{seed}" / "emb" / model / "extra" / "tatoeba.fra-eng"
        again = xsim_files(str(out / "fr.npy"), str(out / "en.npy"), ("ratio",), 4, str(root / "tatoeba.fra-eng.fra"),
                           str(root / "tatoeba.fra-eng.eng"))["ratio"]
        mine = [r for r in rows if (r["model"], r["seed"]) == (model, seed)]
        assert [r["errors"] for r in mine] == [again["src2tgt"].errors, again["tgt2src"].errors]
        assert all(r["total"] == 12 for r in mine)
    markdown = (root / "results" / "multi30k_embedding.md").read_text()
    assert "## xsim error % per direction, tatoeba.fra-eng (mean ± sd over seeds)" in markdown


def test_report_only_trains_nothing_and_lists_the_runs_left_with_their_commands(seeds_run, tmp_path):
    """--report-only writes the results of the finished runs (seeds 1, 2) and lists seed 3, never
    trained, with the command that trains it (without --report-only); nothing is trained."""
    recipe, root, _, _ = seeds_run
    work = root / "work"
    before = {seed: checkpoint_updates(work / f"seed{seed}" / "checkpoints" / "tmde" / "checkpoint_last.pt")
              for seed in (1, 2)}
    report = recipe.main(["--data", str(root / "multi30k"), "--work", str(work), *TINY, "--models", "tmde,ct_mde",
                          "--seeds", "1,2,3", "--validate-every", "2", "--updates", "4", "--precision", "fp32",
                          "--results", str(tmp_path / "results"), "--report-only"])
    assert {seed: checkpoint_updates(work / f"seed{seed}" / "checkpoints" / "tmde" / "checkpoint_last.pt")
            for seed in (1, 2)} == before
    assert not (work / "seed3").exists()
    assert {name: sorted(map(int, by_seed)) for name, by_seed in report["runs"].items()} == \
        {"tmde": [1, 2], "ct_mde": [1, 2]}
    never = [u for u in report["unfinished"] if u["seed"] == 3]
    assert [(u["name"], u["state"]) for u in never] == [("tmde", "not trained yet"), ("ct_mde", "not trained yet")]
    for u in never:
        assert u["command"].endswith(f"--seeds 3 --models {u['name']}") and "--report-only" not in u["command"]
    assert (tmp_path / "results" / "multi30k_embedding.md").exists()


def test_unfinished_runs_are_listed_and_resume_from_their_checkpoint(seeds_run, capsys):
    recipe, root, argv, report = seeds_run
    assert [(u["name"], u["seed"]) for u in report["unfinished"]] == [
        ("tmde", 1), ("tmde", 2), ("ct_mde", 1), ("ct_mde", 2)]
    for u in report["unfinished"]:  # each with the command that resumes it alone, with twice the budget
        assert "before the plateau" in u["state"]
        assert u["command"].endswith(f"--seeds {u['seed']} --models {u['name']} --updates 8")
    save_dir = root / "work" / "seed1" / "checkpoints" / "tmde"
    before = json.loads((save_dir / "run.json").read_text())["curve"]
    recipe.main([*argv[:argv.index("--seeds")], "--models", "tmde", "--seeds", "1", "--validate-every", "2",
                 "--updates", "6", "--precision", "fp32", "--results", str(root / "results_resumed")])
    run = json.loads((save_dir / "run.json").read_text())
    assert run["curve"][:2] == before and [u for u, _ in run["curve"]] == [2, 4, 6]  # continued, not redone
    assert checkpoint_updates(save_dir / "checkpoint_last.pt") == 6
    assert "to update 6" in capsys.readouterr().out


def earlier_folder(seeds_run, tmp_path: Path, seeds: str) -> Path:
    """A results folder of ``seeds`` only, as the recipe writes it (--report-only)."""
    recipe, root, argv, _ = seeds_run
    folder = tmp_path / f"earlier_seeds{seeds.replace(',', '_')}"
    recipe.main([*argv[:argv.index("--seeds")], "--seeds", seeds, *argv[argv.index("--seeds") + 2:],
                 "--results", str(folder), "--report-only"])
    return folder


def test_earlier_results_stand_in_for_a_lost_work_directory_and_are_not_trained_again(seeds_run, tmp_path):
    """Seed 1's work directory gone, its results folder given: the report is the one both seeds'
    work directories gave, number for number, and seed 1 is not trained again."""
    recipe, root, argv, _ = seeds_run
    report = recipe.main([*argv, "--results", str(tmp_path / "both"), "--report-only"])  # as the module left them
    earlier = earlier_folder(seeds_run, tmp_path, "1")
    work = root / "work"
    (work / "seed1").rename(work / "seed1.gone")
    try:
        combined = recipe.main([*argv, "--results", str(tmp_path / "combined"), "--earlier-results", str(earlier)])
        assert not (work / "seed1").exists()
    finally:
        (work / "seed1.gone").rename(work / "seed1")
    for key in ("rows", "summary", "expected"):
        assert combined[key] == report[key], key
    assert [(u["name"], u["seed"], u["state"]) for u in combined["unfinished"]] == \
        [(u["name"], u["seed"], u["state"]) for u in report["unfinished"]]
    assert json.loads(json.dumps(combined["runs"])) == json.loads(json.dumps(report["runs"]))
    assert (tmp_path / "combined" / "multi30k_embedding.errors.tsv").read_text() == \
        (tmp_path / "both" / "multi30k_embedding.errors.tsv").read_text()
    assert combined["earlier_results"]["runs"] == ["tmde/seed1", "ct_mde/seed1"]
    markdown = (tmp_path / "combined" / "multi30k_embedding.md").read_text()
    assert f"Runs reported from an earlier results folder (`--earlier-results {earlier}`" in markdown
    assert "tmde, seed 1, ct_mde, seed 1" in markdown


def test_earlier_results_are_recounted_from_the_kept_retrieval_errors(seeds_run, tmp_path):
    """A wrong retrieval removed from errors.tsv (its count lowered with it) lowers the reported
    error: the numbers come from the kept retrievals, not from the JSON's."""
    recipe, root, argv, _ = seeds_run
    earlier = earlier_folder(seeds_run, tmp_path, "1,2")
    tsv = earlier / "multi30k_embedding.errors.tsv"
    lines = tsv.read_text().splitlines()
    number, line = next((i, line) for i, line in enumerate(lines) if i and line.split("\t")[5] != "0")
    fields = line.split("\t")
    fields[5], fields[7] = str(int(fields[5]) - 1), " ".join(fields[7].split()[1:])
    lines[number] = "\t".join(fields)
    tsv.write_text("\n".join(lines) + "\n")
    report = recipe.main([*argv, "--seeds", "1,2", "--models", "tmde,ct_mde", "--report-only",
                          "--work", str(tmp_path / "empty_work"), "--results", str(tmp_path / "again"),
                          "--earlier-results", str(earlier)])
    row = next(r for r in report["rows"] if (r["model"], str(r["seed"]), r["test_set"], r["src"], r["tgt"])
               == tuple(fields[:5]))
    assert row["errors"] == int(fields[5]) and row["error_percent"] == pytest.approx(100 * row["errors"] / row["total"])
    assert not (tmp_path / "empty_work" / "seed1").exists()
    assert all("not trained" not in u["state"] for u in report["unfinished"])
    fields[5] = str(int(fields[5]) + 1)  # a count its list disagrees with
    lines[number] = "\t".join(fields)
    tsv.write_text("\n".join(lines) + "\n")
    with pytest.raises(SystemExit, match=rf"errors.tsv, line {number + 1}: .*errors but .* wrong retrievals listed"):
        recipe.main([*argv, "--report-only", "--results", str(tmp_path / "again"), "--earlier-results", str(earlier)])


def test_earlier_results_of_other_settings_or_without_a_test_set_are_refused(seeds_run, tmp_path):
    recipe, root, argv, _ = seeds_run
    earlier = earlier_folder(seeds_run, tmp_path, "1")
    common = [*argv, "--report-only", "--results", str(tmp_path / "out"), "--earlier-results", str(earlier)]
    with pytest.raises(SystemExit, match=r"written by runs with other settings \(k 4 there, 5 here\)"):
        recipe.main([*common, "--k", "5"])
    with pytest.raises(SystemExit, match=r"precision 'fp32' there, 'amp' here"):
        recipe.main([*common, "--precision", "amp"])
    other = []
    for path in write_tatoeba(root, root / "multi30k"):
        copy = tmp_path / Path(path).name.replace("tatoeba", "other")
        copy.write_text(Path(path).read_text())
        other.append(str(copy))
    with pytest.raises(SystemExit, match=r"no other.fra-eng results for tmde, seed 1, and its checkpoints are gone"):
        recipe.main([*common, "--extra-test", *other])
    with pytest.raises(SystemExit, match=r"no multi30k_embedding.json there"):
        recipe.main([*argv, "--report-only", "--results", str(tmp_path / "out"), "--earlier-results", str(tmp_path)])
    with pytest.raises(SystemExit):
        recipe.main([*argv, "--results", str(earlier), "--earlier-results", str(earlier)])
