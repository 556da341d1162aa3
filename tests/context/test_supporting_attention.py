"""fairseq-ctx-supporting-attention: SCAT's marked supporting words placed on a model's pieces, the
mass of hce/hmce's word weights α (Yun (2022), eq. 3.15–3.16) on them against the uniform share,
the totals and their sign test, on the committed tiny hmce with target context."""
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tests.helpers import build
from fairseq_ctx.cli.supporting_attention import main
from fairseq_ctx.context import hub
from fairseq_ctx.context.contrastive.example import ContrastiveInputError
from fairseq_ctx.context.contrastive.scat import MarkedLine, marked_words, read_marked_context, unmark
from fairseq_ctx.context.supporting_attention import (CUT, UNPLACEABLE, attention_of, measure, piece_flags, sign_test,
                                                      summarize)
from fairseq_ctx.core.sentencepiece_codec import SentencePieceCodec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TARGET_CONTEXT = FIXTURES / "checkpoint_target_context" / "hmce_target_context.ckpt"
SOURCE_ONLY = FIXTURES / "checkpoint_v0.1.0" / "hmce_v0.1.0.ckpt"
# SCAT's layout with the tiny model's words (target language de): (sentence, context) per side
LINES = {
    "en": [("<p>it</p> shines here .", "the new bag waits ."),
           ("it waits .", "the bag shines here ."),
           ("<p>it</p> waits here .", "the new bag shines .")],
    "de": [("<p>er</p> glaenzt hier .", "der neu <hon>beutel<hoff> wartet ."),
           ("er wartet .", "der beutel glaenzt hier ."),
           ("<p>er</p> wartet hier .", "<hon>der neu beutel<hoff> glaenzt .")],
}


def write_scat(root: Path, lines=LINES) -> str:
    for lang, pairs in lines.items():
        (root / f"highlighted.valid.{lang}").write_text("".join(s + "\n" for s, _ in pairs))
        (root / f"highlighted.valid.context.{lang}").write_text("".join(c + "\n" for _, c in pairs))
    return str(root / "highlighted.valid")


@pytest.fixture(scope="module")
def translator():
    return hub.load(str(TARGET_CONTEXT), cpu=True)


def test_marked_words_flags_every_word_partly_inside_the_marks_and_keeps_the_unmarked_text():
    line = "Concentre-toi sur les autres  <hon>femmes<hoff> . d'<hon>Élise et</hoff> Paul <p>il</p> <hon> <hoff>"
    text, flags = marked_words(line)
    assert text == unmark(line) == "Concentre-toi sur les autres femmes . d'Élise et Paul il"
    assert flags == (False, False, False, False, True, False, True, True, False, False)


def test_read_marked_context_keeps_the_marked_lines_of_one_side_and_counts_the_others(tmp_path):
    prefix = write_scat(tmp_path)
    lines, unmarked = read_marked_context(prefix, "target", target_lang="de")
    assert unmarked == 1
    assert lines == [MarkedLine("der neu beutel wartet .", (False, False, True, False, False), f"{prefix}.context.de:1"),
                     MarkedLine("der neu beutel glaenzt .", (True, True, True, False, False), f"{prefix}.context.de:3")]
    with pytest.raises(ContrastiveInputError, match=r"highlighted\.valid\.context\.en: no context line has <hon>"):
        read_marked_context(prefix, "source", target_lang="de")


def test_a_word_split_into_pieces_marks_every_piece(tmp_path):
    import sentencepiece

    (tmp_path / "text.txt").write_text("".join(f"the {w} waits near the {w}s .\n"
                                               for w in ["bag", "garden", "house", "quietly"] * 50))
    sentencepiece.SentencePieceTrainer.train(input=str(tmp_path / "text.txt"), model_prefix=str(tmp_path / "spm"),
                                             vocab_size=24, minloglevel=2)
    codec = SentencePieceCodec(str(tmp_path / "spm.model"))
    line = MarkedLine("the gardens waits", (False, True, False), "x:1")
    pieces = codec.encode(line.text).split()
    garden = codec.encode("gardens").split()
    assert len(garden) > 1
    assert piece_flags(line, codec.encode) == [False] * len(codec.encode("the").split()) + [True] * len(garden) + \
        [False] * len(codec.encode("waits").split())
    assert len(piece_flags(line, codec.encode)) == len(pieces)
    assert piece_flags(line, None) == [False, True, False]


def test_mass_uniform_share_and_top_weight_of_one_line():
    weights = torch.tensor([0.1, 0.6, 0.2, 0.1])  # three pieces and </s>
    result = attention_of(weights, [False, True, True], "x:1")
    assert result.mass == pytest.approx(0.8) and result.uniform == 0.5 and result.top_marked
    assert not attention_of(weights, [True, False, False], "x:1").top_marked


def test_sign_test_and_totals():
    assert sign_test(10, 0) == pytest.approx(2 / 1024)
    assert sign_test(3, 3) == 1.0 and sign_test(0, 0) == 1.0
    assert sign_test(7, 2) == pytest.approx(2 * (1 + 9 + 36) / 512)
    results = [attention_of(torch.tensor([0.6, 0.4]), [True], "a"), attention_of(torch.tensor([0.2, 0.8]), [True], "b")]
    summary = summarize(results)
    assert summary["mass"] == pytest.approx(0.4) and summary["uniform"] == 0.5
    assert summary["gap_mean"] == pytest.approx(-0.1) and summary["gap_sd"] == pytest.approx(0.4 / 2 ** 0.5)
    assert (summary["above_uniform"], summary["below_uniform"], summary["top_marked"]) == (1, 1, 1)


def test_measure_reads_the_weights_the_model_pools_its_target_context_with(translator, tmp_path):
    lines, _ = read_marked_context(write_scat(tmp_path), "target", target_lang="de")
    results, left_out = measure(translator, lines, "target")
    assert left_out == {CUT: [], UNPLACEABLE: []}
    encoder = translator.models[0].encoder
    embed = encoder.target_context.embed_tokens
    tokens = translator.encode(lines[1].text, translator.tgt_dict).unsqueeze(0)
    with torch.no_grad():
        weights = encoder.context_word_weights(tokens, embed)[0]
        states, _ = encoder.lower_level(tokens, embed)
        pooled = encoder.encode_context_sentences(tokens, embed)
    assert results[1].mass == pytest.approx(float(weights[:3].sum()), abs=1e-6)
    assert results[1].uniform == 0.5  # three marked words of five, and </s>
    assert torch.allclose(pooled, torch.einsum("bt,tbc->bc", weights[None], states))
    assert weights.sum().item() == pytest.approx(1.0)


def test_uniform_weights_give_the_uniform_share_exactly(translator, tmp_path):
    lines, _ = read_marked_context(write_scat(tmp_path), "target", target_lang="de")
    score = translator.models[0].encoder.pooling.score[-1]
    kept = score.weight.detach().clone(), score.bias.detach().clone()
    try:
        with torch.no_grad():
            score.weight.zero_()
            score.bias.zero_()
        summary = summarize(measure(translator, lines, "target")[0])
    finally:
        with torch.no_grad():
            score.weight.copy_(kept[0])
            score.bias.copy_(kept[1])
    assert summary["mass"] == pytest.approx(summary["uniform"]) == pytest.approx((1 / 6 + 3 / 6) / 2)
    assert (summary["above_uniform"], summary["below_uniform"], summary["sign_test_p"]) == (0, 0, 1.0)


def test_lines_whose_marks_the_context_limit_cuts_are_left_out_and_named(translator, tmp_path):
    lines, _ = read_marked_context(write_scat(tmp_path), "target", target_lang="de")
    limit = translator.task.cfg.max_context_tokens
    translator.task.cfg.max_context_tokens = 3  # <boc>, one word, </s>
    try:
        results, left_out = measure(translator, lines, "target")
    finally:
        translator.task.cfg.max_context_tokens = limit
    assert [r.origin for r in results] == [lines[1].origin] and results[0].uniform == 0.5
    assert left_out[CUT] == [lines[0].origin]


def test_the_side_must_be_one_the_model_reads(translator, tiny_data, tmp_path):
    lines, _ = read_marked_context(write_scat(tmp_path), "target", target_lang="de")
    _, concat, _ = build(tiny_data, "ctx_concat")
    with pytest.raises(ValueError, match=r"the model's encoder is a \w+; the word weights α exist in hce/hmce only"):
        measure(SimpleNamespace(models=[concat]), lines, "source")
    with pytest.raises(ValueError, match=r"side 'target' needs a model that reads the target context"):
        measure(hub.load(str(SOURCE_ONLY), cpu=True), lines, "target")
    source_line = MarkedLine("the new bag waits .", (False, False, True, False, False), "x:1")
    results, _ = measure(translator, [source_line], "source")
    encoder = translator.models[0].encoder
    with torch.no_grad():
        weights = encoder.context_word_weights(translator.encode(source_line.text, translator.src_dict).unsqueeze(0))[0]
    assert results[0].mass == pytest.approx(float(weights[2]), abs=1e-6)


def test_the_tool_prints_and_writes_the_totals_and_every_line(tmp_path, capsys):
    prefix = write_scat(tmp_path)
    main([str(TARGET_CONTEXT), "--input", prefix, "--target-lang", "de", "--json", str(tmp_path / "out.json")])
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "out.json").read_text())
    assert summary["examples"] == 2 and summary["lines_without_marks"] == 1 and summary["side"] == "target"
    assert [e["origin"] for e in summary["per_example"]] == [f"{prefix}.context.de:1", f"{prefix}.context.de:3"]
    assert "over 2 context lines" in out and f"{summary['mass']:.4f}" in out
    with pytest.raises(SystemExit, match=r"fairseq-ctx-supporting-attention: .*context\.en: no context line has"):
        main([str(TARGET_CONTEXT), "--input", prefix, "--target-lang", "de", "--side", "source"])
