"""The Multi30k multi-source recipe (examples/multimodal_mt/multi30k_multisource.py) end to end
on a small 4-way parallel fixture in Multi30k's layout: every model trains a few updates, is
decoded, scored and attacked; with several seeds each seed has its own work directory, the
tables give mean ± sd and tests over seeds, per test set, and sacreBLEU's command line gives
every number back from the kept hypotheses."""
import json
import logging
import math
import random
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers import BIN_DIR
from devtools.machine_facts import MachineFacts
from devtools.plateau_rule import BLEU_PLATEAU, checkpoint_updates
from devtools.recipe_runs import chosen_precision
from devtools.recipe_tools import captured_log
from devtools.seed_statistics import direction_verdict, paired_t_test
from devtools.train_log import validation_curve

pytestmark = pytest.mark.heavy  # handed out first under xdist (conftest.py)

# en word -> (de, fr, cs)
LEXICON = {
    "a": ("ein", "un", "jeden"), "man": ("mann", "homme", "muž"), "woman": ("frau", "femme", "žena"),
    "dog": ("hund", "chien", "pes"), "child": ("kind", "enfant", "dítě"), "runs": ("läuft", "court", "běží"),
    "sits": ("sitzt", "assis", "sedí"), "on": ("auf", "sur", "na"), "in": ("in", "dans", "v"),
    "the": ("der", "le", "ten"), "street": ("straße", "rue", "ulici"), "grass": ("gras", "herbe", "trávě"),
    "beach": ("strand", "plage", "pláži"), "young": ("junge", "jeune", "mladý"), "old": ("alte", "vieux", "starý"),
    ".": (".", ".", "."),
}
SUBJECTS, VERBS, PLACES = ["man", "woman", "dog", "child"], ["runs", "sits"], ["street", "grass", "beach"]
LANGS = ("en", "de", "fr", "cs")


def write_split(directory: Path, stem: str, size: int, seed: int, langs=LANGS) -> None:
    rng = random.Random(seed)
    lines = []
    for _ in range(size):
        lines.append(["a", *rng.sample(["young", "old"], rng.randint(0, 1)), rng.choice(SUBJECTS), rng.choice(VERBS),
                      rng.choice(["on", "in"]), "the", rng.choice(PLACES), "."])
    for lang in langs:
        text = "".join(" ".join(words if lang == "en" else [LEXICON[w][LANGS.index(lang) - 1] for w in words]) + "\n"
                       for words in lines)
        (directory / f"{stem}.lc.norm.tok.{lang}").write_text(text, encoding="utf-8")


def write_fixture(directory: Path) -> None:
    for seed, (stem, size) in enumerate((("train", 200), ("val", 16), ("test_2016_flickr", 12))):
        write_split(directory, stem, size, seed)


# the best-checkpoint protocol (--average-last 0): a few updates, validated every 2
TINY = ["--average-last", "0", "--clip-norm", "1", "--spm-vocab", "60", "--max-update", "4", "--batch-size", "50", "--warmup-updates", "2",
        "--lr", "1e-3",
        "--validate-every", "2", "--embed-dim", "16", "--ffn-dim", "32", "--layers", "1", "--heads", "2",
        "--rnn-hidden", "16", "--beam", "2", "--workers", "1"]
# enough updates for the tiny models to translate part of the fixture (BLEU well above 0)
SMALL = ["--average-last", "0", "--clip-norm", "1", "--spm-vocab", "60", "--max-update", "40", "--batch-size", "50", "--lr", "1e-2", "--warmup-updates", "5",
         "--validate-every", "20", "--embed-dim", "32", "--ffn-dim", "64", "--layers", "1", "--heads", "2",
         "--beam", "2", "--workers", "1", "--precision", "fp32"]
EXTRA_TEST = "test_2017_mscoco"
HERE = chosen_precision("cpu")  # what --precision auto, the default, trains with (the suite forces the probe: conftest.py)


@pytest.fixture(scope="module")
def recipe():
    from examples.multimodal_mt import multi30k_multisource

    yield multi30k_multisource


def sacrebleu_cli(*args: str) -> str:
    result = subprocess.run([str(BIN_DIR / "sacrebleu"), *args], capture_output=True, text=True, check=True)
    return result.stdout


def test_recipe_end_to_end_writes_one_row_per_model_and_pair(recipe, tmp_path):
    data, work, results = tmp_path / "multi30k", tmp_path / "work", tmp_path / "results"
    data.mkdir()
    write_fixture(data)
    recipe.main([str(data), "--work", str(work), "--results", str(results), "--jobs", "1", *TINY])

    summary = json.loads((results / "multi30k_multisource.json").read_text())
    rows = summary["test_sets"]["test_2016_flickr"]["models"]
    names = sorted(row["name"] for row in rows)
    expected = ["text-only"] + [f"{s}-{p}" for p in ("fr", "cs")
                                for s in ("serial", "parallel", "flat", "hierarchical", "rnn-hierarchical")]
    assert names == sorted(expected)
    assert summary["precision"] == HERE and summary["seeds"] == [1]
    for row in rows:
        scores = row["per_seed"]["1"]
        assert scores["updates"] == 4 and [u for u, _ in scores["valid_bleu"]] == [2, 4]
        assert 0.0 <= scores["bleu"] <= 100.0 and 0.0 <= scores["chrf"] <= 100.0
        assert row["bleu"] == {"mean": scores["bleu"], "sd": None}
        assert (results / scores["hypotheses"]).read_text().count("\n") == 12
        if row["second_source"] is None:
            assert "bleu_shuffled" not in scores and "vs_text_only" not in row
        else:
            assert math.isclose(scores["bleu_drop"], scores["bleu"] - scores["bleu_shuffled"])
            versus = row["vs_text_only"]
            assert versus["test"] == "paired bootstrap (one seed)" and versus["t_bleu"]["p"] is None
            assert 0.0 < versus["bootstrap"]["bleu_p"] <= 1.0 and 0.0 < versus["bootstrap"]["chrf_p"] <= 1.0
        assert scores["train_wall_s"] > 0 and scores["eval_wall_s"] > 0
    machine = MachineFacts(**summary["machine"]).describe()
    assert summary["trained_on"] == {f"{name} seed 1": [machine] for name in expected}
    # one seed without --seeds: the layout of earlier versions, trained as --precision auto chose
    record = json.loads((work / "results" / "serial-fr.json").read_text())
    assert ("--amp" in record["train_command"]) is (HERE == "amp") and record["settings"]["precision"] == HERE
    assert summary["machine"]["cpu_cores"] >= 1
    table = (results / "multi30k_multisource.md").read_text()
    assert f"- Precision: {HERE} (" in table and "- Seeds: 1\n" in table
    main_table = table.split("## Test set test_2016_flickr")[1].split("Expected direction")[0]
    assert sum(line.startswith("| ") and "→de |" in line for line in main_table.splitlines()) == 11
    assert re.search(r"\*\*(Held for (all 10|\d+ of 10) multi-source models)", table)
    for row in rows:  # one seed: the bootstrap's p decides
        if "vs_text_only" in row:
            versus = row["vs_text_only"]
            assert versus["verdict"] == direction_verdict(versus["delta_bleu"]["mean"], versus["bootstrap"]["bleu_p"])
    assert (results / "multi30k_multisource.png").read_bytes()[:4] == b"\x89PNG"
    assert "None: every requested run has all its results." in table
    assert "- Trained on: the machine above (every run, as its training log records)" in table
    # the data are never written to
    assert sorted(p.name for p in data.iterdir()) == sorted(
        f"{s}.lc.norm.tok.{l}" for s in ("train", "val", "test_2016_flickr") for l in LANGS)


@pytest.fixture(scope="module")
def seeded(recipe, tmp_path_factory):
    """Two seeds of text-only and serial-fr on test_2016_flickr and an extra test set that has no
    Czech files; the tables go to the default place."""
    root = tmp_path_factory.mktemp("seeded")
    data, work = root / "multi30k", root / "work"
    data.mkdir()
    write_fixture(data)
    write_split(data, EXTRA_TEST, 10, 7, langs=("en", "de", "fr"))
    args = [str(data), "--work", str(work), "--models", "text-only,serial", "--pairs", "fr",
            "--test-sets", f"test_2016_flickr,{EXTRA_TEST}", *SMALL]
    recipe.main([*args, "--seeds", "1,2", "--jobs", "1"])
    results = work / "results-tables"
    return SimpleNamespace(data=data, work=work, args=args, results=results,
                           summary=json.loads((results / "multi30k_multisource.json").read_text()),
                           table=(results / "multi30k_multisource.md").read_text())


def test_the_default_protocol_tests_the_average_of_the_last_epoch_checkpoints(recipe, tmp_path):
    """The recipe's defaults (Wu et al., 2021) at a tiny size: every epoch checkpoint is kept, the
    validation curve is the beam-search BLEU of the averages ending at every --curve-every-th epoch,
    and the test sets are decoded with the average of the last --average-last epochs, whose
    parameters are the mean of those checkpoints'."""
    import torch

    data, work, results = tmp_path / "multi30k", tmp_path / "work", tmp_path / "results"
    data.mkdir()
    write_fixture(data)
    sizes = ["--spm-vocab", "60", "--embed-dim", "16", "--ffn-dim", "32", "--layers", "1", "--heads", "2",
             "--beam", "2", "--workers", "1", "--warmup-updates", "4"]
    recipe.main([str(data), "--work", str(work), "--results", str(results), "--jobs", "1", "--models",
                 "text-only,serial", "--pairs", "fr", "--max-update", "20", "--batch-size", "50",
                 "--average-last", "3", "--curve-every", "1", *sizes])
    for name in ("text-only", "serial-fr"):
        record = json.loads((work / "results" / f"{name}.json").read_text())
        command = record["train_command"]
        assert "--save-interval 1 --validate-interval 1" in command and "--clip-norm 25 --lr 0.005" in command
        assert "--eval-bleu" not in command and "--no-epoch-checkpoints" not in command
        checkpoints = work / "checkpoints" / name
        epochs = sorted(int(p.stem[len("checkpoint"):]) for p in checkpoints.glob("checkpoint[0-9]*.pt"))
        assert epochs == list(range(1, len(epochs) + 1)) and len(epochs) >= 4  # 20 updates of 200 sentences
        # the averages of 3 epochs ending at epochs 3, 4, … and the last
        window_ends = list(range(3, epochs[-1] + 1))
        assert [u for u, _ in record["valid_bleu"]] == [checkpoint_updates(checkpoints / f"checkpoint{e}.pt")
                                                        for e in window_ends]
        assert all(0.0 <= b <= 100.0 for _, b in record["valid_bleu"])
        assert record["test_sets"]["test_2016_flickr"]["commands"][0].count("checkpoint_averaged.pt") == 1
        averaged = torch.load(checkpoints / "checkpoint_averaged.pt", weights_only=True)
        last_epochs = epochs[-3:]
        last = [torch.load(checkpoints / f"checkpoint{e}.pt", weights_only=True)["model"] for e in last_epochs]
        assert averaged["averaged_checkpoints"] == [f"checkpoint{e}.pt" for e in last_epochs]
        for key, value in averaged["model"].items():
            expected = sum(state[key].double() for state in last) / 3
            assert torch.allclose(value.double(), expected, atol=1e-6), key
        assert "last_optimizer_state" not in averaged
    summary = json.loads((results / "multi30k_multisource.json").read_text())
    assert summary["settings"]["average_last"] == 3 and summary["settings"]["clip_norm"] == 25.0
    table = (results / "multi30k_multisource.md").read_text()
    assert "the average of the last 3 epoch checkpoints is tested" in table
    assert "the mean of the validations in the last fifth of the updates" in table
    convergence = {row["name"]: row["plateau"] for row in summary["convergence_by_run"]}
    assert convergence["text-only"]["text"].startswith(f"not judged: {len(window_ends)} validation(s)")
    # every curve point is sacreBLEU's BLEU of its kept validation hypotheses
    record = summary["runs"]["text-only/seed1"]
    kept = summary["curve_hypotheses"]["text-only/seed1"]
    assert kept == [f"hypotheses/text-only.seed1.val.average_to_epoch{e}.de" for e in window_ends]
    for name, (_, bleu) in zip(kept, record["valid_bleu"]):
        printed = sacrebleu_cli(str(data / "val.lc.norm.tok.de"), "-i", str(results / name), "-m", "bleu",
                                "--tokenize", "none", "-b", "-w", "2")
        assert float(printed) == pytest.approx(bleu, abs=0.006)
    # continued to more updates in another work directory: the epoch checkpoints come along, so the curve of
    # averages covers every epoch (the continued run equals one run of the larger budget)
    longer = tmp_path / "longer"
    recipe.main([str(data), "--work", str(longer), "--results", str(tmp_path / "longer-results"), "--jobs", "1",
                 "--models", "text-only", "--pairs", "fr", "--max-update", "28", "--batch-size", "50",
                 "--average-last", "3", "--curve-every", "1", *sizes, "--continue-from", str(work)])
    continued = json.loads((longer / "results" / "text-only.json").read_text())
    first = json.loads((work / "results" / "text-only.json").read_text())
    assert continued["valid_bleu"][:len(first["valid_bleu"])] == first["valid_bleu"]
    assert len(continued["valid_bleu"]) > len(first["valid_bleu"])
    # --test-curve given to the finished run: each curve point's average decoded on the test set, nothing retrained
    trained = json.loads((work / "results" / "text-only.json").read_text())
    recipe.main([str(data), "--work", str(work), "--results", str(results), "--jobs", "1", "--models",
                 "text-only,serial", "--pairs", "fr", "--max-update", "20", "--batch-size", "50",
                 "--average-last", "3", "--curve-every", "1", *sizes, "--test-curve"])
    record = json.loads((work / "results" / "text-only.json").read_text())
    assert record["train_wall_s"] == trained["train_wall_s"] and record["valid_bleu"] == trained["valid_bleu"]
    budget = record["test_curve"]["test_2016_flickr"]
    assert [point["epoch"] for point in budget] == window_ends
    summary = json.loads((results / "multi30k_multisource.json").read_text())
    tested = next(row for row in summary["test_sets"]["test_2016_flickr"]["models"] if row["name"] == "text-only")
    assert budget[-1]["bleu"] == pytest.approx(tested["per_seed"]["1"]["bleu"])  # the last point is the tested model
    kept = summary["curve_hypotheses"]["text-only/seed1"]
    for point in budget:
        name = f"hypotheses/text-only.seed1.test_2016_flickr.average_to_epoch{point['epoch']}.de"
        assert name in kept
        printed = sacrebleu_cli(str(data / "test_2016_flickr.lc.norm.tok.de"), "-i", str(results / name), "-m", "bleu",
                                "--tokenize", "none", "-b", "-w", "2")
        assert float(printed) == pytest.approx(point["bleu"], abs=0.006)
    assert "## Test score by budget" in (results / "multi30k_multisource.md").read_text()
    # with the work directory gone, the results folder alone reports the runs, curve points included
    again = tmp_path / "again"
    recipe.main([str(data), "--work", str(tmp_path / "new-work"), "--results", str(again), "--jobs", "1", "--models",
                 "text-only,serial", "--pairs", "fr", "--max-update", "20", "--batch-size", "50",
                 "--average-last", "3", "--curve-every", "1", *sizes, "--earlier-results", str(results)])
    reported = json.loads((again / "multi30k_multisource.json").read_text())
    assert not (tmp_path / "new-work" / "checkpoints").exists()
    for key in ("test_sets", "convergence_by_run", "runs", "curve_hypotheses"):
        assert reported[key] == summary[key], key
    for name in kept:
        assert (again / name).read_text() == (results / name).read_text()


def test_runs_of_an_earlier_results_folder_stand_in_for_a_work_directory_that_is_gone(recipe, seeded, tmp_path):
    """Seed 1's work directory gone, its runs come from the results folder they were reported in:
    not trained again, and every number and verdict of the tables is that of the whole work directory."""
    work, results = tmp_path / "work", tmp_path / "tables"
    shutil.copytree(seeded.work / "seed2", work / "seed2")
    recipe.main([*seeded.args, "--work", str(work), "--seeds", "1,2", "--jobs", "1",
                 "--earlier-results", str(seeded.results), "--results", str(results)])
    assert not (work / "seed1" / "checkpoints").exists()
    summary = json.loads((results / "multi30k_multisource.json").read_text())
    for key in ("test_sets", "convergence_by_run", "runs", "seeds", "curve_hypotheses", "convergence"):
        assert summary[key] == seeded.summary[key], key
    assert summary["unfinished"] == []
    assert summary["earlier_results"]["runs"] == ["serial-fr/seed1", "text-only/seed1"]
    kept = sorted(p.name for p in (seeded.results / "hypotheses").iterdir())
    assert kept == sorted(p.name for p in (results / "hypotheses").iterdir())
    for name in kept:  # the shuffled-French decodings of serial-fr included
        assert (results / "hypotheses" / name).read_text() == (seeded.results / "hypotheses" / name).read_text()
    table = (results / "multi30k_multisource.md").read_text()
    assert f"Runs reported from an earlier results folder (`--earlier-results {seeded.results}`" in table
    sections = lambda text: text[text.index("## Test set"):text.index("## Convergence")]  # noqa: E731
    assert sections(table) == sections(seeded.table)


def test_an_earlier_results_folder_of_other_settings_or_without_its_hypotheses_is_refused(recipe, seeded, tmp_path,
                                                                                          capsys):
    work = tmp_path / "refused"
    common = [*seeded.args, "--work", str(work), "--seeds", "1", "--jobs", "1"]
    for extra, message in (
            (["--earlier-results", str(seeded.results), "--lr", "5e-3"],
             "multi30k_multisource.json was written by runs with other settings (lr: 0.01 there, 0.005 now)"),
            (["--earlier-results", str(seeded.results), "--results", str(seeded.results)],
             f"--results {seeded.results.resolve()} is the --earlier-results folder"),
            (["--earlier-results", str(tmp_path)], f"--earlier-results {tmp_path}: no multi30k_multisource.json there")):
        with pytest.raises(SystemExit):
            recipe.main([*common, *extra])
        assert message in capsys.readouterr().err
    partial = tmp_path / "partial"
    shutil.copytree(seeded.results, partial)
    (partial / "hypotheses" / "serial-fr.seed2.test_2016_flickr.shuffled.de").unlink()
    with pytest.raises(SystemExit):
        recipe.main([*common, "--earlier-results", str(partial)])
    assert f"{partial}/hypotheses/serial-fr.seed2.test_2016_flickr.shuffled.de is missing: " in capsys.readouterr().err
    assert not (work / "seed1" / "data-bin").exists()


def test_each_seed_has_the_work_layout_of_a_one_seed_run(seeded):
    assert not (seeded.work / "results").exists() and not (seeded.work / "checkpoints").exists()
    runs = [(seed, name) for seed in (1, 2) for name in ("text-only", "serial-fr")]
    for seed, name in runs:
        directory = seeded.work / f"seed{seed}"
        assert (directory / "spm" / "spm.model").is_file()
        assert (directory / "data-bin" / f"{EXTRA_TEST}.fr-de.fr.bin").is_file()
        assert (directory / "checkpoints" / name / "checkpoint_best.pt").is_file()
        assert (directory / "eval" / name / f"generate-{EXTRA_TEST}.txt").is_file()
        record = json.loads((directory / "results" / f"{name}.json").read_text())
        assert record["settings"]["seed"] == seed and f"--seed {seed} " in record["train_command"]
        assert sorted(record["test_sets"]) == sorted(["test_2016_flickr", EXTRA_TEST])
        assert validation_curve((directory / "eval" / name / "train.log").read_text(), "bleu") == record["valid_bleu"]
        assert [u for u, _ in record["valid_bleu"]] == [20, 40]
    first, second = (seeded.results / f"hypotheses/text-only.seed{s}.test_2016_flickr.de" for s in (1, 2))
    assert first.read_text() != second.read_text()  # two trainings, not one copied


def test_the_shuffled_decoding_command_reads_a_kept_data_directory_with_the_second_source_permuted(seeded):
    from fairseq.data import indexed_dataset

    for seed in (1, 2):
        record = json.loads((seeded.work / f"seed{seed}" / "results" / "serial-fr.json").read_text())
        for stem, split in (("test_2016_flickr", "test"), (EXTRA_TEST, EXTRA_TEST)):
            shuffled_command = record["test_sets"][stem]["commands"][1]
            data_dir = Path(shuffled_command.split()[1])
            assert data_dir == seeded.work / f"seed{seed}" / "eval" / "serial-fr" / "shuffled" / f"data-bin.{split}"
            original, permuted = (indexed_dataset.MMapIndexedDataset(str(d / f"{split}.fr-de.fr"))
                                  for d in (seeded.work / f"seed{seed}" / "data-bin", data_dir))
            rows = [tuple(original[i].tolist()) for i in range(len(original))]
            shuffled_rows = [tuple(permuted[i].tolist()) for i in range(len(permuted))]
            assert sorted(rows) == sorted(shuffled_rows) and rows != shuffled_rows
            assert (data_dir / f"{split}.en-de.en.bin").resolve() == (seeded.work / f"seed{seed}" / "data-bin" /
                                                                      f"{split}.en-de.en.bin").resolve()


def test_a_run_continued_from_fewer_updates_equals_the_run_trained_at_once(recipe, seeded, tmp_path):
    shorter, longer = tmp_path / "shorter", tmp_path / "longer"
    common = [*seeded.args, "--models", "text-only", "--seeds", "1", "--jobs", "1", "--test-sets", "test_2016_flickr"]
    recipe.main([*common, "--work", str(shorter), "--max-update", "20"])
    before = {path: path.stat().st_mtime_ns for path in shorter.rglob("*") if path.is_file()}
    source = (shorter / "seed1" / "results" / "text-only.json").resolve()
    for extra, reason in ((["--max-update", "20"], "the same budget"), (["--lr", "5e-3"], "lr: 0.01 there, 0.005 now")):
        with pytest.raises(SystemExit, match=re.escape(f"--continue-from: {source} (20 updates) cannot be continued")
                           + ".*" + re.escape(reason)):
            recipe.main([*common, "--work", str(longer), "--continue-from", str(shorter), *extra])
    assert not (longer / "seed1" / "checkpoints").exists()
    recipe.main([*common, "--work", str(longer), "--continue-from", str(shorter)])  # to SMALL's 40 updates
    record = json.loads((longer / "seed1" / "results" / "text-only.json").read_text())
    at_once = json.loads((seeded.work / "seed1" / "results" / "text-only.json").read_text())
    assert [u for u, _ in record["valid_bleu"]] == [20, 40] and record["valid_bleu"] == at_once["valid_bleu"]
    assert record["continued_from"] == {"results": str(source), "updates": 20} and "continued_from" not in at_once
    stem = "hypotheses/text-only.seed1.test_2016_flickr.de"
    assert (longer / "results-tables" / stem).read_text() == (seeded.results / stem).read_text()
    assert before == {path: path.stat().st_mtime_ns for path in shorter.rglob("*") if path.is_file()}


def test_two_runs_hold_the_same_data_when_their_vocabulary_and_dictionaries_are_equal(seeded, tmp_path):
    from examples.multimodal_mt.multi30k_runs import data_difference

    mine, other = seeded.work / "seed1", tmp_path / "other"
    for name in ("spm/spm.vocab", "dict/dict.all.txt", "data-bin/dict.en.txt", "data-bin/dict.de.txt"):
        (other / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(mine / name, other / name)
    assert data_difference(mine, seeded.work / "seed2") is None and data_difference(mine, other) is None
    with open(other / "data-bin" / "dict.de.txt", "a", encoding="utf-8") as dictionary:
        dictionary.write("neu 1\n")
    assert data_difference(mine, other) == (f"{other}/data-bin/dict.de.txt differs from {mine}/data-bin/dict.de.txt: "
                                            "the two runs prepared different data")


def test_tables_give_mean_sd_and_the_tests_over_seeds_per_test_set(seeded):
    assert seeded.summary["seeds"] == [1, 2] and seeded.summary["test_sets"].keys() == {"test_2016_flickr", EXTRA_TEST}
    assert f"## Test set {EXTRA_TEST} (10 sentences)" in seeded.table
    for stem, section in seeded.summary["test_sets"].items():
        rows = {row["name"]: row for row in section["models"]}
        assert sorted(rows) == ["serial-fr", "text-only"]
        for row in rows.values():
            bleus = [row["per_seed"][s]["bleu"] for s in ("1", "2")]
            assert row["bleu"]["mean"] == pytest.approx(statistics.mean(bleus))
            assert row["bleu"]["sd"] == pytest.approx(statistics.stdev(bleus))
            assert f"| {row['name']} | {row['pair']} | 1,2 | {statistics.mean(bleus):.2f} ± {statistics.stdev(bleus):.2f} |" \
                in seeded.table
        versus, base, serial = rows["serial-fr"]["vs_text_only"], rows["text-only"], rows["serial-fr"]
        differences = [serial["per_seed"][s]["bleu"] - base["per_seed"][s]["bleu"] for s in ("1", "2")]
        assert versus["delta_bleu"]["mean"] == pytest.approx(statistics.mean(differences))
        expected = paired_t_test([serial["per_seed"][s]["bleu"] for s in ("1", "2")],
                                 [base["per_seed"][s]["bleu"] for s in ("1", "2")])
        assert versus["t_bleu"]["p"] == pytest.approx(expected.p) and versus["test"] == "paired t-test over 2 seeds"
        assert versus["verdict"] == direction_verdict(expected.mean, expected.p)
    assert "the t-test reaches p < 0.05 only when the mean difference exceeds 8.98 times" in seeded.table
    assert "None: every requested run has all its results." in seeded.table


def test_sacrebleu_on_the_kept_hypotheses_gives_every_number_of_the_tables(seeded):
    files = sorted(p.name for p in (seeded.results / "hypotheses").iterdir())
    assert len(files) == 12  # 2 models × 2 seeds × 2 test sets, and serial-fr with French shuffled
    for stem, section in seeded.summary["test_sets"].items():
        reference = str(seeded.data / f"{stem}.lc.norm.tok.de")
        assert (f"    sacrebleu DATA/{stem}.lc.norm.tok.de -i hypotheses/MODEL.seedN.{stem}.de -m bleu chrf "
                "--tokenize none -w 2") in seeded.table
        for row in section["models"]:
            for seed, scores in row["per_seed"].items():
                bleu, chrf = json.loads(sacrebleu_cli(reference, "-i", str(seeded.results / scores["hypotheses"]),
                                                      "-m", "bleu", "chrf", "--tokenize", "none", "-w", "2"))
                assert (bleu["score"], chrf["score"]) == (round(scores["bleu"], 2), round(scores["chrf"], 2))
                assert bleu["signature"] == scores["bleu_signature"] and chrf["signature"] == scores["chrf_signature"]
                assert f"ratio = {scores['ratio']:.3f}" in bleu["verbose_score"]
                assert f"| {row['name']} | {seed} | {scores['bleu']:.2f} | {scores['chrf']:.2f} | {scores['ratio']:.3f} |" \
                    in seeded.table
                if "shuffled_hypotheses" in scores:
                    shuffled, _ = json.loads(sacrebleu_cli(
                        reference, "-i", str(seeded.results / scores["shuffled_hypotheses"]), "-m", "bleu", "chrf",
                        "--tokenize", "none", "-w", "2"))
                    assert shuffled["score"] == round(scores["bleu_shuffled"], 2)
        # the pooled bootstrap: each model's two seeds concatenated, against the reference twice
        pooled = {}
        for name in ("text-only", "serial-fr"):
            pooled[name] = seeded.results / f"pooled.{name}.{stem}"
            pooled[name].write_text("".join((seeded.results / f"hypotheses/{name}.seed{s}.{stem}.de").read_text()
                                            for s in (1, 2)))
        twice = seeded.results / f"pooled.reference.{stem}"
        twice.write_text(Path(reference).read_text() * 2)
        printed = sacrebleu_cli(str(twice), "-i", str(pooled["text-only"]), str(pooled["serial-fr"]), "-m", "bleu",
                                "chrf", "--tokenize", "none", "--paired-bs", "-f", "text")
        p_bleu, p_chrf = (float(p) for p in re.findall(r"\(p = ([0-9.]+)\)", printed))
        bootstrap = next(r for r in section["models"] if r["name"] == "serial-fr")["vs_text_only"]["bootstrap"]
        assert (p_bleu, p_chrf) == (round(bootstrap["bleu_p"], 4), round(bootstrap["chrf_p"], 4))


def test_length_ratio_and_bleu_without_brevity_penalty_are_sacrebleus(seeded):
    for section in seeded.summary["test_sets"].values():
        for row in section["models"]:
            for scores in row["per_seed"].values():
                assert scores["ratio"] == pytest.approx(scores["sys_len"] / scores["ref_len"])
                assert scores["bleu_no_bp"] == pytest.approx(scores["bleu"] / scores["bp"])
                assert scores["bp"] == pytest.approx(1.0 if scores["ratio"] >= 1 else math.exp(1 - 1 / scores["ratio"]))
    assert "gain at equal length" in seeded.table


def test_a_run_of_the_one_seed_layout_is_picked_up_by_seeds_and_resumed(recipe, seeded, tmp_path):
    """Seed 3 made by an earlier version of the recipe (``--work W/seed3 --seed 3``, test_2016_flickr
    only, no precision setting: float32) is reported next to seeds 1 and 2; what it lacks is listed
    with the command that resumes it, and that command decodes the missing test set only."""
    work = tmp_path / "work"
    shutil.copytree(seeded.work / "seed1", work / "seed1")
    shutil.copytree(seeded.work / "seed2", work / "seed2")
    seed3 = work / "seed3"
    shutil.copytree(seeded.work / "seed1" / "checkpoints" / "text-only", seed3 / "checkpoints" / "text-only")
    (seed3 / "eval" / "text-only").mkdir(parents=True)
    shutil.copyfile(seeded.work / "seed1" / "eval" / "text-only" / "generate-test.txt",
                    seed3 / "eval" / "text-only" / "generate-test.txt")
    current = json.loads((seeded.work / "seed1" / "results" / "text-only.json").read_text())["settings"]
    earlier = {**{k: v for k, v in current.items() if k not in ("precision", "spm_langs")}, "seed": 3, "workers": 1}
    (seed3 / "results").mkdir()
    (seed3 / "results" / "text-only.json").write_text(json.dumps({
        "name": "text-only", "strategy": "text-only", "second_source": None, "pair": "en→de", "updates": 40,
        "bleu": 1.0, "chrf": 2.0, "bleu_signature": "", "chrf_signature": "", "valid_bleu": [[20, 1.0], [40, 2.0]],
        "train_wall_s": 5.0, "eval_wall_s": 1.0, "commands": ["fairseq-train ...", "fairseq-generate ..."],
        "settings": earlier}))
    (seed3 / "checkpoints" / "serial-fr").mkdir()  # serial-fr, seed 3: interrupted (its checkpoint, no record)
    shutil.copyfile(seeded.work / "seed1" / "checkpoints" / "serial-fr" / "checkpoint_last.pt",
                    seed3 / "checkpoints" / "serial-fr" / "checkpoint_last.pt")
    args = [*seeded.args]
    args[args.index("--work") + 1] = str(work)
    out = tmp_path / "tables"
    recipe.main([*args, "--seeds", "1,2,3", "--report-only", "--results", str(out)])

    summary = json.loads((out / "multi30k_multisource.json").read_text())
    flickr = {r["name"]: r for r in summary["test_sets"]["test_2016_flickr"]["models"]}
    assert flickr["text-only"]["seeds"] == [1, 2, 3] and flickr["serial-fr"]["seeds"] == [1, 2]
    assert flickr["text-only"]["per_seed"]["3"]["bleu"] == flickr["text-only"]["per_seed"]["1"]["bleu"]
    assert {r["name"]: r["seeds"] for r in summary["test_sets"][EXTRA_TEST]["models"]} == \
        {"text-only": [1, 2], "serial-fr": [1, 2]}
    unfinished = {(u["name"], u["seed"]): u for u in summary["unfinished"]}
    assert unfinished.keys() == {("text-only", 3), ("serial-fr", 3)}
    assert unfinished[("text-only", 3)]["state"] == f"missing: {EXTRA_TEST}"
    assert unfinished[("serial-fr", 3)]["state"] == \
        "missing: training (interrupted at update 40 of 40; resumes from checkpoint_last.pt)"
    command = unfinished[("text-only", 3)]["command"]
    assert command.endswith("--seeds 3 --models text-only --pairs fr") and "--report-only" not in command
    assert f"`{command}`" in (out / "multi30k_multisource.md").read_text()
    assert [p.name for p in (seed3 / "checkpoints" / "serial-fr").iterdir()] == ["checkpoint_last.pt"]
    assert not (seed3 / "results" / "serial-fr.json").exists()  # a report trains nothing

    recipe.main(command.split()[3:])  # the listed command, as a reader would run it
    record = json.loads((seed3 / "results" / "text-only.json").read_text())
    assert sorted(record["test_sets"]) == sorted(["test_2016_flickr", EXTRA_TEST]) and record["train_wall_s"] == 5.0
    assert (seed3 / "eval" / "text-only" / f"generate-{EXTRA_TEST}.txt").is_file()
    assert not (seed3 / "eval" / "text-only" / "train.log").exists()  # decoded, not trained again


def test_without_matplotlib_the_plot_is_skipped_with_one_message(recipe, seeded, tmp_path, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    out = tmp_path / "tables"
    with caplog.at_level(logging.WARNING):
        recipe.main([*seeded.args, "--seeds", "1,2", "--report-only", "--results", str(out)])
    assert sorted(p.name for p in out.iterdir()) == ["hypotheses", "multi30k_multisource.json", "multi30k_multisource.md"]
    assert [r.getMessage() for r in caplog.records if "matplotlib" in r.getMessage()] == \
        ['plot multi30k_multisource.png skipped: matplotlib is not installed (pip install "fairseq-ctx[plots]"); the '
         'tables are complete without it']


def test_an_extra_test_set_needs_only_the_languages_the_run_reads(recipe, tmp_path):
    data = tmp_path / "multi30k"
    data.mkdir()
    write_fixture(data)
    write_split(data, EXTRA_TEST, 10, 7, langs=("en", "de"))
    with pytest.raises(SystemExit, match=rf"{EXTRA_TEST}\.lc\.norm\.tok\.fr not found; add the test set's files or "
                                         rf"leave {EXTRA_TEST} out of --test-sets"):
        recipe.main([str(data), "--work", str(tmp_path / "work"), "--pairs", "fr", "--test-sets",
                     f"test_2016_flickr,{EXTRA_TEST}"])
    assert not (tmp_path / "work").exists()
    with pytest.raises(SystemExit, match="--test-sets 'test_2016_flickr,val': give distinct file stems"):
        recipe.main([str(data), "--test-sets", "test_2016_flickr,val"])


def test_missing_file_is_named_before_anything_is_written(recipe, tmp_path):
    data = tmp_path / "multi30k"
    data.mkdir()
    write_fixture(data)
    (data / "val.lc.norm.tok.cs").unlink()
    with pytest.raises(SystemExit, match=r"val\.lc\.norm\.tok\.cs not found; pass the directory holding Multi30k"):
        recipe.main([str(data), "--work", str(tmp_path / "work"), "--results", str(tmp_path / "results")])
    assert not (tmp_path / "work").exists() and not (tmp_path / "results").exists()


def test_misaligned_split_names_every_file_and_its_line_count(recipe, tmp_path):
    data = tmp_path / "multi30k"
    data.mkdir()
    write_fixture(data)
    fr = data / "test_2016_flickr.lc.norm.tok.fr"
    fr.write_text("".join(fr.read_text().splitlines(keepends=True)[:-1]))
    with pytest.raises(SystemExit, match=r"test_2016_flickr files are not line-aligned: .*\.en has 12 lines, "
                                         r".*\.fr has 11 lines"):
        recipe.main([str(data), "--work", str(tmp_path / "work")])


def test_work_directory_may_not_be_the_data_directory(recipe, tmp_path):
    write_fixture(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(SystemExit, match="is the data directory; choose another directory"):
        recipe.main([str(tmp_path), "--work", str(tmp_path)])
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_options_that_cannot_go_together_are_refused_before_any_work(recipe, tmp_path, capsys):
    for argv, message in (([str(tmp_path), "--pairs", "fr,ro"], "--pairs ro unknown; choose from fr,cs"),
                          ([str(tmp_path), "--seed", "2", "--seeds", "1,2"], "give --seed or --seeds, not both"),
                          ([str(tmp_path), "--report-only", "--no-report"], "--report-only and --no-report leave "
                                                                            "nothing to do")):
        with pytest.raises(SystemExit):
            recipe.main([*argv, "--work", str(tmp_path / "work")])
        assert f"multi30k_multisource.py: error: {message}" in capsys.readouterr().err
    assert not (tmp_path / "work").exists()


def test_resume_refuses_results_trained_with_other_settings(recipe, tmp_path):
    data, work = tmp_path / "multi30k", tmp_path / "work"
    data.mkdir()
    write_fixture(data)
    (work / "results").mkdir(parents=True)
    (work / "results" / "text-only.json").write_text(json.dumps({"settings": {"max_update": 1}}))
    with pytest.raises(SystemExit, match=r"text-only\.json was trained with other settings \(.*max_update: 1 there, "
                                         r"2800 now.*\); delete it to retrain"):
        recipe.main([str(data), "--work", str(work), "--models", "text-only"])
    assert sorted(p.name for p in work.iterdir()) == ["results"]  # refused before any data preparation


def test_sentencepiece_segmentation_is_deterministic_and_lossless(recipe, tmp_path):
    from examples.multimodal_mt.multi30k_data import encode, split_name, train_sentencepiece

    data = tmp_path / "multi30k"
    data.mkdir()
    write_fixture(data)
    first = train_sentencepiece(str(data), tmp_path / "a", LANGS, 60)
    second = train_sentencepiece(str(data), tmp_path / "b", LANGS, 60)
    for stem in ("train", "val", "test_2016_flickr"):
        for directory in (first, second):
            encode(str(data), directory, stem, LANGS)
        for lang in LANGS:
            pieces = (first / f"{split_name(stem)}.{lang}").read_text(encoding="utf-8")
            assert pieces == (second / f"{split_name(stem)}.{lang}").read_text(encoding="utf-8")
            # removing the pieces (fairseq's --post-process sentencepiece) gives back the tokenised text
            restored = [line.replace(" ", "").replace("\u2581", " ").strip() for line in pieces.splitlines()]
            assert restored == (data / f"{stem}.lc.norm.tok.{lang}").read_text(encoding="utf-8").splitlines()


def test_a_resumed_run_keeps_the_validations_logged_before_it_stopped(tmp_path):
    log = tmp_path / "train.log"

    def validation(updates: int, bleu: float) -> str:
        return f"epoch 001 | valid on 'valid' subset | loss 7.0 | bleu {bleu} | num_updates {updates}"

    logger = logging.getLogger("recipe_test")
    logger.setLevel(logging.INFO)
    with captured_log(log):
        logger.info(validation(200, 2.9))
        logger.info(validation(400, 6.7))
    with captured_log(log):  # resumed from the checkpoint of update 200
        logger.info(validation(400, 6.9))
        logger.info(validation(600, 16.0))
    assert validation_curve(log.read_text(), "bleu") == [[200, 2.9], [400, 6.9], [600, 16.0]]
    assert validation_curve(log.read_text(), "loss") == [[200, 7.0], [400, 7.0], [600, 7.0]]


def test_the_direction_is_stated_for_one_or_several_multi_source_models(recipe):
    from examples.multimodal_mt.multi30k_results import direction

    def row(name: str, second_source, delta: float = 0.0, verdict: str = "", p: float = 0.0) -> dict:
        versus = {"seeds": [1], "delta_bleu": {"mean": delta, "sd": None}, "verdict": verdict, "verdict_p": p}
        return {"name": name, "second_source": second_source, "vs_text_only": versus}

    base = {"name": "text-only", "second_source": None}
    assert direction([base, row("serial-fr", "fr", 1.63, "held", 0.004)]) == \
        "Held for the multi-source model: serial-fr (+1.63, p 0.004)."
    assert direction([base, row("serial-fr", "fr", 1.63, "held", 0.004), row("flat-fr", "fr", 0.94, "held", 0.01)]) == \
        "Held for all 2 multi-source models: serial-fr (+1.63, p 0.004), flat-fr (+0.94, p 0.010)."
    assert direction([base, row("serial-fr", "fr", 1.63, "held", 0.004), row("flat-fr", "fr", 0.39, "undecided", 0.135),
                      row("hierarchical-fr", "fr", -2.19, "did not hold", 0.001)]) == \
        ("Held for 1 of 3 multi-source models: serial-fr (+1.63, p 0.004); undecided (p ≥ 0.05 or no difference) for "
         "flat-fr (+0.39, p 0.135); did not hold (below text-only, p < 0.05) for hierarchical-fr (-2.19, p 0.001).")
    assert direction([row("serial-fr", "fr", 1.63, "held", 0.004)]).startswith("Not judged")


def test_the_length_check_follows_its_stated_rule(recipe):
    from examples.multimodal_mt.multi30k_results import length_check

    base = {"ratio": {"mean": 0.95}}

    def model(ratio: float, delta: float, delta_no_bp: float, seeds=(1,), p_no_bp: float = None) -> dict:
        return {"ratio": {"mean": ratio}, "vs_text_only": {"seeds": list(seeds), "delta_bleu": {"mean": delta},
                                                           "delta_bleu_no_bp": {"mean": delta_no_bp},
                                                           "t_bleu_no_bp": {"p": p_no_bp}}}

    assert length_check(model(1.03, 1.3, 0.4), base) == "yes: the gain remains without BP (one seed, untested)"
    assert length_check(model(1.03, 1.3, -0.2), base).startswith("no: without BP it is not above text-only")
    assert length_check(model(0.90, 1.3, 2.0), base).startswith("not checked: shorter than text-only")
    assert length_check(model(1.03, -0.5, -1.0), base) == "no gain to check"
    # several seeds: the BP-free difference passes the t-test over seeds, or the check is undecided
    assert length_check(model(1.03, 1.3, 0.9, (1, 2, 3), 0.01), base) == "yes: the gain remains without BP (p 0.010)"
    assert length_check(model(1.03, 1.3, 0.35, (1, 2, 3), 0.60), base) == (
        "undecided: above text-only without BP, p 0.600 (the gain may come from length)")
    assert length_check(model(1.03, 1.3, -0.1, (1, 2, 3), 0.80), base).startswith("no: without BP")


def test_the_convergence_outcome_is_the_rules_on_the_text_only_curve(recipe):
    from examples.multimodal_mt.multi30k_results import convergence

    def judged(name: str, second_source, seed: int, *bleus: float) -> dict:
        curve = [[250 * (k + 1), bleu] for k, bleu in enumerate(bleus)]
        return {"name": name, "second_source": second_source, "seed": seed,
                "plateau": BLEU_PLATEAU.judge(curve).as_dict()}

    rising = judged("serial-fr", "fr", 1, 10, 20, 25, 27, 28, 29.0, 30.0, 31.0)
    flat = judged("text-only", None, 2, 10, 20, 25, 30, 32, 33.0, 33.2, 33.1)
    assert rising["plateau"]["text"] == ("best 29.00 up to update 1600, best 31.00 in updates 1601–2000 (gain +2.00): "
                                         "still improving (gain of 0.5 or more)")
    assert convergence([rising, flat]) == ("text-only (seed 2): best 33.00 up to update 1600, best 33.20 in updates "
                                           "1601–2000 (gain +0.20): plateau (gain under 0.5)")
    assert convergence([judged("text-only", None, 1, 10, 20)]) == \
        "text-only (seed 1): not judged: 2 validation(s), fewer than the 5 the rule needs"
    assert convergence([rising]) == "not judged: the run has no text-only model"
