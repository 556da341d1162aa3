"""Target-side context end to end on the generated ``target`` corpus (make-corpus --setting
target): a source noun has two target synonyms of different genders picked at random in the
reference, and the next sentence's pronoun agrees with the synonym picked. Only the previous
target sentence tells er from sie. hmce trained with ``--target-context-size 1`` resolves it
(contrastive accuracy on a DiscEvalMT-layout set through ``fairseq-ctx-contrastive``, and
agreement with its own previous output in document translation); the same arch with
``--target-context-size 0`` is at chance, and hmce trained with ``--amp`` (bfloat16 mixed precision
on the CPU) resolves it like the float32 run; batched document decoding equals decoding one
sentence at a time. Budget: 300 updates of ~1000 tokens (100 at lr 3e-3, or 150-200 at lr
5e-3, were not always enough for hmce; 250 and 300 were on every corpus seed tried). ctx_concat reaches the same with the
same budget (docs/context.md); it is left out here to keep the test short."""
import json
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import pytest

from devtools.in_process_tools import call_tool
from tests.helpers import USER_DIR, run_tool

from fairseq_ctx.context import hub
from fairseq_ctx.context.demo.demo_binarize import binarize_context_corpus
from fairseq_ctx.context.demo.synthetic_corpus import PRONOUN, SYNONYMS, CorpusSizes
from fairseq_ctx.context.demo.target_contrastive_set import write_target_anaphora

pytestmark = pytest.mark.heavy  # handed out first under xdist (conftest.py)

MODEL = [
    "--encoder-embed-dim", "64", "--decoder-embed-dim", "64",
    "--encoder-ffn-embed-dim", "128", "--decoder-ffn-embed-dim", "128",
    "--encoder-layers", "2", "--decoder-layers", "1",
    "--encoder-attention-heads", "4", "--decoder-attention-heads", "4", "--share-all-embeddings",
]
BUDGET = [
    "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--lr", "3e-3", "--lr-scheduler", "inverse_sqrt",
    "--warmup-updates", "50", "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
    "--dropout", "0.1", "--max-tokens", "1000", "--max-update", "300", "--seed", "1", "--cpu",
    "--no-epoch-checkpoints", "--log-format", "none", "--disable-validation",
]
RUNS = [("hmce", 1, ()), ("hmce", 0, ()), ("hmce", 1, ("--amp",))]  # (arch, --target-context-size, precision)
SYNONYM_GENDER = {word: gender for _, m, f in SYNONYMS for word, gender in ((m, "m"), (f, "f"))}


def train(data: Path, save_dir: Path, arch: str, target_context_size: int, precision: Sequence[str]) -> Path:
    call_tool("fairseq-train", [
        str(data), "--user-dir", USER_DIR, "--task", "context_translation", "--context-size", "1",
        "--target-context-size", str(target_context_size), "--arch", arch, *MODEL, *BUDGET,
        "--save-dir", str(save_dir), *precision,
    ])
    return save_dir


def contrastive_accuracy(save_dir: Path, data: Path, anaphora: Path, console_script: bool = False) -> float:
    """The held-out interface: ``fairseq-ctx-contrastive DIR --format discevalmt ...`` as a
    console script, or its ``main`` with the same arguments in this process (no interpreter
    start-up)."""
    from fairseq_ctx.cli import contrastive

    result = save_dir / "result.json"
    args = [str(save_dir), "--checkpoint-file", "checkpoint_last.pt", "--data", str(data), "--format", "discevalmt",
            "--input", str(anaphora), "--json", str(result), "--cpu"]
    if console_script:
        run_tool(["fairseq-ctx-contrastive", *args])
    else:
        contrastive.main(args)
    return json.loads(result.read_text())["accuracy"]


def read_documents(path: Path) -> List[List[str]]:
    return [block.splitlines() for block in path.read_text(encoding="utf-8").strip("\n").split("\n\n")]


def own_agreement(translations: Sequence[str], keys: Sequence[str]) -> Tuple[int, int]:
    """Pronoun sentences (non-empty answer key) whose translation uses the pronoun of the
    synonym the previous translation chose, and only that pronoun; and their number."""
    agree = total = 0
    for previous, current, key in zip(translations, translations[1:], keys[1:]):
        if not key:
            continue
        total += 1
        chosen = [SYNONYM_GENDER[w] for w in previous.split() if w in SYNONYM_GENDER]
        words = set(current.split())
        if len(set(chosen)) == 1:
            expected = PRONOUN[chosen[0]]
            agree += expected in words and not words & {p for p in PRONOUN.values() if p != expected}
    return agree, total


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Dict:
    work = tmp_path_factory.mktemp("target_gap")
    data = binarize_context_corpus(work, CorpusSizes(train=300, valid=10, test=30), seed=3, setting="target")
    anaphora = work / "anaphora.json"
    write_target_anaphora(str(anaphora), 100, seed=3)
    runs = {"data": data, "anaphora": anaphora, "raw": work / "raw"}
    for arch, size, precision in RUNS:
        runs[arch, size, precision] = train(data, work / f"{arch}-target{size}{''.join(precision)}", arch, size, precision)
    return runs


def test_hmce_with_target_context_resolves_what_the_source_cannot(runs):
    with_target = contrastive_accuracy(runs["hmce", 1, ()], runs["data"], runs["anaphora"], console_script=True)
    source_only = contrastive_accuracy(runs["hmce", 0, ()], runs["data"], runs["anaphora"])
    print(f"hmce contrastive accuracy: --target-context-size 1 {with_target:.3f}, 0 {source_only:.3f}")
    assert with_target >= 0.9
    assert abs(source_only - 0.5) <= 0.05


def test_hmce_trained_with_amp_resolves_it_as_well(runs):
    """The same check with the model trained in bfloat16 mixed precision (--amp on the CPU)."""
    assert contrastive_accuracy(runs["hmce", 1, ("--amp",)], runs["data"], runs["anaphora"]) >= 0.9


def test_document_translation_agrees_with_its_own_previous_output(runs):
    translator = hub.load(str(runs["hmce", 1, ()]), checkpoint_file="checkpoint_last.pt", data=str(runs["data"]), cpu=True)
    documents = read_documents(runs["raw"] / "test.en")
    lines = [line for number, doc in enumerate(documents) for line in ([""] if number else []) + doc]
    batched = list(translator.translate_stream(lines, batch_size=32))
    assert len(batched) == len(lines) and [b == "" for b in batched] == [line == "" for line in lines]
    translations = [t for t in batched if t]
    keys = (runs["raw"] / "test.ctxkey").read_text(encoding="utf-8").splitlines()
    assert len(translations) == len(keys)
    agree, total = own_agreement(translations, keys)
    print(f"hmce own-output agreement: {agree}/{total}")
    assert total > 40 and agree >= 0.9 * total
    one_at_a_time = [t for doc in documents for t in translator.translate_document(doc, batch_size=1)]
    assert one_at_a_time == translations
