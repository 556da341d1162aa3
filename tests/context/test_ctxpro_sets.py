"""fairseq-ctx-generative --format ctxpro on a set in ctxpro's released layout (SET.json and the
<eos>-joined SET.input): each example's sentence is translated with its preceding sentences as
context, as the document translator translates it, and the counts per rule and overall are the
upstream ``ctxpro score`` counts on the same translations; with a context model whose context enters
the encoder (dat) and one whose cached context enters the decoder (caching_tokens)."""
import json
import re

import pytest

from tests.helpers import run_tool
from fairseq_ctx.context import hub

pytest.importorskip("ctxpro")

DOCUMENTS = [["the old cat sleeps .", "it is quiet .", "then we sang ."], ["the dog waits here .", "it moves again ."],
             ["it is quiet ."], ["the dog waits here .", "then we sang .", "it moves again ."]]


@pytest.fixture(scope="module", params=["dat", "caching_tokens"])
def arch(request):
    return request.param


@pytest.fixture(scope="module")
def model(trained_baselines, arch):
    return hub.load(str(trained_baselines[arch][0] / "checkpoint_last.pt"), beam=2)


def write_set(tmp_path, model):
    """A set whose first examples expect a word of the model's translation (correct) and the others
    a word it does not write (wrong), in two rules."""
    translations = [model.translate_document(document)[-1] for document in DOCUMENTS]
    entries = []
    for number, (document, translation) in enumerate(zip(DOCUMENTS, translations)):
        words = translation.replace(".", " ").split()
        expected = words[0] if number % 2 == 0 and words else "nichtda"
        entries.append({"rule": "A.RULE" if number < 2 else "B.RULE", "expected": expected,
                        "ante distance": len(document) - 1, "src segment": document[-1]})
    (tmp_path / "set.json").write_text(json.dumps(entries), encoding="utf-8")
    (tmp_path / "set.input").write_text("".join("<eos> ".join(document) + "\n" for document in DOCUMENTS),
                                        encoding="utf-8")
    return translations


def test_generative_counts_are_ctxpros_on_the_same_translations(trained_baselines, arch, model, tmp_path):
    translations = write_set(tmp_path, model)
    out, scores = tmp_path / "hyp.de", tmp_path / "scores.json"
    run_tool(["fairseq-ctx-generative", str(trained_baselines[arch][0]), "--checkpoint-file", "checkpoint_last.pt",
              "--format", "ctxpro", "--input", str(tmp_path / "set.json"), "--lang", "de", "--beam", "2", "--cpu",
              "--output", str(out), "--json", str(scores)])
    assert out.read_text(encoding="utf-8").splitlines() == translations  # each sentence with its preceding ones
    result = json.loads(scores.read_text(encoding="utf-8"))
    upstream = run_tool(["ctxpro", "score", "-t", str(out), "-e", str(tmp_path / "set.json"), "-l", "de", "--complete"])
    rows = [line.split("\t") for line in upstream.stdout.strip().splitlines()]
    counts = {row[0].split(" (")[0]: (int(row[1]), int(row[2])) for row in rows}
    assert counts.pop("total") == (result["correct"], result["total"])
    assert counts == {rule: (s["correct"], s["total"]) for rule, s in result["rules"].items()}
    assert result["correct"] >= 1 and result["total"] - result["correct"] >= 2
    assert result["ante_distance"]["0"]["total"] == 1 and sum(d["total"] for d in result["ante_distance"].values()) == 4


def test_a_ctxpro_input_of_another_length_is_refused_before_loading_a_model(tmp_path):
    (tmp_path / "set.json").write_text(json.dumps([{"rule": "R", "expected": "x"}] * 3))
    (tmp_path / "set.input").write_text("a<eos> b\n")
    result = run_tool(["fairseq-ctx-generative", str(tmp_path / "missing.pt"), "--input", str(tmp_path / "set.json"),
                       "--lang", "fr"], check=False)
    assert result.returncode != 0
    assert f"{tmp_path / 'set.input'} has 1 lines but {tmp_path / 'set.json'} has 3 examples" in result.stderr


@pytest.mark.parametrize("lines,message", [
    (["Before. <eos> Hi there.", "It is. <eos> Yes, I did."],
     "set.input:1: the sentence to translate is 'Hi there.', but example 1 of {json} is 'Yes, I did.': the input lines "
     "are in another order than the JSON"),
    (["Yes, I did.", "Hi there."],
     "set.input:1: example 1 of {json} has its antecedent 2 sentence(s) back, but the line carries 0 preceding "
     "sentence(s)"),
], ids=["swapped-lines", "context-missing"])
def test_a_ctxpro_input_line_that_is_not_the_jsons_example_is_refused(lines, message, tmp_path):
    """Swapped input lines were accepted (the JSON's source segment was never compared), and a line
    without the context its antecedent distance needs was scored without context (3/3 became 2/3)."""
    from fairseq_ctx.context.contrastive.example import ContrastiveInputError
    from fairseq_ctx.context.generative.ctxpro_sets import read_ctxpro_set

    entries = [{"rule": "DO.ELL", "expected": "vu", "ante distance": 2, "src segment": "Yes, I did."},
               {"rule": "DO.ELL", "expected": "dit", "ante distance": 0, "src segment": "Hi there."}]
    json_path, input_path = tmp_path / "set.json", tmp_path / "set.input"
    json_path.write_text(json.dumps(entries))
    input_path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ContrastiveInputError, match=re.escape(message.format(json=json_path))):
        read_ctxpro_set(str(json_path), str(input_path))
