"""A checkpoint saved by fairseq-ctx 0.1.0 (before the one-family-one-folder layout) still loads
and gives the translations and scores it gave then: a tiny hmce model (16 dims, 1+1 layers)
trained 400 updates on the generated corpus, with its dictionaries and the outputs recorded
with the 0.1.0 code (``expected.json``)."""
import json
from pathlib import Path

import pytest

from fairseq_ctx.context import hub

FIXTURE = Path(__file__).parent / "fixtures" / "checkpoint_v0.1.0"


def test_checkpoint_from_0_1_0_translates_and_scores_as_before():
    expected = json.loads((FIXTURE / "expected.json").read_text(encoding="utf-8"))
    translator = hub.load(str(FIXTURE / "hmce_v0.1.0.ckpt"), beam=expected["beam"], cpu=True)
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
