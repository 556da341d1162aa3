"""Contrastive test sets in their published layouts (ContraPro, DiscEvalMT, SCAT, Voita et al.
2019), each written here as a small fixture: what the importers read, the scoring rule and its
breakdowns, the console script, and the errors for malformed sets."""
import json
from pathlib import Path
from typing import Dict, List

import pytest

from tests.helpers import run_tool

from fairseq_ctx.cli.contrastive import main as contrastive_tool
from fairseq_ctx.context import hub
from fairseq_ctx.context.contrastive.contrapro import read_contrapro
from fairseq_ctx.context.contrastive.discevalmt import read_discevalmt
from fairseq_ctx.context.contrastive.evaluation import evaluate, format_report, summarize
from fairseq_ctx.context.contrastive.example import ContrastiveInputError
from fairseq_ctx.context.contrastive.formats import read_set
from fairseq_ctx.context.contrastive.scat import read_scat
from fairseq_ctx.context.contrastive.voita import read_voita


def write(path: Path, lines: List[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def write_json(path: Path, value) -> str:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False), encoding="utf-8")
    return str(path)


# --- DiscEvalMT: balanced anaphora blocks -------------------------------------------------------

# (source noun, target noun phrase, gender) and the current sentence "it ..." with its target rest
NOUN = {"dog": ("der hund", "m", "er"), "cat": ("die katze", "f", "sie"), "house": ("das haus", "n", "es")}
PAIRS = [("dog", "cat", "it waits here .", "wartet hier ."), ("cat", "house", "it moves again .", "bewegt wieder ."),
         ("house", "dog", "it stands there .", "steht dort .")]


def anaphora_blocks() -> Dict[str, Dict]:
    """Per noun pair (a, b) two blocks in anaphora.json's layout, as in Bawden et al.'s set: the
    block whose previous sentence names ``a`` has the pair (a's pronoun correct, b's incorrect)
    and a semi-correct pair whose previous translation names ``b`` (b's pronoun right there); the
    second block swaps a and b. Every current translation is correct in one pair and incorrect
    in another."""
    blocks = {}
    for a, b, current, rest in PAIRS:
        for first, second in ((a, b), (b, a)):
            (np1, g1, p1), (np2, g2, p2) = NOUN[first], NOUN[second]
            previous1, previous2 = f"{np1} schlaeft .", f"{np2} schlaeft ."
            blocks[str(len(blocks) + 1)] = {
                "inspired by": ["a b", "c d"],
                "src": [f"the {first} sleeps .", current],
                "trg": [
                    {"correct": [previous1, f"{p1} {rest}"], "incorrect": [previous1, f"{p2} {rest}"],
                     "type": f"{g1}.sg"},
                    {"semi-correct": [previous2, f"{p2} {rest}"], "incorrect": [previous2, f"{p1} {rest}"],
                     "type": f"{g2}.sg"},
                ],
            }
    return blocks


def test_discevalmt_reader_pairs_blocks_and_target_context(tmp_path):
    examples = read_discevalmt(write_json(tmp_path / "anaphora.json", anaphora_blocks()))
    assert len(examples) == 12
    first, second = examples[0], examples[1]
    assert (first.source, first.source_context) == ("it waits here .", ["the dog sleeps ."])
    assert (first.correct.target, first.correct.target_context) == ("er wartet hier .", ["der hund schlaeft ."])
    assert [c.target for c in first.contrastive] == ["sie wartet hier ."]
    assert first.labels == {"phenomenon": "anaphora", "type": "m.sg", "reference": "correct"}
    assert (second.correct.target, second.correct.target_context) == ("sie wartet hier .", ["die katze schlaeft ."])
    assert second.labels["reference"] == "semi-correct" and first.group == second.group == "anaphora:1"
    assert examples[2].group == "anaphora:2"


def test_discevalmt_lexical_choice_blocks(tmp_path):
    blocks = {"2": {"inspired by": ["x", "y"], "type": "disambig", "examples": [
        {"src": ["the man sees the dog .", "it sleeps ."],
         "trg": {"correct": ["der mann sieht den hund .", "er schlaeft ."],
                 "incorrect": ["der mann sieht den hund .", "es schlaeft ."]}}]},
              "1": {"inspired by": ["x", "y"], "type": "repet", "examples": [
                  {"src": ["", "then we sang ."], "trg": {"correct": ["", "dann sangen wir ."],
                                                          "incorrect": ["", "dann lachten wir ."]}}]}}
    examples = read_discevalmt(write_json(tmp_path / "lexical-choice.json", blocks))
    assert [e.labels for e in examples] == [{"phenomenon": "lexical choice", "type": "repet"},
                                            {"phenomenon": "lexical choice", "type": "disambig"}]
    assert examples[0].source_context == [] and examples[0].correct.target_context == []
    assert examples[1].origin.endswith("lexical-choice.json: block 2, example 1")


@pytest.fixture(scope="module")
def sentence_level(trained_baselines):
    return hub.load(str(trained_baselines["transformer"][0] / "checkpoint_last.pt"))


def test_context_free_model_scores_exactly_half_on_balanced_discevalmt(trained_baselines, tiny_data, sentence_level,
                                                                        tmp_path):
    """The held-out check's exact command; the per-type numbers follow from which pronoun the
    sentence-level model prefers for each current sentence, scored here on its own."""
    anaphora = write_json(tmp_path / "anaphora.json", anaphora_blocks())
    run_tool(["fairseq-ctx-contrastive", str(trained_baselines["transformer"][0]), "--checkpoint-file",
              "checkpoint_last.pt", "--data", str(tiny_data), "--format", "discevalmt", "--input", anaphora,
              "--json", str(tmp_path / "result.json"), "--cpu"])
    result = json.loads((tmp_path / "result.json").read_text())
    assert (result["accuracy"], result["correct"], result["total"]) == (0.5, 6, 12)
    assert result["groups"] == {"total": 6, "all_correct": 0}
    assert {k: (v["correct"], v["total"]) for k, v in result["breakdowns"]["reference"].items()} == \
        {"correct": (3, 6), "semi-correct": (3, 6)}
    expected: Dict[str, List[bool]] = {"m.sg": [], "f.sg": [], "n.sg": []}
    for a, b, current, rest in PAIRS:
        targets = [f"{NOUN[n][2]} {rest}" for n in (a, b)]
        source = sentence_level.encode_source(current)
        scores = [float(s.double().sum()) for s in sentence_level.score_examples(
            [hub.Example(source, [], sentence_level.encode_target(t)) for t in targets])]
        prefers_a = scores[0] > scores[1]
        expected[f"{NOUN[a][1]}.sg"] += [prefers_a, prefers_a]  # a correct: its block's first pair, b's block's second
        expected[f"{NOUN[b][1]}.sg"] += [not prefers_a, not prefers_a]
    assert {k: (v["correct"], v["total"]) for k, v in result["breakdowns"]["type"].items()} == \
        {k: (sum(v), len(v)) for k, v in expected.items()}


def test_source_context_reaches_the_model(trained_baselines, sentence_level, tmp_path):
    """Blocks 1 and 2 score the same two candidates after different previous source sentences:
    the same scores without context, different ones with the context-aware DAT."""
    examples = read_discevalmt(write_json(tmp_path / "anaphora.json", anaphora_blocks()))[:3]
    plain = evaluate(sentence_level, examples, batch_size=2)["examples"]
    assert plain[0]["scores"] == plain[2]["scores"][::-1]
    dat = hub.load(str(trained_baselines["dat"][0] / "checkpoint_last.pt"))
    aware = evaluate(dat, examples)["examples"]
    assert aware[0]["scores"] != aware[2]["scores"][::-1]


# --- ContraPro -----------------------------------------------------------------------------------

DOCUMENT = [("the cat sleeps .", "die katze schlaeft ."), ("it is quiet .", "sie ist leise ."),
            ("then we sang .", "dann sangen wir ."), ("it moves again .", "sie bewegt wieder .")]


def contrapro_entry(segment: int, ref: str, wrong: List[str], distance: int) -> Dict:
    src, tgt = DOCUMENT[segment - 1]
    return {"ante distance": distance, "corpus": "OpenSubtitles", "document id": "2009/1/1.xml.gz.de",
            "errors": [{"contrastive": tgt.replace(ref, w, 1), "replacement": w} for w in wrong],
            "intrasegmental": False, "ref ante phrase": "die katze", "ref pronoun": ref, "ref segment": tgt,
            "segment id": segment, "src ante phrase": "the cat", "src pronoun": "it", "src segment": src}


def write_contrapro(directory: Path, context: int = 2) -> str:
    """contrapro.json and what json2text_and_context.pl --context N writes from it."""
    entries = [contrapro_entry(2, "sie", ["er", "es"], 1), contrapro_entry(4, "sie", ["es"], 3)]
    text = {"en": [], "de": []}
    ctx = {"en": [], "de": []}
    for entry in entries:
        line = entry["segment id"]
        targets = [DOCUMENT[line - 1][1], *(e["contrastive"] for e in entry["errors"])]
        for target in targets:
            text["en"].append(DOCUMENT[line - 1][0])
            text["de"].append(target)
            for back in range(context, 0, -1):  # farthest first; an empty line before the document
                ctx["en"].append(DOCUMENT[line - back - 1][0] if line - back >= 1 else "")
                ctx["de"].append(DOCUMENT[line - back - 1][1] if line - back >= 1 else "")
    for lang in ("en", "de"):
        write(directory / f"contrapro.text.{lang}", text[lang])
        write(directory / f"contrapro.context.{lang}", ctx[lang])
    return write_json(directory / "contrapro.json", entries)


def test_contrapro_reader_groups_candidates_and_orders_context(tmp_path):
    examples = read_contrapro(write_contrapro(tmp_path))
    assert len(examples) == 2
    first, second = examples
    assert (first.source, first.source_context) == ("it is quiet .", ["the cat sleeps ."])
    assert first.correct.target == "sie ist leise ." and first.correct.target_context == ["die katze schlaeft ."]
    assert [c.target for c in first.contrastive] == ["er ist leise .", "es ist leise ."]
    assert second.source_context == ["then we sang .", "it is quiet ."]
    assert second.contrastive[0].target_context == ["dann sangen wir .", "sie ist leise ."]
    assert first.labels == {"category": "it:sie", "ante distance": "1", "intrasegmental": "false"}
    assert second.labels["ante distance"] == "3"


def test_breakdowns_count_each_example_once_per_label_and_ties_are_errors(tmp_path):
    examples = read_contrapro(write_contrapro(tmp_path))
    examples[1].labels["ante distance"] = ">3"
    result = summarize(examples, [[-1.0, -2.0, -3.0], [-2.0, -2.0]])
    assert (result["accuracy"], result["correct"], result["total"], result["ties"]) == (0.5, 1, 2, 1)
    assert result["breakdowns"]["ante distance"] == {
        "1": {"accuracy": 1.0, "correct": 1, "total": 1}, ">3": {"accuracy": 0.0, "correct": 0, "total": 1}}
    assert result["breakdowns"]["category"] == {"it:sie": {"accuracy": 0.5, "correct": 1, "total": 2}}
    assert "groups" not in result and [e["correct"] for e in result["examples"]] == [True, False]
    table = format_report(result)
    assert "contrastive accuracy = 0.5000 (1/2)" in table and "ties (counted as errors): 1" in table
    assert any(line.split()[-3:] == ["0.0000", "0", "1"] for line in table.splitlines() if ">3" in line)


# --- SCAT ------------------------------------------------------------------------------------------

def write_scat(directory: Path) -> str:
    prefix = directory / "highlighted.test"
    write(Path(f"{prefix}.en"), ["Have <p>they</p> been practising?", "I think <p>it</p> is here.",
                                 "Nothing to see.", "So <p>it</p> is."])
    write(Path(f"{prefix}.fr"), ["<p>Elles</p> se sont entraînées ?",
                                 "Je pense qu'<p>il</p> est là, le  <hon>livre<hoff> .",
                                 "Rien à voir.", "<p>ILS</p> et <p>ils</p> le sont."])
    write(Path(f"{prefix}.context.en"), ["Focus on the other women.", "", "Go.", "The men."])
    write(Path(f"{prefix}.context.fr"), ["Concentre-toi sur les autres  <hon>femmes<hoff> .", "", "Va.",
                                         "Les <hon>hommes<hoff>."])
    return str(prefix)


def test_scat_reader_flips_the_marked_pronoun_and_strips_markers(tmp_path):
    examples, skipped = read_scat(write_scat(tmp_path))
    assert skipped == [f"{tmp_path}/highlighted.test.fr:3"]
    assert [(e.correct.target, e.contrastive[0].target) for e in examples] == [
        ("Elles se sont entraînées ?", "Ils se sont entraînées ?"),
        ("Je pense qu'il est là, le livre .", "Je pense qu'elle est là, le livre ."),
        ("ILS et ils le sont.", "ELLES et elles le sont.")]
    assert examples[0].source == "Have they been practising?"
    assert examples[0].source_context == ["Focus on the other women."]
    assert examples[0].correct.target_context == examples[0].contrastive[0].target_context == \
        ["Concentre-toi sur les autres femmes ."]
    assert examples[1].source_context == [] and examples[1].correct.target_context == []
    assert [e.labels for e in examples] == [{"pronoun": "elles", "support": "context"},
                                            {"pronoun": "il", "support": "current"},
                                            {"pronoun": "ils", "support": "context"}]
    assert examples[2].origin == f"{tmp_path}/highlighted.test.fr:4"


# --- Voita et al. (2019) ---------------------------------------------------------------------------

VOITA_GROUPS = [
    {"src": "the cat sleeps . _eos then we sang . _eos yesterday we laughed . _eos it is quiet .",
     "dst": ["die katze schlaeft . _eos dann sangen wir . _eos gestern lachten wir . _eos er ist leise .",
             "die katze schlaeft . _eos dann sangen wir . _eos gestern lachten wir . _eos sie ist leise ."],
     "true_ind": 1, "ctx_dist": 3},
    {"src": "a . _eos b . _eos the dog waits . _eos it waits here .",
     "dst": ["a . _eos b . _eos der hund wartet . _eos er wartet hier .",
             "a . _eos b . _eos den hund wartet . _eos es wartet hier .",
             "a . _eos b . _eos dem hund wartet . _eos sie wartet hier ."],
     "true_ind": 0, "ctx_dist": 1},
]


def write_voita(directory: Path) -> str:
    (directory / "scoring_data").mkdir()
    write(directory / "scoring_data" / "deixis_test.src", [g["src"] for g in VOITA_GROUPS for _ in g["dst"]])
    write(directory / "scoring_data" / "deixis_test.dst", [d for g in VOITA_GROUPS for d in g["dst"]])
    return write_json(directory / "deixis_test.json", VOITA_GROUPS)


def test_voita_reader_from_json_and_from_scoring_data(tmp_path):
    path = write_voita(tmp_path)
    examples = read_voita(path)
    first, second = examples
    assert (first.source, first.source_context) == ("it is quiet .", ["yesterday we laughed .", "then we sang .",
                                                                     "the cat sleeps ."])
    assert first.correct.target == "sie ist leise ." and [c.target for c in first.contrastive] == ["er ist leise ."]
    assert first.correct.target_context[2] == "die katze schlaeft ."
    assert [c.target_context[0] for c in second.contrastive] == ["den hund wartet .", "dem hund wartet ."]
    assert first.labels == {"phenomenon": "deixis", "distance": "3"} and second.labels["distance"] == "1"
    from_files = read_voita(path, text_dir=str(tmp_path / "scoring_data"))
    assert [(e.source, e.source_context, e.correct, e.contrastive, e.labels) for e in from_files] == \
        [(e.source, e.source_context, e.correct, e.contrastive, e.labels) for e in examples]
    assert from_files[1].origin == f"{tmp_path}/scoring_data/deixis_test.src:3"


# --- Malformed sets: the file and the line or entry ------------------------------------------------

def test_contrapro_text_files_that_do_not_follow_the_json(tmp_path):
    path = write_contrapro(tmp_path)
    lines = (tmp_path / "contrapro.text.en").read_text().splitlines()
    write(tmp_path / "contrapro.text.en", lines[:-1])
    with pytest.raises(ContrastiveInputError, match=r"contrapro\.text\.en: 4 lines, .*contrapro\.text\.de: 5 lines"):
        read_contrapro(path)
    write(tmp_path / "contrapro.text.de", (tmp_path / "contrapro.text.de").read_text().splitlines()[:-1])
    with pytest.raises(ContrastiveInputError, match=r"contrapro\.text\.en has 4 lines but .*contrapro\.json needs 5"):
        read_contrapro(path)
    write(tmp_path / "contrapro.text.en", [lines[0], lines[0], "it moves again .", *lines[3:]])
    write(tmp_path / "contrapro.text.de", ["x"] * 5)
    with pytest.raises(ContrastiveInputError, match=r"contrapro\.text\.en:3: the source differs from line 1"):
        read_contrapro(path)


def test_contrapro_malformed_entry_and_context_files(tmp_path):
    path = write_contrapro(tmp_path)
    entries = json.loads(Path(path).read_text())
    entries[1]["errors"] = []
    write_json(tmp_path / "contrapro.json", entries)
    with pytest.raises(ContrastiveInputError, match=r"contrapro\.json: entry 2 \(document id 2009/1/1\.xml\.gz\.de, "
                                                    r"segment id 4\): 'errors' must be a non-empty list"):
        read_contrapro(path)
    path = write_contrapro(tmp_path)
    (tmp_path / "contrapro.context.de").unlink()
    with pytest.raises(ContrastiveInputError, match=r"missing .*contrapro\.context\.de; write them with ContraPro's "
                                                    r"conversion_scripts/json2text_and_context\.pl"):
        read_contrapro(path)
    write(tmp_path / "contrapro.context.en", ["a"] * 7)
    write(tmp_path / "contrapro.context.de", ["a"] * 7)
    with pytest.raises(ContrastiveInputError, match=r"contrapro\.context\.en has 7 lines, not a multiple of the 5"):
        read_contrapro(path)


def test_discevalmt_malformed_blocks_name_the_block(tmp_path):
    path = tmp_path / "anaphora.json"
    path.write_text('{\n  "1": {\n    "src": ["a", "b"],,\n  }\n}\n')
    with pytest.raises(ContrastiveInputError, match=r"anaphora\.json:3:23: not valid JSON"):
        read_discevalmt(str(path))
    blocks = anaphora_blocks()
    del blocks["2"]["trg"][1]["semi-correct"]
    write_json(path, blocks)
    with pytest.raises(ContrastiveInputError, match=r"anaphora\.json: block 2, trg 2: needs 'incorrect', 'type' and "
                                                    r"exactly one of 'correct' or 'semi-correct'"):
        read_discevalmt(str(path))
    blocks = anaphora_blocks()
    blocks["3"]["src"] = "it waits here ."
    write_json(path, blocks)
    with pytest.raises(ContrastiveInputError, match=r"block 3: 'src' must be \[previous sentence, current sentence\]"):
        read_discevalmt(str(path))


def test_scat_malformed_lines_name_the_line(tmp_path):
    prefix = write_scat(tmp_path)
    write(Path(f"{prefix}.context.fr"), ["x"] * 3)
    with pytest.raises(ContrastiveInputError, match=r"highlighted\.test\.context\.fr: 3 lines"):
        read_scat(prefix)
    write(Path(f"{prefix}.context.fr"), ["x"] * 4)
    write(Path(f"{prefix}.fr"), ["<p>Elles</p> a.", "<p>le</p> b.", "c.", "d."])
    with pytest.raises(ContrastiveInputError, match=r"highlighted\.test\.fr:2: the marked pronoun 'le' is not il"):
        read_scat(prefix)
    write(Path(f"{prefix}.fr"), ["<p>Elles</p> a.", "<p>il b.", "c.", "d."])
    with pytest.raises(ContrastiveInputError, match=r"highlighted\.test\.fr:2: unbalanced <p>"):
        read_scat(prefix)


def test_voita_malformed_groups_name_the_group(tmp_path):
    path = write_voita(tmp_path)
    groups = json.loads(Path(path).read_text())
    groups[1]["true_ind"] = 5
    write_json(Path(path), groups)
    with pytest.raises(ContrastiveInputError, match=r"deixis_test\.json: group 2: 'true_ind' must index one of its 3 "
                                                    r"candidates, got 5"):
        read_voita(path)
    groups[1]["true_ind"] = 0
    write_json(Path(path), groups)
    write(tmp_path / "scoring_data" / "deixis_test.src", [g["src"] for g in VOITA_GROUPS for _ in range(2)])
    write(tmp_path / "scoring_data" / "deixis_test.dst", ["x"] * 4)
    with pytest.raises(ContrastiveInputError, match=r"deixis_test\.src has 4 lines but .*deixis_test\.json has 5 "
                                                    r"candidates in 2 groups"):
        read_voita(path, text_dir=str(tmp_path / "scoring_data"))


def test_options_of_another_format_are_refused(tmp_path):
    with pytest.raises(ContrastiveInputError, match="--text-dir is not used by --format discevalmt"):
        read_set("discevalmt", ["anaphora.json"], text_dir="x")
    with pytest.raises(ContrastiveInputError, match="are for --format plain; --format scat reads --input"):
        read_set("scat", ["p"], source="src.en")
    with pytest.raises(ContrastiveInputError, match="--format voita needs --input"):
        read_set("voita")


def test_console_script_reports_a_malformed_set_before_loading_the_model(tmp_path, capsys):
    blocks = anaphora_blocks()
    del blocks["1"]["trg"][0]["incorrect"]
    path = write_json(tmp_path / "anaphora.json", blocks)
    result = run_tool(["fairseq-ctx-contrastive", "unused.pt", "--format", "discevalmt", "--input", path], check=False)
    assert result.returncode != 0 and "anaphora.json: block 1, trg 1: needs 'incorrect'" in result.stderr
    with pytest.raises(SystemExit) as stop:
        contrastive_tool(["unused.pt", "--format", "discevalmt", "--input", path, "--json", path])
    assert stop.value.code == 2
    assert f"--json {path} is one of the inputs: the same file as --input {path}" in capsys.readouterr().err
    assert json.loads(Path(path).read_text()) == blocks
