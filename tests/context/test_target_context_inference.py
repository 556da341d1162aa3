"""Every inference path with target context (--target-context-size M > 0) reads the model's own
previous translations (the hub, fairseq-ctx-translate-doc, fairseq-interactive, fairseq-generate
on a binarized split) or the target context a test set supplies (contrastive scoring), with
tiny hmce, ctx_concat and focused_concat (Lupo et al., 2022: segment-shifted positions) models
trained on reference target context."""
import json
from pathlib import Path
from typing import Dict, List

import pytest
import torch
from fairseq.utils import strip_pad

from devtools.in_process_tools import call_tool
from tests.helpers import USER_DIR
from fairseq_ctx.context import hub
from fairseq_ctx.context.contrastive.discevalmt import read_discevalmt
from fairseq_ctx.context.contrastive.evaluation import evaluate
from fairseq_ctx.context.cxmi import cxmi
from fairseq_ctx.context.data.context_examples import Example
from fairseq_ctx.context.data.own_translations import MissingTargetContextError
from tests.context.test_inference_paths import train

SIZE = 1
HUB_SEARCH = ["--beam", "2"]  # the hub with beam 2: its length limit is fairseq's (max_len_a 0, max_len_b 200)


@pytest.fixture(scope="module", params=["hmce", "ctx_concat", "focused_concat"])
def checkpoint(request, tiny_data, tmp_path_factory) -> Path:
    save_dir = train(tiny_data, tmp_path_factory.mktemp(f"tc_{request.param}"),
                     ["--task", "context_translation", "--context-size", "1", "--target-context-size", str(SIZE),
                      "--arch", request.param], 50)  # enough updates for sentences, not just "."
    return save_dir / "checkpoint_last.pt"


@pytest.fixture(scope="module")
def translator(tiny_data, checkpoint):
    return hub.load(str(checkpoint), data=str(tiny_data), beam=2)


@pytest.fixture
def seen(translator, monkeypatch):
    """(src_tokens, target_context_tokens, target_context_index) of every encoder call."""
    calls = []
    encoder = translator.models[0].encoder
    original = encoder.forward

    def forward(*args, **kwargs):
        source = kwargs["src_tokens"] if "src_tokens" in kwargs else args[0]
        calls.append((source, kwargs.get("target_context_tokens"), kwargs.get("target_context_index")))
        return original(*args, **kwargs)

    monkeypatch.setattr(encoder, "forward", forward)
    return calls


@pytest.fixture(scope="module")
def documents(tiny_data) -> List[List[str]]:
    text = (tiny_data.parent / "raw" / "test.en").read_text(encoding="utf-8")
    return [block.splitlines() for block in text.strip("\n").split("\n\n")]


def one_sentence_at_a_time(translator, document: List[str]) -> List[str]:
    """The definition: each sentence alone in its batch, its target context the translations
    already produced for its document."""
    outputs: List[torch.Tensor] = []
    for position, line in enumerate(document):
        source = translator.encode_source(line)
        context = [translator.encode_source(s) for s in reversed(document[max(0, position - 1):position])]
        example = hub.Example(source, context, target_context=list(reversed(outputs[-SIZE:])))
        outputs.append(translator.translate_examples([example])[0])
    return [translator.decode(tokens) for tokens in outputs]


@pytest.fixture(scope="module")
def reference(translator, documents) -> List[List[str]]:
    return [one_sentence_at_a_time(translator, document) for document in documents]


def lines_of(documents: List[List[str]]) -> List[str]:
    return ["", *[line for document in documents for line in [*document, "", ""]]]


def test_hub_batches_documents_and_equals_one_sentence_at_a_time(translator, documents, reference, seen):
    lines = lines_of(documents)
    expected = ["", *[line for document in reference for line in [*document, "", ""]]]
    del seen[:]
    assert list(translator.translate_stream(lines, batch_size=3)) == expected
    assert max(src.size(0) for src, _, _ in seen) == 3  # sentence i of three documents per batch
    assert list(translator.translate_stream(lines, batch_size=1)) == expected
    assert [translator.translate_document(d, batch_size=2) for d in documents] == reference


def test_hub_feeds_each_sentence_its_own_previous_translation(translator, documents, seen):
    translations = translator.translate_document(documents[0])
    tgt = translator.tgt_dict
    received = []
    for _, tokens, index in seen:
        assert index.shape == (1, SIZE)
        row = int(index[0, 0])
        received.append(None if row < 0 else tgt.string(strip_pad(tokens[row][1:], tgt.pad())))
    assert (tokens[:, 0] == tgt.index("<boc>")).all()
    assert received == [None, *translations[:-1]]


def generate_in_batches(task, translator, batches: List[List[int]]) -> Dict[int, str]:
    dataset = task.datasets["test"]
    out = {}
    for ids in batches:
        sample = dataset.collater([dataset[i] for i in ids])
        for row, hypos in zip(sample["id"].tolist(), task.inference_step(translator.generator, translator.models, sample)):
            out[row] = translator.decode(hypos[0]["tokens"])
    return out


def test_binarized_split_reads_own_output_in_any_batch_composition(translator, reference):
    task = translator.task
    task.load_dataset("test")
    dataset = task.datasets["test"]
    expected = {number: line for number, line in enumerate(x for document in reference for x in document)}
    order = dataset.ordered_indices().tolist()
    assert generate_in_batches(task, translator, [order[i:i + 4] for i in range(0, len(order), 4)]) == expected
    assert not task.own_translations().hypotheses  # everything read was dropped
    whole = list(range(len(dataset)))[::-1]  # one batch: every sentence waits for its previous one
    assert generate_in_batches(task, translator, [whole]) == expected
    with pytest.raises(MissingTargetContextError, match=r"sentence 1 reads the translation of sentence 0 .*--num-shards"):
        generate_in_batches(task, translator, [[1], [0]])
    task.own_translations().discard(list(range(len(dataset))))


def test_fairseq_generate_uses_own_output(reference, tiny_data, checkpoint, tmp_path):
    call_tool("fairseq-generate", [
        str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation", "--context-size", "1",
        "--target-context-size", str(SIZE), "--path", str(checkpoint), "--gen-subset", "test", *HUB_SEARCH,
        "--batch-size", "5", "--required-batch-size-multiple", "1", "--results-path", str(tmp_path), "--cpu",
    ])
    hypotheses = {}
    for line in (tmp_path / "generate-test.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("H-"):
            number, _, text = line.split("\t")
            hypotheses[int(number[2:])] = text
    assert hypotheses == dict(enumerate(x for document in reference for x in document))


@pytest.mark.parametrize("buffer_size", [1, 3, 1000])
def test_fairseq_interactive_uses_own_output(buffer_size, documents, reference, tiny_data, checkpoint, tmp_path,
                                             capsys):
    path = tmp_path / "docs.en"
    path.write_text("\n".join(lines_of(documents)) + "\n", encoding="utf-8")
    capsys.readouterr()
    call_tool("fairseq-interactive", [
        str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation", "--context-size", "1",
        "--target-context-size", str(SIZE), "--path", str(checkpoint), *HUB_SEARCH,
        "--buffer-size", str(buffer_size), "--batch-size", str(min(buffer_size, 4)), "--input", str(path), "--cpu",
    ])
    hypotheses = {}
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("H-"):
            number, _, text = line.split("\t")
            hypotheses[int(number[2:])] = text
    assert [hypotheses[n] for n in sorted(hypotheses)] == [x for document in reference for x in document]


def test_contrastive_scoring_passes_each_candidates_previous_translation(translator, tmp_path, seen):
    blocks = {"1": {"src": ["it is small .", "it is small ."], "trg": [
        {"correct": ["er ist klein .", "er ist klein ."], "incorrect": ["sie ist klein .", "er ist klein ."],
         "type": "m.sg"},
        {"correct": ["sie ist klein .", "sie ist klein ."], "incorrect": ["er ist klein .", "sie ist klein ."],
         "type": "f.sg"}]}}
    path = tmp_path / "anaphora.json"
    path.write_text(json.dumps(blocks), encoding="utf-8")
    examples = read_discevalmt(str(path))
    result = evaluate(translator, examples, batch_size=8)
    tgt = translator.tgt_dict
    received = []
    for _, tokens, index in seen:
        for row in index[:, 0].tolist():
            received.append(tgt.string(strip_pad(tokens[row][1:], tgt.pad())))
    assert sorted(received) == sorted(["er ist klein .", "sie ist klein ."] * 2)
    scores = [example["scores"] for example in result["examples"]]
    assert scores[0][0] != scores[0][1]  # same target, different previous translations: the model reads them


def test_cxmi_reads_the_reference_target_context_and_masks_it(translator, documents, tiny_data):
    """CXMI (Fernandes et al. 2021) of a target-context model: log p(y | x, C) with C the previous
    source and *reference* target sentences, against log p(y | x) with both masked; the same
    numbers as scoring each sentence alone with that context given explicitly."""
    text = (tiny_data.parent / "raw" / "test.de").read_text(encoding="utf-8")
    references = [block.splitlines() for block in text.strip("\n").split("\n\n")]
    with_context, masked = [], []
    for sources, targets in zip(documents, references):
        for i, (source, target) in enumerate(zip(sources, targets)):
            x, y = translator.encode_source(source), translator.encode_target(target)
            context = [translator.encode_source(s) for s in reversed(sources[:i])]
            target_context = [translator.encode_target(t) for t in reversed(targets[:i])]
            with_context.append(Example(x, context, y, target_context))
            masked.append(Example(x, target=y))
    result = cxmi(translator, "test")
    rows = result["per_sentence"]
    assert len(rows) == len(with_context)
    expected_with = [float(scores.double().sum()) for scores in translator.score_examples(with_context)]
    expected_masked = [float(scores.double().sum()) for scores in translator.score_examples(masked)]
    assert [row[2] for row in rows] == pytest.approx(expected_with, abs=1e-3)
    assert [row[3] for row in rows] == pytest.approx(expected_masked, abs=1e-3)
    assert result["cxmi"] != 0.0


def decode_level_by_level(store, sample: Dict, decode) -> List:
    """What the task's inference step does with ``store`` (an OwnTranslations), ``decode`` standing
    in for the beam search of one level's batch."""
    hypotheses = [None] * sample["target_context_key"].numel()
    for rows in store.levels(sample):
        part = store.level_batch(sample, rows)
        level = decode(part)
        store.keep(part, level)
        for row, hypothesis in zip(rows, level):
            hypotheses[row] = hypothesis
    return hypotheses


def test_own_translations_give_every_sentence_its_previous_outputs_and_drain():
    """Three documents (5, 1 and 3 sentences), M = 2, decoded in every split of the document order
    into consecutive batches (rows shuffled): each sentence reads exactly the outputs of its
    previous two sentences, nearest first, and nothing is kept afterwards."""
    from fairseq_ctx.context.data.context_batch import context_sentence
    from fairseq_ctx.context.data.own_translations import OwnTranslations

    boc, eos, pad, size = 3, 2, 1, 2
    lengths = [5, 1, 3]
    keys, previous, users, positions = [], [], [], []
    for length in lengths:
        start = len(keys)
        for position in range(length):
            keys.append(start + position)
            previous.append([start + position - k for k in (1, 2) if position - k >= 0])
            users.append(min(size, length - position - 1))
            positions.append(position)
    order = sorted(keys, key=lambda k: (positions[k], k))
    generator = torch.Generator().manual_seed(0)
    for cuts in ([], [3], [1, 4, 6], list(range(1, len(order)))):
        store = OwnTranslations(lambda t: context_sentence(torch.tensor(t), boc, eos, 10), size, pad, True)
        received = {}

        def decode(sample):
            tokens, index = sample["net_input"]["target_context_tokens"], sample["net_input"]["target_context_index"]
            out = []
            for row, key in enumerate(sample["target_context_key"].tolist()):
                received[key] = [tokens[u][tokens[u].ne(pad)].tolist() for u in index[row].tolist() if u >= 0]
                out.append([{"tokens": torch.tensor([100 + key, eos])}])
            return out

        for batch in [order[a:b] for a, b in zip([0, *cuts], [*cuts, len(order)])]:
            batch = [batch[i] for i in torch.randperm(len(batch), generator=generator).tolist()]
            sample = {
                "id": torch.tensor(batch),
                "net_input": {"src_tokens": torch.tensor([[4 + k, eos] for k in batch]),
                              "src_lengths": torch.full((len(batch),), 2)},
                "target_context_key": torch.tensor(batch),
                "target_context_ids": torch.tensor([previous[k] + [-1] * (size - len(previous[k])) for k in batch]),
                "target_context_users": torch.tensor([users[k] for k in batch]),
            }
            hypos = decode_level_by_level(store, sample, decode)
            assert [h[0]["tokens"][0].item() for h in hypos] == [100 + k for k in batch]
        assert received == {k: [[boc, 100 + p, eos] for p in previous[k]] for k in keys}
        assert store.hypotheses == {} and store.users == {}


def test_interactive_keeps_previous_lines_across_buffers_and_forgets_ended_documents(tiny_data):
    """M = 2, documents across buffers of three lines: every line reads the outputs of its
    previous two lines of the document, and a document's outputs are dropped once it ended."""
    from fairseq import tasks

    from tests.helpers import parse_cfg
    from fairseq_ctx.context.interactive import InteractiveDocuments

    task = tasks.setup_task(parse_cfg(tiny_data, "hmce", ["--target-context-size", "2"]).task)
    documents = InteractiveDocuments(task.example_collater())
    lines = ["a", "b", "c", "d", "", "e", "f", "", "", "g", "h", "i", "j", ""]
    words = ["it is small .", "it is big .", "the dog falls .", "it moves ."]
    received = {}
    pad = task.tgt_dict.pad()

    def decode(sample):
        tokens, index = sample["net_input"]["target_context_tokens"], sample["net_input"]["target_context_index"]
        out = []
        for row, key in enumerate(sample["target_context_key"].tolist()):
            received[key] = [tokens[u][tokens[u].ne(pad)][1].item() for u in index[row].tolist() if u >= 0]
            out.append([{"tokens": torch.tensor([10 + key, task.tgt_dict.eos()])}])
        return out

    for start in range(0, len(lines), 3):
        buffer = lines[start:start + 3]
        tokens = [task.src_dict.encode_line(words[n % 4] if line else "", add_if_not_exist=False).long()
                  for n, line in enumerate(buffer)]
        documents.read_buffer(buffer, tokens)
        dataset = documents.build_dataset(tokens, [len(t) for t in tokens], None, task)
        for batch in dataset.batch_by_size(dataset.ordered_indices(), max_sentences=2):
            dataset.collater([dataset[i] for i in batch])  # kept by the document state, as fairseq-interactive's
            decode_level_by_level(documents.own_outputs, dataset.collated.popleft(), decode)
    # keys: a..d = 0..3, e, f = 4, 5, g..j = 6..9
    assert received == {0: [], 1: [10], 2: [11, 10], 3: [12, 11], 4: [], 5: [14],
                        6: [], 7: [16], 8: [17, 16], 9: [18, 17]}
    assert documents.own_outputs.hypotheses == {}
