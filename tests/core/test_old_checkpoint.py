"""Checkpoints saved by earlier layouts of the package still load and give the translations and
scores they gave then, each with its dictionaries and the outputs recorded with the code that
wrote it (``expected.json``):

- fairseq-ctx 0.1.0 (before the one-family-one-folder layout): a tiny hmce (16 dims, 1+1 layers)
  trained 400 updates on the generated corpus;
- before the context models moved to ``context/models/`` and the context batch became a type: a
  tiny hmce with target context (``--target-context-size 1``) and a document vector, trained 400
  updates on the generated ``target`` corpus, decoding with its own previous translations.

A checkpoint pickles no class of the package (only fairseq's argument namespace besides tensors
and containers), so moving or renaming a module can never keep one from loading."""
import json
from pathlib import Path

import pytest
import torch

from fairseq_ctx.context import hub

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
V0_1_0 = FIXTURES / "checkpoint_v0.1.0"
TARGET_CONTEXT = FIXTURES / "checkpoint_target_context"


def test_checkpoint_from_0_1_0_translates_and_scores_as_before():
    expected = json.loads((V0_1_0 / "expected.json").read_text(encoding="utf-8"))
    translator = hub.load(str(V0_1_0 / "hmce_v0.1.0.ckpt"), beam=expected["beam"], cpu=True)
    assert translator.translate_document(expected["source"]) == expected["translations"]
    source = expected["source"]
    examples = [
        hub.Example(
            source=translator.encode_source(source[i]),
            context=[translator.encode_source(source[j]) for j in range(i - 1, max(-1, i - 3), -1)],
            target=translator.encode_target(expected["reference"][i]),
        )
        for i in range(len(source))
    ]
    scores = [float(s.sum()) for s in translator.score_examples(examples)]
    assert scores == pytest.approx(expected["reference_log_probs"], abs=1e-3)


def test_checkpoint_with_target_context_from_before_the_layout_translates_and_scores_as_before():
    expected = json.loads((TARGET_CONTEXT / "expected.json").read_text(encoding="utf-8"))
    translator = hub.load(str(TARGET_CONTEXT / "hmce_target_context.ckpt"), beam=expected["beam"], cpu=True)
    assert translator.target_context_size == 1
    assert [translator.translate_document(d) for d in expected["documents"]] == expected["translations"]
    lines = [line for document in expected["documents"] for line in [*document, ""]]
    assert list(translator.translate_stream(lines, batch_size=expected["stream_batch_size"])) == expected["stream"]
    for document, references, recorded in zip(expected["documents"], expected["references"],
                                              expected["reference_log_probs"]):
        examples = [
            hub.Example(
                source=translator.encode_source(document[i]),
                context=[translator.encode_source(document[j]) for j in range(i - 1, max(-1, i - 3), -1)],
                target=translator.encode_target(references[i]),
                target_context=[translator.encode_target(references[i - 1])] if i else [],
            )
            for i in range(len(document))
        ]
        scores = [float(s.sum()) for s in translator.score_examples(examples)]
        assert scores == pytest.approx(recorded, abs=1e-3)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*/*.ckpt")), ids=lambda p: p.parent.name)
def test_a_checkpoint_pickles_no_class_of_the_package(path):
    """The package allow-lists none of its classes for torch's weights-only loading, so one pickled
    in a checkpoint would be listed here."""
    pickled = torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
    assert [name for name in pickled if name.startswith("fairseq_ctx")] == []
