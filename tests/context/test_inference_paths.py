"""No fairseq entry point translates a context-aware model's input without its context:
fairseq-interactive keeps the running document context (same translations as
fairseq-ctx-translate-doc), every model class's from_pretrained answers with the right
interface, and the paths that cannot pass context raise."""
from collections import Counter
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from fairseq.models import MODEL_REGISTRY
from fairseq.utils import strip_pad

from devtools.in_process_tools import call_tool
from tests.helpers import TINY_MODEL, USER_DIR
from fairseq_ctx.context import hub
from fairseq_ctx.context.interactive import ContextUnavailableError, InteractiveDocuments
from fairseq_ctx.context.models.context_transformer import ContextTransformerModel
from fairseq_ctx.embedding.laser_bilstm import LaserModel
from fairseq_ctx.embedding.tmde import TransformerMDE
from fairseq_ctx.multisource.transformer import MultiSourceTransformer

CONTEXT_SIZE = 2


def train(data: Path, save_dir: Path, task_args: List[str], updates: int) -> Path:
    call_tool("fairseq-train", [
        str(data), "--user-dir", USER_DIR, *task_args, *TINY_MODEL, "--optimizer", "adam", "--lr", "5e-3",
        "--max-tokens", "2000", "--max-update", str(updates), "--criterion", "label_smoothed_cross_entropy",
        "--seed", "1", "--dropout", "0.0", "--save-dir", str(save_dir), "--no-epoch-checkpoints",
        "--log-format", "none", "--disable-validation", "--cpu", "--num-workers", "0",
    ])
    return save_dir


@pytest.fixture(scope="module")
def hmce_dir(tiny_data, tmp_path_factory) -> Path:
    return train(tiny_data, tmp_path_factory.mktemp("hmce"),
                 ["--task", "context_translation", "--context-size", str(CONTEXT_SIZE), "--arch", "hmce"], 30)


@pytest.fixture(scope="module")
def documents(tiny_data, tmp_path_factory) -> Path:
    """The test documents (blank line between documents) with a leading blank line, two blank
    lines in a row and a last document whose sentence also occurs elsewhere."""
    text = (tiny_data.parent / "raw" / "test.en").read_text(encoding="utf-8").rstrip("\n")
    path = tmp_path_factory.mktemp("docs") / "docs.en"
    path.write_text("\n" + text + "\n\n\nit is small .\nit is small .\n", encoding="utf-8")
    return path


def expected_contexts(lines: List[str]) -> Counter:
    """(sentence, its context nearest first) for every non-blank line, by the definition."""
    pairs, history = [], []
    for line in lines:
        if not line.strip():
            history = []
            continue
        pairs.append((line, tuple(reversed(history[-CONTEXT_SIZE:]))))
        history.append(line)
    return Counter(pairs)


def interactive(data: Path, checkpoint: Path, documents: Path, buffer_size: int, capsys,
                monkeypatch) -> Tuple[Dict[int, str], Counter]:
    """fairseq-interactive's hypotheses by line number, and (sentence, context) of every
    sentence as the model received it."""
    seen: List[Tuple[str, Tuple[str, ...]]] = []
    restore = InteractiveDocuments.restore_context

    def recording(self, sample):
        restored = restore(self, sample)
        net_input, dictionary = restored["net_input"], self.collate.src_dict

        def text(tokens):
            return dictionary.string(strip_pad(tokens, dictionary.pad()))

        for row in range(net_input["src_tokens"].size(0)):
            source = text(net_input["src_tokens"][row])
            context = tuple(text(net_input["context_tokens"][u][1:])
                            for u in net_input["context_index"][row].tolist() if u >= 0)
            seen.append((source, context))
        return restored

    monkeypatch.setattr(InteractiveDocuments, "restore_context", recording)
    capsys.readouterr()
    call_tool("fairseq-interactive", [
        str(data), "--user-dir", USER_DIR, "--task", "context_translation", "--context-size", str(CONTEXT_SIZE),
        "--path", str(checkpoint), "--beam", "2", "--buffer-size", str(buffer_size),
        "--batch-size", str(min(buffer_size, 4)), "--input", str(documents), "--cpu",
    ])
    hypotheses = {}
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("H-"):
            number, _, text = line.split("\t")
            hypotheses[int(number[2:])] = text
    return hypotheses, Counter(seen)


@pytest.fixture(scope="module")
def translate_doc_output(tiny_data, hmce_dir, documents) -> List[str]:
    translator = hub.load(str(hmce_dir / "checkpoint_last.pt"), data=str(tiny_data), beam=2)
    return list(translator.translate_stream(documents.read_text(encoding="utf-8").splitlines(), batch_size=3))


@pytest.mark.parametrize("buffer_size", [1, 3, 1000])
def test_interactive_translates_with_the_running_context_like_translate_doc(
        buffer_size, tiny_data, hmce_dir, documents, translate_doc_output, capsys, monkeypatch):
    lines = documents.read_text(encoding="utf-8").splitlines()
    hypotheses, seen = interactive(tiny_data, hmce_dir / "checkpoint_last.pt", documents, buffer_size, capsys,
                                   monkeypatch)
    assert seen == expected_contexts(lines)
    blank = {number for number, line in enumerate(lines) if not line.strip()}
    assert set(hypotheses) == set(range(len(lines))) - blank
    assert [hypotheses.get(number, "") for number in range(len(lines))] == translate_doc_output


def test_interactive_constraints_with_context_are_refused(tiny_data, hmce_dir, tmp_path):
    source = tmp_path / "constrained.en"
    source.write_text("it is small .\tist\n", encoding="utf-8")
    refusal = r"--constraints is not supported with document context \(--context-size or --target-context-size > 0\)"
    with pytest.raises(ContextUnavailableError, match=refusal):
        call_tool("fairseq-interactive", [
            str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation", "--constraints",
            "--path", str(hmce_dir / "checkpoint_last.pt"), "--input", str(source), "--cpu",
        ])


def test_translate_doc_tool_matches_the_hub(tiny_data, hmce_dir, documents, translate_doc_output, capsys):
    from fairseq_ctx.cli import translate_doc

    capsys.readouterr()
    translate_doc.main([str(hmce_dir / "checkpoint_last.pt"), "--data", str(tiny_data), "--beam", "2",
                        "--batch-size", "5", "--input", str(documents)])
    assert capsys.readouterr().out.splitlines() == translate_doc_output


def test_fairseq_hub_interface_refuses_to_translate_without_context(tiny_data, hmce_dir):
    from fairseq.models.transformer import TransformerModel

    interface = TransformerModel.from_pretrained(str(hmce_dir), "checkpoint_last.pt", str(tiny_data))
    with pytest.raises(ContextUnavailableError, match=r"without their documents.*DocumentTranslator"):
        interface.translate("it is small .")
    with pytest.raises(ContextUnavailableError, match="without their documents"):
        interface.translate(["the new man stands .", "it is small ."])


@pytest.mark.parametrize("model_class", sorted(
    (cls for cls in MODEL_REGISTRY.values() if issubclass(cls, ContextTransformerModel)), key=lambda c: c.__name__))
def test_every_context_model_class_from_pretrained_is_the_document_translator(model_class, tiny_data, hmce_dir):
    translator = model_class.from_pretrained(str(hmce_dir), "checkpoint_last.pt", str(tiny_data), beam=2)
    assert isinstance(translator, hub.DocumentTranslator)
    document = ["the new man stands .", "it is small .", "it is small ."]
    reference = hub.load(str(hmce_dir / "checkpoint_last.pt"), data=str(tiny_data), beam=2)
    assert translator.translate_document(document) == reference.translate_document(document)
    assert translator.translate("it is small .") == reference.translate_document(["it is small ."])[0]
    with pytest.raises(TypeError, match="translate_document"):
        translator.translate(document)


def test_inference_step_and_dataset_without_context_raise(tiny_data, hmce_dir):
    from fairseq_ctx.context.data.context_examples import Example

    translator = hub.load(str(hmce_dir / "checkpoint_last.pt"), data=str(tiny_data), beam=2)
    source, previous = translator.encode_source("it is small ."), translator.encode_source("the new man stands .")
    sample = translator.make_sample([Example(source, [previous])])
    assert sample["net_input"]["context_index"].tolist() == [[0, -1]]
    stripped = {**sample, "net_input": {k: sample["net_input"][k] for k in ("src_tokens", "src_lengths")}}
    with pytest.raises(ContextUnavailableError, match="without 'context_index'"):
        translator.task.inference_step(translator.generator, translator.models, stripped)
    with pytest.raises(ContextUnavailableError, match="without their documents"):
        translator.task.build_dataset_for_inference([source], [source.numel()])


def test_generate_with_the_sentence_level_task_refuses_a_context_model(tiny_data, hmce_dir):
    with pytest.raises(ValueError, match=r"--arch hmce is a context_translation model, but the task is "
                                         r"TranslationTask"):
        call_tool("fairseq-generate", [str(tiny_data), "--user-dir", USER_DIR, "--task", "translation",
                                            "--path", str(hmce_dir / "checkpoint_last.pt"), "--gen-subset", "test",
                                            "--cpu"])


@pytest.mark.parametrize("model_class", [TransformerMDE, LaserModel])
def test_embedding_models_point_to_the_embedding_tools(model_class):
    with pytest.raises(NotImplementedError, match=r"fairseq-ctx-embed CHECKPOINT --lang LANG"):
        model_class.from_pretrained("checkpoints/tmde")


def test_multisource_from_pretrained_refuses_a_model_with_image_features(multimodal_data, tmp_path):
    save_dir = train(multimodal_data, tmp_path, ["--task", "multimodal_translation", "--feature-inputs", "img",
                                                 "--source-lang", "en", "--target-lang", "de",
                                                 "--arch", "hierarchical_attention_decoder"], 1)
    with pytest.raises(NotImplementedError, match=r"also reads img \(feature\).*fairseq-generate"):
        MultiSourceTransformer.from_pretrained(str(save_dir), "checkpoint_last.pt", str(multimodal_data))


def test_multisource_from_pretrained_is_fairseqs_hub_for_a_text_only_model(multimodal_data, tmp_path):
    from fairseq.hub_utils import GeneratorHubInterface

    save_dir = train(multimodal_data, tmp_path, ["--task", "multimodal_translation", "--source-lang", "en",
                                                 "--target-lang", "de", "--arch", "hierarchical_attention_decoder"], 1)
    interface = MultiSourceTransformer.from_pretrained(str(save_dir), "checkpoint_last.pt", str(multimodal_data))
    assert isinstance(interface, GeneratorHubInterface)
    hypothesis = interface.generate([interface.encode("a red car .")], beam=1)[0][0]["tokens"]
    assert hypothesis.numel() >= 1 and hypothesis[-1].item() == interface.task.target_dictionary.eos()
    assert isinstance(interface.translate("a red car .", beam=1), str)


def test_document_vector_model_translates_raw_text_as_generate_does(tiny_data, tmp_path):
    """With --document-vector (span M) the running context keeps the previous M sentences, so
    raw text gets the same translations as fairseq-generate on the binarized split."""
    save_dir = train(tiny_data, tmp_path / "dv", ["--task", "context_translation", "--arch", "hmce",
                                                  "--document-vector", "--document-vector-span", "4"], 10)
    call_tool("fairseq-generate", [
        str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation", "--path",
        str(save_dir / "checkpoint_last.pt"), "--gen-subset", "test", "--beam", "2", "--batch-size", "8",
        "--required-batch-size-multiple", "1", "--results-path", str(tmp_path / "gen"), "--cpu",
    ])
    generated = {}
    for line in (tmp_path / "gen" / "generate-test.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("H-"):
            number, _, text = line.split("\t")
            generated[int(number[2:])] = text
    translator = hub.load(str(save_dir / "checkpoint_last.pt"), data=str(tiny_data), beam=2)
    lines = (tiny_data.parent / "raw" / "test.en").read_text(encoding="utf-8").splitlines()
    translations = [t for t, line in zip(translator.translate_stream(lines, batch_size=5), lines) if line.strip()]
    assert translations == [generated[number] for number in range(len(generated))]
