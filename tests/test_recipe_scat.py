"""The SCAT En→Fr recipe (examples/context_mt/scat_en_fr.py) end to end on a 200-sentence slice
written here in the published layouts: SCAT's ``highlighted.*`` files with ``<p>`` and
``<hon>…<hoff>`` markers, Multi30k's raw ``*.{en,fr}.gz``."""
import gzip
import json
import random
import re
import sys
from pathlib import Path

import pytest
import torch

RECIPE_DIR = Path(__file__).resolve().parents[1] / "examples" / "context_mt"
NOUNS = [("table", "table", "elle"), ("car", "voiture", "elle"), ("book", "livre", "il"), ("tree", "arbre", "il"),
         ("house", "maison", "elle"), ("dog", "chien", "il")]
MODELS = ["sentence", "sentence_scat", "hmce", "hce", "ctx_concat", "dat", "han", "dct", "hmce_target"]


def write_scat(directory: Path, split: str, count: int, rng: random.Random) -> None:
    rows = {"context.en": [], "en": [], "context.fr": [], "fr": []}
    for number in range(count):
        en_noun, fr_noun, pronoun = rng.choice(NOUNS)
        article = "la" if pronoun == "elle" else "le"
        rows["context.en"].append(f"I saw the {en_noun}. It was near the river." if number % 7 else "")
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


@pytest.fixture(scope="module")
def recipe():
    sys.path.insert(0, str(RECIPE_DIR))
    import scat_en_fr

    yield scat_en_fr
    sys.path.remove(str(RECIPE_DIR))


def test_recipe_runs_every_model_and_resumes(recipe, tmp_path, caplog):
    rng = random.Random(1)
    scat, multi30k = tmp_path / "scat", tmp_path / "multi30k"
    scat.mkdir()
    multi30k.mkdir()
    write_scat(scat, "train", 120, rng)
    write_scat(scat, "valid", 20, rng)
    write_multi30k(multi30k, "train", 50, rng)
    write_multi30k(multi30k, "val", 10, rng)
    out = tmp_path / "results"
    argv = ["--scat-dir", str(scat), "--multi30k-dir", str(multi30k), "--work", str(tmp_path / "work"),
            "--out", str(out), "--sentence-updates", "2", "--context-updates", "1", "--embed-dim", "16",
            "--ffn-dim", "32", "--layers", "1", "--heads", "2", "--spm-vocab", "60", "--beam", "1",
            "--max-tokens", "2000", "--log-interval", "1", "--validate-every", "1"]
    with caplog.at_level("INFO", logger="fairseq_ctx.context.sentence_init"), \
            caplog.at_level("INFO", logger="fairseq.checkpoint_utils"):
        recipe.main(argv)

    # stage 2: every context model starts from the whole stage-1 transformer
    sentence_tensors = len(torch.load(tmp_path / "work/models/sentence/checkpoints/checkpoint_last.pt",
                                      weights_only=True)["model"])
    initialised = [re.search(r"loaded (\d+) tensors from sentence-level checkpoint", r.getMessage())
                   for r in caplog.records if "from sentence-level checkpoint" in r.getMessage()]
    assert [int(m.group(1)) for m in initialised] == [sentence_tensors] * 7

    result = json.loads((out / "scat_en_fr.json").read_text())
    assert [row["model"] for row in result["rows"]] == MODELS
    for row in result["rows"]:
        assert 0.0 <= row["contrastive_accuracy"] <= 1.0 and 0.0 <= row["bleu"] <= 100.0
        assert row["contrastive_total"] == 20 and row["updates"] == (2 if row["model"] == "sentence" else 1)
        assert [updates for updates, _ in row["valid_loss"]] == list(range(1, row["updates"] + 1))  # the curve
        assert row["sentences_per_update"] > 0
    assert [row["context_size"] for row in result["rows"]] == [0, 0, 1, 1, 1, 1, 1, 1, 1]
    assert [row["target_context_size"] for row in result["rows"]] == [0, 0, 0, 0, 0, 0, 0, 0, 1]
    # the no-context control continues from stage 1 (fairseq's --finetune-from-model) on the SCAT lines
    stage_one = tmp_path / "work/models/sentence/checkpoints/checkpoint_last.pt"
    assert any(f"loading pretrained model from {stage_one}" in r.getMessage() for r in caplog.records)
    table = [line for line in (out / "scat_en_fr.md").read_text().splitlines() if line.startswith("| ")]
    assert [line.split(" | ")[0][2:] for line in table[1:]] == MODELS
    assert "source + own target" in table[-1]
    assert "- hmce: 1: " in (out / "scat_en_fr.md").read_text()  # convergence lines
    assert (out / "scat_en_fr.png").stat().st_size > 0

    # SCAT sentences and their context lines became two-line documents with shared docids
    docids = (tmp_path / "work/data-bin/scat/valid.docids").read_text().split()
    assert len(docids) == 20 + 17 and len(set(docids)) == 20  # 3 of 20 examples have no context

    # Resume: finished models are skipped (their checkpoints are not rewritten)
    checkpoint = tmp_path / "work/models/hmce/checkpoints/checkpoint_last.pt"
    stamp = checkpoint.stat().st_mtime_ns
    recipe.main([*argv, "--models", "hmce"])
    assert checkpoint.stat().st_mtime_ns == stamp
    rerun = json.loads((out / "scat_en_fr.json").read_text())
    assert [row["model"] for row in rerun["rows"]] == ["sentence", "hmce"]
    assert rerun["rows"][1]["contrastive_accuracy"] == result["rows"][2]["contrastive_accuracy"]



def test_context_batch_size_gives_every_stage_two_model_the_same_sentences_per_update(recipe):
    tokens = recipe.parse_args(["--scat-dir", "s", "--multi30k-dir", "m"])
    sentences = recipe.parse_args(["--scat-dir", "s", "--multi30k-dir", "m", "--context-batch-size", "64"])
    assert {recipe.batch_args(name, tokens)[0] for name in ["sentence", *recipe.STAGE_TWO_MODELS]} == {"--max-tokens"}
    assert recipe.batch_args("sentence", sentences) == ["--max-tokens", "4096"]
    assert {tuple(recipe.batch_args(name, sentences)) for name in recipe.STAGE_TWO_MODELS} == {("--batch-size", "64")}

def test_recipe_names_missing_data_before_any_work(recipe, tmp_path):
    with pytest.raises(recipe.scat_data.RecipeInputError, match=r"highlighted\.train\.context\.en.*--scat-dir"):
        recipe.main(["--scat-dir", str(tmp_path), "--multi30k-dir", str(tmp_path), "--work", str(tmp_path / "w")])
    assert not (tmp_path / "w").exists()


def test_recipe_names_misaligned_scat_files_before_training(recipe, tmp_path):
    rng = random.Random(2)
    for split in ("train", "valid"):
        write_scat(tmp_path, split, 5, rng)
    for name in ("train", "val"):
        write_multi30k(tmp_path, name, 5, rng)
    french = tmp_path / "highlighted.train.fr"
    french.write_text("".join(french.read_text().splitlines(keepends=True)[:-1]))
    with pytest.raises(ValueError, match=r"SCAT train: the context and sentence files must have one line per example, "
                                         r"but .*highlighted\.train\.fr: 4 lines"):
        recipe.main(["--scat-dir", str(tmp_path), "--multi30k-dir", str(tmp_path), "--work", str(tmp_path / "w")])
    assert not (tmp_path / "w" / "models").exists()
