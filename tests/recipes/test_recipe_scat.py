"""The SCAT En→Fr recipe (examples/context_mt/scat_en_fr.py) end to end on a 200-sentence slice
written here in the published layouts: SCAT's ``highlighted.*`` files with ``<p>`` and
``<hon>…<hoff>`` markers, Multi30k's raw ``*.{en,fr}.gz``. Stage 1 for a fixed budget and the
average of its last epoch checkpoints, stage 2 with two seeds, every model evaluated on SCAT test."""
import gzip
import json
import logging
import random
import re
import shutil
from pathlib import Path

import pytest
import torch

from devtools.machine_facts import MachineFacts
from devtools.recipe_runs import chosen_precision, job_command
from devtools.seed_statistics import direction_verdict, t_test
from devtools.train_log import validation_curve
from fairseq_ctx.context.contrastive.scat import read_marked_context
from fairseq_ctx.core.sentencepiece_codec import SentencePieceCodec

NOUNS = [("table", "table", "elle"), ("car", "voiture", "elle"), ("book", "livre", "il"), ("tree", "arbre", "il"),
         ("house", "maison", "elle"), ("dog", "chien", "il")]
STAGE_TWO = ["sentence_scat", "hmce_target"]
TEST = 15  # SCAT test examples (valid: 20)


def write_scat(directory: Path, split: str, count: int, rng: random.Random) -> None:
    rows = {"context.en": [], "en": [], "context.fr": [], "fr": []}
    for number in range(count):
        en_noun, fr_noun, pronoun = rng.choice(NOUNS)
        article = "la" if pronoun == "elle" else "le"
        noun = f" <hon>{en_noun}<hoff>" if split == "train" else f" {en_noun}"  # no English mark in valid / test
        rows["context.en"].append(f"I saw the{noun}. It was near the river." if number % 7 else "")
        rows["context.fr"].append(f"J'ai vu {article}  <hon>{fr_noun}<hoff> . C'était près de la rivière."
                                  if number % 7 else "")
        rows["en"].append(f"<p>It</p> is old.")
        rows["fr"].append(f"<p>{pronoun.capitalize()}</p> est vieille." if pronoun == "elle"
                          else f"<p>{pronoun.capitalize()}</p> est vieux.")
    for suffix, lines in rows.items():
        (directory / f"highlighted.{split}.{suffix}").write_text("".join(f"{line}\n" for line in lines), "utf-8")


def write_multi30k(directory: Path, name: str, count: int, rng: random.Random) -> None:
    pairs = [(f"A man looks at a {en}.", f"Un homme regarde {'une' if p == 'elle' else 'un'} {fr}.")
             for en, fr, p in (rng.choice(NOUNS) for _ in range(count))]
    for index, lang in enumerate(("en", "fr")):
        with gzip.open(directory / f"{name}.{lang}.gz", "wt", encoding="utf-8") as handle:
            handle.write("".join(f"{pair[index]}\n" for pair in pairs))


def write_data(root: Path, seed: int = 1) -> tuple:
    rng = random.Random(seed)
    scat, multi30k = root / "scat", root / "multi30k"
    scat.mkdir()
    multi30k.mkdir()
    write_scat(scat, "train", 120, rng)
    write_scat(scat, "valid", 20, rng)
    write_scat(scat, "test", TEST, rng)
    write_multi30k(multi30k, "train", 50, rng)
    write_multi30k(multi30k, "val", 10, rng)
    write_multi30k(multi30k, "test_2016_flickr", 12, rng)
    return scat, multi30k


@pytest.fixture(scope="module")
def recipe():
    from examples.context_mt import scat_en_fr

    yield scat_en_fr


@pytest.fixture(scope="module")
def recipe_run(recipe, tmp_path_factory):
    root = tmp_path_factory.mktemp("scat")
    scat, multi30k = write_data(root)
    argv = ["--scat-dir", str(scat), "--multi30k-dir", str(multi30k), "--work", str(root / "work"),
            "--sentence-updates", "8", "--update-freq", "1", "--average-last", "2", "--validate-every", "1",
            "--context-updates", "1", "--context-batch-size", "8",
            "--embed-dim", "16", "--ffn-dim", "32", "--layers", "1", "--heads", "2", "--spm-vocab", "60", "--beam", "1",
            "--max-tokens", "2000", "--log-interval", "1", "--models", *STAGE_TWO, "--seeds", "1,2", "--jobs", "1",
            "--precision", "fp32"]
    messages = []  # what stage-2 initialisation logs
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    loggers = [logging.getLogger(name) for name in ("fairseq_ctx.context.sentence_init", "fairseq.checkpoint_utils")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        recipe.main(argv)
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
    return root, argv, messages, json.loads((root / "work" / "results-tables" / "scat_en_fr.json").read_text())


def test_stage_one_uses_every_sentence_pair_and_tests_the_average_of_its_last_epochs(recipe, recipe_run):
    root, _, _, result = recipe_run
    prep = root / "work" / "prep"
    scat = root / "scat"

    def unmarked(name):
        return [recipe.scat_data.unmark(line) for line in (scat / name).read_text().splitlines()]

    multi30k = gzip.open(root / "multi30k" / "train.en.gz", "rt").read().splitlines()
    context = [line for line in unmarked("highlighted.train.context.en") if line]
    assert (prep / "sentence.train.en").read_text().splitlines() == [
        *multi30k, *unmarked("highlighted.train.en"), *context]  # Multi30k + SCAT sentences + context lines
    assert len(context) == 102  # every 7th example has no context line
    counts = result["corpus"]["counts"]
    assert (counts["stage_one_train"], counts["scat_train_context_lines"], counts["scat_valid"]) == (272, 102, 20)
    stage_one = result["stage_one"]
    checkpoints = root / "work" / "models" / "sentence" / "checkpoints"
    epochs = sorted(int(p.name[10:-3]) for p in checkpoints.glob("checkpoint[0-9]*.pt"))
    assert stage_one["updates"] == 8 and len(epochs) >= 2 and len(stage_one["valid_loss"]) == len(epochs)
    assert stage_one["averaged_checkpoints"] == [f"checkpoint{e}.pt" for e in epochs[-2:]]
    states = [torch.load(checkpoints / name, weights_only=True)["model"] for name in stage_one["averaged_checkpoints"]]
    averaged = torch.load(checkpoints / "checkpoint_averaged.pt", weights_only=True)["model"]
    name = "encoder.layers.0.fc1.weight"
    assert torch.allclose(averaged[name], (states[0][name] + states[1][name]) / 2)
    args = (root / "work" / "commands.sh").read_text()
    assert "--max-tokens 2000 --update-freq 1 --max-update 8 " in args and "--save-interval 1 --validate-interval 1" in args
    assert result["unfinished"] == []


def test_every_stage_two_run_records_the_stage_one_model_it_started_from(recipe_run):
    from devtools.checkpoint_averaging import weights_digest

    root, _, _, result = recipe_run
    averaged = root / "work" / "models" / "sentence" / "checkpoints" / "checkpoint_averaged.pt"
    digest = result["stage_one"]["weights_sha256"]
    assert digest == weights_digest(averaged) != weights_digest(averaged.with_name("checkpoint_last.pt"))
    assert {r["stage_one_sha256"] for r in result["rows"] if r["model"] != "sentence"} == {digest}
    markdown = (root / "work" / "results-tables" / "scat_en_fr.md").read_text()
    assert f"- Stage-1 model: parameters SHA-256 `{digest}`; stage-2 runs started from it: sentence_scat.seed1" in markdown


def test_stage_one_is_scored_on_multi30k_test_cased_and_lowercased(recipe_run):
    import sacrebleu

    root, _, _, result = recipe_run
    scores = result["stage_one"]["multi30k_test"]
    kept = root / "work" / "results-tables" / "scat_en_fr.translations" / "sentence.multi30k.fr"
    hypotheses = kept.read_text(encoding="utf-8").splitlines()
    references = gzip.open(root / "multi30k" / "test_2016_flickr.fr.gz", "rt").read().splitlines()
    assert scores["sentences"] == len(hypotheses) == 12
    assert scores["cased"]["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score)
    assert scores["lowercased"]["bleu"] == pytest.approx(
        sacrebleu.corpus_bleu(hypotheses, [references], lowercase=True).score)
    assert "## Stage 1 (sentence level) on Multi30k test_2016_flickr en→fr" in \
        (root / "work" / "results-tables" / "scat_en_fr.md").read_text()


def test_stage_two_starts_from_the_averaged_stage_one_checkpoint_per_seed(recipe_run):
    root, _, messages, result = recipe_run
    work = root / "work"
    best = work / "models" / "sentence" / "checkpoints" / "checkpoint_averaged.pt"
    tensors = len(torch.load(best, weights_only=True)["model"])
    loaded = [int(m.group(1)) for m in (re.search(r"loaded (\d+) tensors from sentence-level checkpoint", message)
                                        for message in messages) if m]
    assert loaded == [tensors, tensors]  # hmce_target, seeds 1 and 2
    assert sum(f"loading pretrained model from {best}" in message for message in messages) == 2  # the control
    assert [(r["model"], r["seed"]) for r in result["rows"]] == [
        ("sentence", 1), ("sentence_scat", 1), ("hmce_target", 1), ("sentence_scat", 2), ("hmce_target", 2)]
    for seed in (1, 2):
        for name in STAGE_TWO:
            state = json.loads((work / f"seed{seed}" / "models" / name / "train.json").read_text())
            assert state["stage_one_updates"] == 8
            args = (work / "commands.sh").read_text()
            assert f"--seed {seed} --save-dir {work / f'seed{seed}' / 'models' / name / 'checkpoints'}" in args
    for row in result["rows"][1:]:
        assert row["updates"] == 1 and row["sentences_per_update"] == 8  # the same sentences per update
        assert [u for u, _ in row["valid_loss"]] == [1]
    machine = MachineFacts(**result["machine"]).describe()
    assert all(row["trained_on"] == [machine] for row in result["rows"])  # each run's log records its machine
    assert "- Trained on: the machine above (every run, as its training log records)" in \
        (work / "results-tables" / "scat_en_fr.md").read_text()


def test_cxmi_contrastive_and_scores_are_kept_per_run_and_seed(recipe_run):
    root, _, _, result = recipe_run
    for row in result["rows"]:
        assert len(row["cxmi_per_sentence"]) == TEST and row["contrastive_total"] == TEST  # SCAT test
        assert row["cxmi"] == pytest.approx(sum(row["cxmi_per_sentence"]) / TEST)
        if row["context_size"] == 0:
            assert row["cxmi_per_sentence"] == [0.0] * TEST  # no context, no information from it
        assert row["contrastive_correct"] == sum(e["correct"] for e in row["examples"])
    assert any(value != 0 for row in result["rows"] if row["model"] == "hmce_target"
               for value in row["cxmi_per_sentence"])
    tsv = (root / "work" / "results-tables" / "scat_en_fr.contrastive.tsv").read_text().splitlines()
    assert len(tsv) == 1 + 5 * TEST and tsv[1].split("\t")[:2] == ["sentence", "1"]


def test_attention_to_the_marked_supporting_words_is_measured_on_each_context_side(recipe_run):
    root, _, _, result = recipe_run
    measured = {(r["model"], r["seed"]): r["supporting_attention"] for r in result["rows"] if "supporting_attention" in r}
    assert sorted(measured) == [("hmce_target", 1), ("hmce_target", 2)]
    for source, target in measured.values():
        assert (source["side"], Path(source["input"]).name, source["examples"]) == ("source", "highlighted.train", 102)
        assert (target["side"], Path(target["input"]).name, target["examples"]) == ("target", "highlighted.test", 12)
        masses = [e["mass"] for e in target["per_example"]]  # test lines 1, 8 and 15 have no context
        assert target["mass"] == pytest.approx(sum(masses) / 12) and 0 < target["mass"] < 1
        lines = {Path(line.origin).name: line for line in
                 read_marked_context(str(root / "scat" / "highlighted.train"), "source")[0]}
        codec = SentencePieceCodec(str(root / "work" / "spm" / "spm.model"))
        for example in source["per_example"]:  # the marked word's pieces (and no other) over all positions
            line = lines[Path(example["origin"]).name]
            [word] = [w for w, marked in zip(line.text.split(), line.marked) if marked]
            assert example["uniform"] == pytest.approx(len(codec.encode(word).split())
                                                       / (len(codec.encode(line.text).split()) + 1))
    tables = root / "work" / "results-tables"
    tsv = (tables / "scat_en_fr.supporting_attention.tsv").read_text().splitlines()
    assert len(tsv) == 1 + 2 * (102 + 12) and tsv[1].split("\t")[:4] == ["hmce_target", "1", "source",
                                                                          "highlighted.train.context.en:2"]
    markdown = (tables / "scat_en_fr.md").read_text()
    assert "## Where the word-level context attention looks" in markdown
    assert "| hmce_target | 1 | English (train) | 102 |" in markdown and "| hmce_target | 2 | French (test) | 12 |" in markdown


def test_the_verdict_and_context_use_are_tested_over_the_seeds(recipe_run):
    _, _, _, result = recipe_run
    rows = {(r["model"], r["seed"]): r for r in result["rows"]}
    differences = [rows[("hmce_target", s)]["contrastive_accuracy"] - rows[("sentence_scat", s)]["contrastive_accuracy"]
                   for s in (1, 2)]
    [comparison] = result["comparisons"]
    assert comparison["model"] == "hmce_target" and comparison["seeds"] == [1, 2]
    assert comparison["contrastive_accuracy"]["differences"] == pytest.approx(differences)
    test = t_test(differences)
    assert comparison["contrastive_accuracy"]["verdict"] == direction_verdict(test.mean, test.p)
    use = {u["model"]: u for u in result["context_use"]}
    assert use["hmce_target"]["values"] == pytest.approx([rows[("hmce_target", s)]["cxmi"] for s in (1, 2)])
    assert "sentence_scat" not in use  # no context: CXMI 0 by construction, nothing to test
    interval = comparison["examples_interval"]  # the same difference, each example averaged over the seeds
    assert interval["difference"] == pytest.approx(sum(differences) / 2, abs=0.5 / len(rows[("sentence_scat", 1)]["examples"]))
    assert interval["low"] <= interval["difference"] <= interval["high"]


def test_the_pronoun_prior_diagnostic(recipe_run):
    _, _, _, result = recipe_run
    examples = result["rows"][0]["examples"]
    feminine = sum(e["pronoun"] in ("elle", "elles") for e in examples) / len(examples)
    rules = {r["rule"].split(" (")[0]: r for r in result["prior_rows"]}
    assert rules["always the feminine pronoun"]["accuracy"] == pytest.approx(feminine)
    assert rules["always the masculine pronoun"]["accuracy"] == pytest.approx(1 - feminine)
    train = result["corpus"]["scat_train_pronouns"]
    majority_feminine = train.get("elle", 0) > train.get("il", 0)
    assert rules["SCAT train's majority per number"]["accuracy"] == pytest.approx(
        feminine if majority_feminine else 1 - feminine)  # the fixture has singular pronouns only
    for row in result["rows"]:
        prior = row["pronoun_prior"]
        on = {g: [e for e in row["examples"] if (e["pronoun"] in ("elle", "elles")) == (g == "feminine")]
              for g in ("feminine", "masculine")}
        for gender, mine in on.items():
            assert prior[f"{gender}_accuracy"] == pytest.approx(sum(e["correct"] for e in mine) / len(mine))
        assert prior["balanced_accuracy"] == pytest.approx((prior["feminine_accuracy"]
                                                            + prior["masculine_accuracy"]) / 2)


def test_translations_are_kept_and_rescore_to_the_table(recipe_run):
    from fairseq_ctx.cli import score

    root, _, _, result = recipe_run
    kept = root / "work" / "results-tables" / "scat_en_fr.translations"
    assert sorted(p.name for p in kept.iterdir()) == sorted(
        ["sentence.fr", "sentence.multi30k.fr", *[f"{m}.seed{s}.fr" for m in STAGE_TWO for s in (1, 2)]])
    row = result["rows"][2]
    rescored = root / "rescored.json"
    score.main(["--hyp", str(kept / "hmce_target.seed1.fr"), "--ref", str(root / "work" / "test" / "scat.test.ref.fr"),
                "--no-comet", "--json", str(rescored)])
    again = json.loads(rescored.read_text())
    assert (again["bleu"], again["chrf"], again["bleu_signature"]) == (row["bleu"], row["chrf"], row["bleu_signature"])
    markdown = (root / "work" / "results-tables" / "scat_en_fr.md").read_text()
    for text in ("- Precision: fp32", "- Seeds: 1, 2\n", "paired t-test over 2 seeds", "## Results on SCAT test",
                 "- Convergence rule (fixed before the runs): none: fixed budgets",
                 "- Convergence: stage 1 trained 8 updates; averaged checkpoint",
                 "- Verdicts: an expected direction held when"):
        assert text in markdown


@pytest.mark.parametrize("stretch", [["--stretch-updates", "5"], ["--stretch-minutes", "0.0001"]],
                         ids=["on-budget", "on-time"])
def test_stretches_train_exactly_what_one_run_trains(stretch, recipe, recipe_run, tmp_path):
    """Stage 1 cut into stretches, on a budget of updates or on time (fairseq's --stop-time-hours,
    here a fraction of a second: a stretch of about one update), each continued by the same command:
    the weights, the optimizer state and the epoch-end validation losses are those of the one run of
    ``recipe_run``; each stretch that ended early is recorded in the results folder with the
    command that continues it."""
    root, argv, _, _ = recipe_run
    work = tmp_path / "work"
    for prepared in ("prep", "spm", "data-bin", "test"):  # the same data, not prepared again
        shutil.copytree(root / "work" / prepared, work / prepared)
    results = tmp_path / "results"
    stretched = [*argv[:argv.index("--work")], "--work", str(work), *argv[argv.index("--work") + 2:],
                 "--stage-one-only", *stretch, "--results", str(results)]
    out = work / "models" / "sentence"
    calls = 0
    while not (out / "result.json").exists():
        recipe.main(stretched)
        calls += 1
        assert calls <= 8
    records = json.loads((results / "stretches.json").read_text())
    assert len(records) == calls - 1 >= 1  # every stretch but the last ended early
    assert [(r["from_update"], r["budget"]) for r in records][0] == (0, 8)
    assert all(r["run"] == "sentence" and 0 < r["to_update"] < 8 and r["validation_loss"] is not None
               for r in records)
    assert [r["to_update"] for r in records] == sorted({r["to_update"] for r in records})
    assert all(f"{' '.join(stretch)}" in r["continue_with"] for r in records)
    if stretch[0] == "--stretch-updates":
        assert [r["to_update"] for r in records] == [5]
    one_run = torch.load(root / "work" / "models" / "sentence" / "checkpoints" / "checkpoint_last.pt", weights_only=True)
    stretched_run = torch.load(out / "checkpoints" / "checkpoint_last.pt", weights_only=True)
    assert stretched_run["optimizer_history"][-1]["num_updates"] == 8
    assert stretched_run["model"].keys() == one_run["model"].keys()
    assert all(torch.equal(stretched_run["model"][k], one_run["model"][k]) for k in one_run["model"])
    moments = [(stretched_run["last_optimizer_state"]["state"][k]["exp_avg"],
                one_run["last_optimizer_state"]["state"][k]["exp_avg"]) for k in one_run["last_optimizer_state"]["state"]]
    assert moments and all(torch.equal(a, b) for a, b in moments)
    epoch_ends = validation_curve((root / "work" / "models" / "sentence" / "train.log").read_text(), "loss")
    assert all(point in validation_curve((out / "train.log").read_text(), "loss") for point in epoch_ends)
    assert json.loads((out / "result.json").read_text())["updates"] == 8


def test_a_rerun_resumes_and_stage_one_is_not_continued_under_stage_two(recipe, recipe_run):
    root, argv, _, result = recipe_run
    checkpoint = root / "work" / "seed2" / "models" / "hmce_target" / "checkpoints" / "checkpoint_last.pt"
    stamp = checkpoint.stat().st_mtime_ns
    recipe.main(argv)
    assert checkpoint.stat().st_mtime_ns == stamp
    rerun = json.loads((root / "work" / "results-tables" / "scat_en_fr.json").read_text())
    assert rerun["rows"] == result["rows"]
    with pytest.raises(recipe.scat_data.RecipeInputError, match=r"stage-2 models were initialised from its current "
                                                                r"checkpoint: .*hmce_target"):
        recipe.main([*argv, "--sentence-updates", "12"])


def test_report_only_reports_the_finished_runs_and_lists_the_rest_training_nothing(recipe, recipe_run, tmp_path):
    root, argv, _, result = recipe_run
    results = tmp_path / "report"
    recipe.main([*edited(argv, "--seeds", "1,2,3"), "--results", str(results), "--report-only"])
    assert not (root / "work" / "seed3" / "models" / "hmce_target" / "checkpoints").exists()
    report = json.loads((results / "scat_en_fr.json").read_text())
    assert report["rows"] == result["rows"] and report["settings"] == result["settings"]
    stage_two = [u for u in report["unfinished"] if u["seed"] == 3]
    assert sorted(u["name"] for u in stage_two) == sorted(STAGE_TWO)
    assert all("not trained yet" in u["state"] and "--seeds 3" in u["command"] and "--report-only" not in u["command"]
               for u in stage_two)
    with pytest.raises(SystemExit, match=r"--report-only: stage 1 has no result yet .*train it first: python "
                                         r"-m examples.context_mt.scat_en_fr .*--stage-one-only"):
        recipe.main([*edited(argv, "--work", str(tmp_path / "empty")), "--report-only"])
    with pytest.raises(SystemExit):
        recipe.main([*argv, "--report-only", "--restart"])
    assert (root / "work" / "models" / "sentence" / "result.json").exists()


def edited(argv, option, value):
    """``argv`` with ``option`` set to ``value``."""
    at = argv.index(option)
    return [*argv[:at + 1], value, *argv[at + 2:]]


def test_a_job_and_a_resume_command_repeat_the_settings_of_the_command(recipe, recipe_run):
    root, argv, _, result = recipe_run
    parser = recipe.build_parser()
    argv = [*argv, "--lr", "5e-4", "--results", "r", "--restart", "--seed", "3"]
    args = recipe.parse_args(parser, argv)
    command = job_command(parser, recipe.SCRIPT, argv, {"--seeds": "2", "--models": "hmce"},
                                 drop=["--restart", "--stage-one-only"])
    assert command[1:3] == ("-m", "examples.context_mt.scat_en_fr")
    child = recipe.parse_args(parser, list(command[3:]))
    # stage 1's seed goes with every job: stage 2 starts from it
    assert vars(child) == {**vars(args), "models": ["hmce"], "seeds": [2], "jobs": 1, "no_report": True,
                           "restart": False}
    # what resumes a run never deletes the work directory first
    [listed] = recipe.unfinished(recipe.Recipe(args), [("hmce", 2)], parser, argv)
    assert listed["name"] == "hmce" and "--restart" not in listed["command"]
    assert listed["command"].startswith("python -m examples.context_mt.scat_en_fr --scat-dir")
    assert listed["command"].endswith("--seed 3 --seeds 2 --models hmce")


def test_hmce_coword_is_hmce_trained_with_the_recipes_coword_dropout(recipe, recipe_run, tmp_path):
    root, argv, _, _ = recipe_run
    with pytest.raises(SystemExit):
        recipe.main([*argv, "--models", "hmce_coword", "--coword-dropout", "1"])
    assert not (root / "work" / "seed1" / "models" / "hmce_coword").exists()
    recipe.main([*argv, "--models", "hmce_coword", "--seeds", "1", "--coword-dropout", "0.25",
                 "--results", str(tmp_path / "results")])
    result = json.loads((root / "work" / "seed1" / "models" / "hmce_coword" / "result.json").read_text())
    assert (result["arch"], result["coword_dropout"], result["context_size"]) == ("hmce", 0.25, 1)
    trainings = [line for line in (root / "work" / "commands.sh").read_text().splitlines() if "fairseq-train" in line]
    assert [line for line in trainings if "--coword-dropout" in line] == [
        line for line in trainings if "models/hmce_coword/" in line]
    assert all("--coword-dropout 0.25 " in line for line in trainings if "models/hmce_coword/" in line)


def test_context_batch_size_gives_every_stage_two_model_the_same_sentences_per_update(recipe):
    parser = recipe.build_parser()
    tokens = recipe.parse_args(parser, ["--scat-dir", "s", "--multi30k-dir", "m", "--context-batch-size", "0"])
    sentences = recipe.parse_args(parser, ["--scat-dir", "s", "--multi30k-dir", "m"])  # the default: 64 sentences
    assert {recipe.batch_args(name, tokens)[0] for name in ["sentence", *recipe.STAGE_TWO_MODELS]} == {"--max-tokens"}
    assert recipe.batch_args("sentence", sentences) == ["--max-tokens", "4096", "--update-freq", "2"]
    assert {recipe.batch_args(name, tokens)[1] for name in recipe.STAGE_TWO_MODELS} == {"4096"}  # no update-freq
    assert {tuple(recipe.batch_args(name, sentences)) for name in recipe.STAGE_TWO_MODELS} == {("--batch-size", "64")}
    assert sentences.precision == chosen_precision("cpu") and sentences.models == ["sentence_scat", "hmce", "hce", "ctx_concat",
                                                                 "hmce_target"]


def test_a_work_directory_of_the_earlier_stage_one_corpus_is_refused(recipe, tmp_path):
    scat, multi30k = write_data(tmp_path)
    (tmp_path / "w" / "prep").mkdir(parents=True)
    with pytest.raises(recipe.scat_data.RecipeInputError, match=r"prepared by an earlier version of this recipe"):
        recipe.main(["--scat-dir", str(scat), "--multi30k-dir", str(multi30k), "--work", str(tmp_path / "w")])


def test_recipe_names_missing_data_before_any_work(recipe, tmp_path):
    with pytest.raises(recipe.scat_data.RecipeInputError, match=r"highlighted\.train\.context\.en.*--scat-dir"):
        recipe.main(["--scat-dir", str(tmp_path), "--multi30k-dir", str(tmp_path), "--work", str(tmp_path / "w")])
    assert not (tmp_path / "w").exists()


def test_recipe_names_misaligned_scat_files_before_training(recipe, tmp_path):
    rng = random.Random(2)
    for split in ("train", "valid", "test"):
        write_scat(tmp_path, split, 5, rng)
    for name in ("train", "val", "test_2016_flickr"):
        write_multi30k(tmp_path, name, 5, rng)
    french = tmp_path / "highlighted.train.fr"
    french.write_text("".join(french.read_text().splitlines(keepends=True)[:-1]))
    with pytest.raises(ValueError, match=r"SCAT train: the context and sentence files must have one line per example, "
                                         r"but .*highlighted\.train\.fr: 4 lines"):
        recipe.main(["--scat-dir", str(tmp_path), "--multi30k-dir", str(tmp_path), "--work", str(tmp_path / "w")])
    assert not (tmp_path / "w" / "models").exists()


# ---- contrastive sets beyond SCAT test, in their published layouts -----------------------------------
def french_context(noun) -> str:
    return f"J'ai vu {'la' if noun[2] == 'elle' else 'le'} {noun[1]} ."


def french_sentence(pronoun: str) -> str:
    return f"{pronoun.capitalize()} est vieux ."


def write_discevalmt(directory: Path) -> Path:
    """anaphora.json (Bawden et al., 2018): per noun pair two blocks, each with a correct and a
    semi-correct pair, every current translation correct in one pair and incorrect in another."""
    blocks = {}
    for a, b in ((NOUNS[0], NOUNS[2]), (NOUNS[1], NOUNS[3])):  # a feminine and a masculine noun
        for first, second in ((a, b), (b, a)):
            kind = {"elle": "f.sg", "il": "m.sg"}
            blocks[str(len(blocks) + 1)] = {"src": [f"I saw the {first[0]}.", "It is old."], "trg": [
                {"correct": [french_context(first), french_sentence(first[2])],
                 "incorrect": [french_context(first), french_sentence(second[2])], "type": kind[first[2]]},
                {"semi-correct": [french_context(second), french_sentence(second[2])],
                 "incorrect": [french_context(second), french_sentence(first[2])], "type": kind[second[2]]}]}
    path = directory / "anaphora.json"
    path.write_text(json.dumps(blocks, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def write_contrapro_fr(directory: Path, text_dir: Path) -> Path:
    """contrapro.json in ContraPro's layout (Müller et al., 2018) read as en→fr, and what its
    json2text_and_context.pl --context 1 writes from it (into ``text_dir``)."""
    entries, text, context = [], {"en": [], "fr": []}, {"en": [], "fr": []}
    for number, noun in enumerate(NOUNS[:4], 1):
        wrong = "il" if noun[2] == "elle" else "elle"
        entries.append({"ante distance": 1, "document id": "fixture", "segment id": 2 * number,
                        "errors": [{"contrastive": french_sentence(wrong), "replacement": wrong}],
                        "intrasegmental": False, "ref pronoun": noun[2], "ref segment": french_sentence(noun[2]),
                        "src pronoun": "it", "src segment": "It is old."})
        for target in (french_sentence(noun[2]), french_sentence(wrong)):
            text["en"].append("It is old.")
            text["fr"].append(target)
            context["en"].append(f"I saw the {noun[0]}.")
            context["fr"].append(french_context(noun))
    text_dir.mkdir()
    for lang in ("en", "fr"):
        (text_dir / f"contrapro.text.{lang}").write_text("".join(f"{line}\n" for line in text[lang]), "utf-8")
        (text_dir / f"contrapro.context.{lang}").write_text("".join(f"{line}\n" for line in context[lang]), "utf-8")
    path = directory / "contrapro.json"
    path.write_text(json.dumps(entries, indent=2), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def extra_sets(recipe_run, recipe, tmp_path_factory):
    """The finished run of ``recipe_run`` again, with a set in each layout: every model is scored on
    them (nothing trained); a third run finds every score there and scores nothing."""
    root, argv, _, _ = recipe_run
    sets = tmp_path_factory.mktemp("extra_sets")
    rng = random.Random(5)
    write_scat(sets, "extra", 6, rng)
    given = [f"discevalmt:{write_discevalmt(sets)}",
             f"contrapro:{write_contrapro_fr(sets, sets / 'extracted')}:{sets / 'extracted'}",
             f"scat:{sets / 'highlighted.extra'}"]
    commands = root / "work" / "commands.sh"
    before = commands.read_text().count("\n")
    rerun = [*argv, "--results", str(sets / "results"), *(arg for value in given for arg in ("--extra-contrastive", value))]
    recipe.main(rerun)
    scored = commands.read_text().splitlines()[before:]
    recipe.main(rerun)
    again = commands.read_text().splitlines()[before + len(scored):]
    return root, sets, scored, again, json.loads((sets / "results" / "scat_en_fr.json").read_text())


def test_extra_contrastive_sets_in_each_layout_are_scored_with_every_model_once(extra_sets):
    root, sets, scored, again, result = extra_sets
    names = ["anaphora", "contrapro", "highlighted.extra"]
    assert [(s["name"], s["format"], s["examples"]) for s in result["extra_sets"]] == [
        ("anaphora", "discevalmt", 8), ("contrapro", "contrapro", 4), ("highlighted.extra", "scat", 6)]
    # stage 1 and two stage-2 models with two seeds (a run of another model that another test of this
    # module added to the same work directory is reported, but not scored on sets it was not asked for)
    requested = [r for r in result["rows"] if r["model"] in ("sentence", *STAGE_TWO)]
    assert len(requested) == 5
    for row in requested:
        assert list(row["extra_contrastive"]) == names
        assert [row["extra_contrastive"][n]["total"] for n in names] == [8, 4, 6]
    assert not any("fairseq-train" in line for line in scored)  # nothing trained again
    assert sum("fairseq-ctx-contrastive" in line for line in scored) == 5 * 3
    assert "--format contrapro" in "\n".join(scored) and "--source-lang en --target-lang fr" in "\n".join(scored)
    assert again == []  # every run has its scores
    markdown = (sets / "results" / "scat_en_fr.md").read_text()
    assert "## Other contrastive sets" in markdown and "| anaphora (discevalmt, 8) |" in markdown


def test_an_extra_set_score_is_the_contrastive_tools_own(extra_sets, tmp_path):
    from fairseq_ctx.cli import contrastive

    root, sets, _, _, result = extra_sets
    row = next(r for r in result["rows"] if r["model"] == "hmce_target" and r["seed"] == 1)
    report = tmp_path / "anaphora.json"
    contrastive.main([str(root / "work" / "seed1" / "models" / "hmce_target" / "checkpoints" / "checkpoint_last.pt"),
                      "--data", str(root / "work" / "data-bin" / "scat"), "--cpu", "--spm",
                      str(root / "work" / "spm" / "spm.model"), "--format", "discevalmt", "--input",
                      str(sets / "anaphora.json"), "--json", str(report)])
    assert row["extra_contrastive"]["anaphora"]["accuracy"] == json.loads(report.read_text())["accuracy"]


def test_an_extra_set_that_cannot_be_read_is_refused_before_any_work(recipe, tmp_path):
    scat, multi30k = write_data(tmp_path)
    broken = tmp_path / "anaphora.json"
    broken.write_text('{"1": {"src": ["a"], "trg": []}}', encoding="utf-8")
    from fairseq_ctx.context.contrastive.example import ContrastiveInputError

    with pytest.raises(ContrastiveInputError, match=re.escape(f"--extra-contrastive discevalmt:{broken}: ")):
        recipe.main(["--scat-dir", str(scat), "--multi30k-dir", str(multi30k), "--work", str(tmp_path / "w"),
                     "--extra-contrastive", f"discevalmt:{broken}"])
    assert not (tmp_path / "w").exists()
    with pytest.raises(SystemExit):
        recipe.parse_args(recipe.build_parser(), ["--scat-dir", "s", "--multi30k-dir", "m", "--extra-contrastive",
                                                  "voita:x.json"])
