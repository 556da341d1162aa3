"""The Multi30k embedding recipe (examples/embedding/multi30k_embedding.py) end to end on a
200-sentence fixture in Multi30k's layout, written from the generated multilingual corpus."""
import importlib.util
import json
import os
from pathlib import Path

import pytest

from fairseq_ctx.embedding.demo.multilingual_corpus import MultilingualSizes, write_multilingual_corpus

RECIPE = Path(__file__).resolve().parents[1] / "examples" / "embedding" / "multi30k_embedding.py"
# Generated languages standing in for Multi30k's: the pivots pa, pb play en, de.
AS_MULTI30K = {"en": "pa", "de": "pb", "fr": "xa", "cs": "xb"}
SLICES = {"train": ("train", 200), "valid": ("val", 30), "test": ("test_2016_flickr", 40)}
MODELS = ["tmde", "ct_mde", "tmde_f", "tmde_p", "laser"]


def load_recipe():
    spec = importlib.util.spec_from_file_location("multi30k_embedding", RECIPE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


@pytest.fixture(scope="module")
def recipe_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("multi30k")
    data = write_fixture(root)
    recipe = load_recipe()
    argv = ["--data", str(data), "--work", str(root / "work"), "--out-dir", str(root / "results"), "--size", "tiny",
            "--updates", "4", "--bpe-vocab", "120"]
    report = recipe.main(argv)
    return recipe, root, argv, report


def test_results_have_one_row_per_model_and_pair(recipe_run):
    recipe, root, _, report = recipe_run
    results = root / "results"
    assert (results / "multi30k_embedding.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads((results / "multi30k_embedding.json").read_text())
    assert saved["rows"] == report["rows"]
    assert list(saved["models"]) == MODELS
    assert len(saved["rows"]) == len(MODELS) * 6 * 2  # 6 language pairs, both directions
    for name in MODELS:
        mine = [r for r in saved["rows"] if r["model"] == name]
        assert [(r["src"], r["tgt"]) for r in mine[:2]] == [("fr", "cs"), ("cs", "fr")]  # the unseen pair first
        assert {(r["src"], r["tgt"]) for r in mine} == {(a, b) for a in "en de fr cs".split()
                                                        for b in "en de fr cs".split() if a != b}
        for row in mine:
            assert row["total"] == 40 and 0 <= row["errors"] <= 40
            assert row["error_percent"] == pytest.approx(100 * row["errors"] / 40)
            assert row["error_type"] == "text"
            assert row["seen_in_training"] == ({row["src"], row["tgt"]} != {"fr", "cs"})
        summary = saved["summary"][name]
        assert summary["mean_error_percent"] == pytest.approx(sum(r["error_percent"] for r in mine) / 12)
        assert summary["unseen_pair_error_percent"] == pytest.approx((mine[0]["error_percent"]
                                                                      + mine[1]["error_percent"]) / 2)
        run = saved["models"][name]
        assert run["updates"] == 4 and run["wall_time_s"] > 0 and run["cpu_time_s"] > 0
    summary = saved["summary"]
    for key, held in (("mean_error_percent", "held"), ("unseen_pair_error_percent", "held_on_unseen_pair")):
        assert [c[held] for c in saved["expected"]] == [summary["ct_mde"][key] < summary["tmde"][key],
                                                         summary["tmde"][key] < summary["tmde_f"][key]]
    assert saved["machine"]["cpu_cores"] == os.cpu_count() and saved["machine"]["gpu"] == "none"
    assert saved["wall_time_s"]["total"] == pytest.approx(
        saved["wall_time_s"]["prepare"] + saved["wall_time_s"]["train"] + saved["wall_time_s"]["evaluate"])
    markdown = (results / "multi30k_embedding.md").read_text()
    assert sum(line.startswith("| T-MDE_P (pyramid queries) | ") for line in markdown.splitlines()) == 1 + 6
    assert "--size tiny --updates 4" in markdown and "GPU: none" in markdown


def test_the_checkpoints_were_trained_with_the_recipe_settings(recipe_run):
    import torch

    _, root, _, _ = recipe_run
    state = torch.load(root / "work" / "checkpoints" / "ct_mde" / "checkpoint_last.pt", weights_only=True)
    cfg = state["cfg"]
    assert cfg["task"]["lang_pairs"] == "fr-en,fr-de,cs-en,cs-de,en-de,de-en"
    assert cfg["criterion"]["_name"] == "distance_constraint"
    assert state["optimizer_history"][-1]["num_updates"] == 4


def test_a_rerun_skips_finished_models(recipe_run, capsys):
    recipe, root, argv, report = recipe_run
    checkpoint = root / "work" / "checkpoints" / "tmde" / "checkpoint_last.pt"
    before = checkpoint.stat().st_mtime_ns
    again = recipe.main(argv[:-4] + ["--models", "tmde", "--updates", "4", "--bpe-vocab", "120"])
    assert "tmde: finished earlier" in capsys.readouterr().out
    assert checkpoint.stat().st_mtime_ns == before
    assert again["rows"] == report["rows"]  # same checkpoints, same retrievals
    assert again["models"]["tmde"]["wall_time_s"] == report["models"]["tmde"]["wall_time_s"]


def test_a_rerun_with_other_settings_is_refused(recipe_run):
    recipe, root, argv, _ = recipe_run
    with pytest.raises(SystemExit, match=r"tmde in .* was trained with other settings .*use another --work"):
        recipe.main(argv[:-4] + ["--models", "tmde", "--updates", "5", "--bpe-vocab", "120"])
    with pytest.raises(SystemExit, match=r"was prepared with .*'bpe_vocab': 120.*use another --work"):
        recipe.main(argv[:-4] + ["--models", "tmde", "--updates", "4", "--bpe-vocab", "100"])


def test_bad_data_stops_before_any_work(tmp_path):
    recipe = load_recipe()
    data = write_fixture(tmp_path)
    work = tmp_path / "work"
    (data / "val.lc.norm.tok.cs").write_text("one line\n")
    with pytest.raises(SystemExit, match=r"val is not aligned: .*val.lc.norm.tok.cs has 1 lines"):
        recipe.main(["--data", str(data), "--work", str(work), "--size", "tiny"])
    (data / "train.lc.norm.tok.fr").unlink()
    with pytest.raises(SystemExit, match=r"files missing in --data .*: train.lc.norm.tok.fr; give the data/task1/tok"):
        recipe.main(["--data", str(data), "--work", str(work), "--size", "tiny"])
    assert not work.exists()


@pytest.mark.parametrize("size", ["small", "thesis"])
def test_every_model_of_every_size_parses_as_fairseq_train_arguments(recipe_run, size):
    from fairseq import options

    recipe, root, _, _ = recipe_run
    for name in MODELS:
        args = recipe.train_args(name, str(root / "work" / "data-bin"), str(root / "unused"), size, 2400, 1)
        parsed = options.parse_args_and_arch(options.get_training_parser(), input_args=args)
        assert parsed.max_update == 2400 and parsed.lang_pairs == "fr-en,fr-de,cs-en,cs-de,en-de,de-en"
        assert parsed.encoder_embed_dim == {"small": 128, "thesis": 320 if name == "laser" else 1024}[size]
    assert parsed.encoder_layers == {"small": 1, "thesis": 5}[size]  # the LASER BiLSTM, last in MODELS
