"""The Multi30k multi-source recipe (examples/multimodal_mt/multi30k_multisource.py) end to end
on a small 4-way parallel fixture in Multi30k's layout: every model trains a few updates, is
decoded, scored and attacked, and the results files hold one row per model and pair."""
import json
import logging
import math
import random
import sys
from pathlib import Path

import pytest

from devtools.train_log import validation_curve

RECIPE_DIR = Path(__file__).resolve().parent.parent / "examples" / "multimodal_mt"
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


def write_fixture(directory: Path) -> None:
    rng = random.Random(0)
    for stem, size in (("train", 200), ("val", 16), ("test_2016_flickr", 12)):
        lines = []
        for _ in range(size):
            words = ["a", *rng.sample(["young", "old"], rng.randint(0, 1)), rng.choice(SUBJECTS), rng.choice(VERBS),
                     rng.choice(["on", "in"]), "the", rng.choice(PLACES), "."]
            lines.append(words)
        (directory / f"{stem}.lc.norm.tok.en").write_text("".join(" ".join(w) + "\n" for w in lines), encoding="utf-8")
        for k, lang in enumerate(("de", "fr", "cs")):
            text = "".join(" ".join(LEXICON[w][k] for w in words) + "\n" for words in lines)
            (directory / f"{stem}.lc.norm.tok.{lang}").write_text(text, encoding="utf-8")


TINY = ["--spm-vocab", "60", "--max-update", "4", "--batch-size", "50", "--warmup-updates", "2", "--lr", "1e-3",
        "--validate-every", "2", "--embed-dim", "16", "--ffn-dim", "32", "--layers", "1", "--heads", "2",
        "--rnn-hidden", "16", "--beam", "2", "--workers", "1"]


@pytest.fixture(scope="module")
def recipe():
    sys.path.insert(0, str(RECIPE_DIR))
    import multi30k_multisource

    yield multi30k_multisource
    sys.path.remove(str(RECIPE_DIR))


def test_recipe_end_to_end_writes_one_row_per_model_and_pair(recipe, tmp_path):
    data, work, results = tmp_path / "multi30k", tmp_path / "work", tmp_path / "results"
    data.mkdir()
    write_fixture(data)
    recipe.main([str(data), "--work", str(work), "--results", str(results), *TINY])

    summary = json.loads((results / "multi30k_multisource.json").read_text())
    names = sorted(row["name"] for row in summary["models"])
    expected = ["text-only"] + [f"{s}-{p}" for p in ("fr", "cs")
                                for s in ("serial", "parallel", "flat", "hierarchical", "rnn-hierarchical")]
    assert names == sorted(expected)
    for row in summary["models"]:
        assert row["updates"] == 4
        assert 0.0 <= row["bleu"] <= 100.0 and 0.0 <= row["chrf"] <= 100.0
        assert [u for u, _ in row["valid_bleu"]] == [2, 4]
        if row["second_source"] is None:
            assert "bleu_shuffled" not in row and "bleu_p" not in row
        else:
            assert math.isclose(row["bleu_drop"], row["bleu"] - row["bleu_shuffled"])
            assert 0.0 < row["bleu_p"] <= 1.0 and 0.0 < row["chrf_p"] <= 1.0
        assert row["train_wall_s"] > 0 and row["eval_wall_s"] > 0
    assert summary["machine"]["cpu_cores"] >= 1
    table = (results / "multi30k_multisource.md").read_text()
    assert sum(line.startswith("| ") and "→de |" in line for line in table.splitlines()) == 11
    assert ("Held:" in table) != ("Did not hold" in table)
    assert (results / "multi30k_multisource.png").read_bytes()[:4] == b"\x89PNG"
    # the data are never written to
    assert sorted(p.name for p in data.iterdir()) == sorted(
        f"{s}.lc.norm.tok.{l}" for s in ("train", "val", "test_2016_flickr") for l in ("en", "de", "fr", "cs"))


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


def test_unknown_model_or_pair_is_refused(recipe, tmp_path):
    with pytest.raises(SystemExit, match="--pairs ro unknown; choose from fr,cs"):
        recipe.main([str(tmp_path), "--pairs", "fr,ro"])


def test_resume_refuses_results_trained_with_other_settings(recipe, tmp_path):
    data, work = tmp_path / "multi30k", tmp_path / "work"
    data.mkdir()
    write_fixture(data)
    (work / "results").mkdir(parents=True)
    (work / "results" / "text-only.json").write_text(json.dumps({"settings": {"max_update": 1}}))
    for stage in ("spm", "data-bin"):  # data stages marked finished: only the model loop runs
        (work / stage).mkdir()
        (work / stage / "done").write_text("")
    with pytest.raises(SystemExit, match=r"text-only\.json was trained with other settings .* delete it to retrain"):
        recipe.main([str(data), "--work", str(work), "--models", "text-only"])


def test_sentencepiece_segmentation_is_deterministic_and_lossless(recipe, tmp_path):
    data = tmp_path / "multi30k"
    data.mkdir()
    write_fixture(data)
    langs = ["en", "de", "fr", "cs"]
    first = recipe.train_sentencepiece(str(data), tmp_path / "a", langs, 60)
    second = recipe.train_sentencepiece(str(data), tmp_path / "b", langs, 60)
    for split, stem in recipe.SPLITS.items():
        for lang in langs:
            pieces = (first / f"{split}.{lang}").read_text(encoding="utf-8")
            assert pieces == (second / f"{split}.{lang}").read_text(encoding="utf-8")
            # removing the pieces (fairseq's --post-process sentencepiece) gives back the tokenised text
            restored = [line.replace(" ", "").replace("\u2581", " ").strip() for line in pieces.splitlines()]
            assert restored == (data / f"{stem}.lc.norm.tok.{lang}").read_text(encoding="utf-8").splitlines()


def test_a_resumed_run_keeps_the_validations_logged_before_it_stopped(recipe, tmp_path):
    log = tmp_path / "train.log"

    def validation(updates: int, bleu: float) -> str:
        return f"epoch 001 | valid on 'valid' subset | loss 7.0 | bleu {bleu} | num_updates {updates}"

    logger = logging.getLogger("recipe_test")
    logger.setLevel(logging.INFO)
    with recipe.captured_log(log):
        logger.info(validation(200, 2.9))
        logger.info(validation(400, 6.7))
    with recipe.captured_log(log):  # resumed from the checkpoint of update 200
        logger.info(validation(400, 6.9))
        logger.info(validation(600, 16.0))
    assert validation_curve(log.read_text(), "bleu") == [[200, 2.9], [400, 6.9], [600, 16.0]]
    assert validation_curve(log.read_text(), "loss") == [[200, 7.0], [400, 7.0], [600, 7.0]]


def test_the_direction_is_stated_for_one_or_several_multi_source_models(monkeypatch):
    monkeypatch.syspath_prepend(str(RECIPE_DIR))
    from multi30k_results import direction

    def row(name: str, second_source, bleu: float) -> dict:
        return {"name": name, "second_source": second_source, "bleu": bleu}

    base = row("text-only", None, 30.06)
    assert direction([base, row("serial-fr", "fr", 31.69)]) == \
        "Held: the multi-source model is above text-only (30.06 BLEU)."
    assert direction([base, row("serial-fr", "fr", 31.69), row("flat-fr", "fr", 31.0)]) == \
        "Held: all 2 multi-source models are above text-only (30.06 BLEU)."
    assert direction([base, row("flat-fr", "fr", 29.0)]) == \
        "Did not hold for 1 of 1 models, at or below text-only (30.06 BLEU): flat-fr (29.00)."
    significant, chance = {"bleu_p": 0.004}, {"bleu_p": 0.135}
    assert direction([base, {**row("serial-fr", "fr", 31.69), **significant}, {**row("flat-fr", "fr", 30.45), **chance}]) == \
        ("Held: all 2 multi-source models are above text-only (30.06 BLEU). "
         "The gain may be chance (paired bootstrap p ≥ 0.05) for flat-fr (p 0.135).")
    assert direction([base, {**row("flat-fr", "fr", 29.0), **chance}]) == \
        "Did not hold for 1 of 1 models, at or below text-only (30.06 BLEU): flat-fr (29.00)."
    assert direction([row("serial-fr", "fr", 31.69)]).startswith("Not judged")


def test_the_plateau_is_judged_on_the_last_fifth_of_the_text_only_curve(monkeypatch):
    monkeypatch.syspath_prepend(str(RECIPE_DIR))
    from multi30k_results import convergence

    def curve(*bleus: float) -> list:
        return [[250 * (k + 1), bleu] for k, bleu in enumerate(bleus)]

    rising = {"name": "text-only", "second_source": None, "valid_bleu": curve(10, 20, 25, 27, 28, 29.0, 30.0, 31.0)}
    flat = {**rising, "valid_bleu": curve(10, 20, 25, 30, 32, 33.0, 33.2, 33.1)}
    assert convergence([rising]) == ("Text-only greedy validation BLEU: best 29.00 up to update 1600, "
                                     "best 31.00 in updates 1601–2000 (+2.00): still rising (gain of 0.5 or more).")
    assert convergence([flat]) == ("Text-only greedy validation BLEU: best 33.00 up to update 1600, "
                                   "best 33.20 in updates 1601–2000 (+0.20): plateaued (gain under 0.5).")
    assert convergence([{**flat, "valid_bleu": curve(10)}]).startswith("Plateau not judged")
    assert convergence([{**flat, "name": "serial-fr", "second_source": "fr"}]).startswith("Plateau not judged")
