"""fairseq-ctx-score without --context-key: sacreBLEU's own BLEU and chrF on detokenized text,
with the signature, from a fairseq-generate output or plain files; the COMET gate; bad input."""
import json
import sys
import types

import pytest
import sacrebleu

from fairseq_ctx.cli import score as score_cli
from fairseq_ctx.core.scoring import (ScoringInputError, load_translations, paired_bootstrap, remove_bpe, score,
                                     translation_scores)

SOURCES = ["Die Katze sitzt auf der Matte.", "Ein Hund bellt laut.", "Wir gehen morgen nach Hause.",
           "Das Wetter ist heute schön."]
REFERENCES = ["The cat sits on the mat.", "A dog barks loudly.", "We are going home tomorrow.",
              "The weather is nice today."]
HYPOTHESES = ["The cat sat on the mat.", "A dog is barking loudly.", "Tomorrow we go home.",
              "Today the weather is beautiful."]


def pieces(sentence: str) -> str:
    """A sentencepiece-like segmentation: '▁' before every word, words of 5+ letters split in two."""
    out = []
    for word in sentence.split():
        out += [f"\u2581{word[:3]}", word[3:]] if len(word) >= 5 else [f"\u2581{word}"]
    return " ".join(out)


def generate_output(with_targets: bool = True, ids=None) -> str:
    """fairseq-generate's format without --bpe: every line still holds the pieces."""
    lines = []
    for i in ids if ids is not None else range(len(SOURCES)):
        lines.append(f"S-{i}\t{pieces(SOURCES[i])}")
        if with_targets:
            lines.append(f"T-{i}\t{pieces(REFERENCES[i])}")
        lines += [f"H-{i}\t-0.5\t{pieces(HYPOTHESES[i])}", f"D-{i}\t-0.5\t{pieces(HYPOTHESES[i])}",
                  f"P-{i}\t-0.1 -0.2"]
    return "\n".join(lines) + "\n"


def write(path, lines) -> str:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_pieces_are_removed_like_fairseq_post_process_and_plain_text_is_left_alone():
    assert remove_bpe([pieces(s) for s in REFERENCES]) == REFERENCES
    assert remove_bpe(REFERENCES) == REFERENCES
    assert remove_bpe(["a b c"], "sentencepiece") == ["abc"]
    assert remove_bpe(["wal@@ king home"], "subword_nmt") == ["walking home"]


def test_scores_are_sacrebleus_own_numbers_from_generate_output_or_plain_files(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "comet", None)
    expected_bleu = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score
    expected_chrf = sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES]).score
    assert 5 < expected_bleu < 60
    (tmp_path / "gen.out").write_text(generate_output(), encoding="utf-8")
    hyps, refs, srcs = load_translations(str(tmp_path / "gen.out"))
    assert (hyps, refs, srcs) == (HYPOTHESES, REFERENCES, SOURCES)
    from_output = translation_scores(hyps, refs, srcs)
    plain = translation_scores(*load_translations(hyp=write(tmp_path / "hyp", HYPOTHESES),
                                                  ref=write(tmp_path / "ref", [pieces(r) for r in REFERENCES])))
    for result in (from_output, plain):
        assert result["bleu"] == expected_bleu and result["chrf"] == expected_chrf
        assert "comet" not in result and "unbabel-comet is not installed" in result["comet_skipped"]
    # a generate output without targets, with the references in a plain detokenized file
    (tmp_path / "no_targets.out").write_text(generate_output(with_targets=False), encoding="utf-8")
    hyps, refs, _ = load_translations(str(tmp_path / "no_targets.out"), ref=str(tmp_path / "ref"))
    assert translation_scores(hyps, refs)["bleu"] == expected_bleu


def test_cli_prints_the_signatures_and_writes_json(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "comet", None)
    (tmp_path / "gen.out").write_text(generate_output(), encoding="utf-8")
    score_cli.main([str(tmp_path / "gen.out"), "--json", str(tmp_path / "scores.json")])
    captured = capsys.readouterr()
    bleu = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES])
    version = sacrebleu.__version__
    assert str(bleu).startswith(f"BLEU = {bleu.score:.2f} ")
    assert captured.out.splitlines()[0] == (f"BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:{version} = "
                                            + str(bleu).split(" = ", 1)[1])
    chrf = sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES]).score
    assert captured.out.splitlines()[1] == (f"chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:{version} = "
                                            f"{chrf:.2f}")
    assert "COMET not computed: unbabel-comet is not installed" in captured.err
    written = json.loads((tmp_path / "scores.json").read_text())
    assert written["bleu"] == bleu.score and written["sentences"] == 4
    assert written["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")


def test_comet_runs_when_installed_on_the_detokenized_text(tmp_path, monkeypatch):
    seen = {}

    class FakeModel:
        def predict(self, data, batch_size, gpus):
            seen.update(data=data, gpus=gpus)
            return types.SimpleNamespace(system_score=0.8125, scores=[0.8125] * len(data))

    fake = types.ModuleType("comet")
    fake.download_model = lambda name: seen.setdefault("model", name) and f"/cache/{name}.ckpt"
    fake.load_from_checkpoint = lambda path: seen.setdefault("path", path) and FakeModel()
    monkeypatch.setitem(sys.modules, "comet", fake)
    (tmp_path / "gen.out").write_text(generate_output(), encoding="utf-8")
    result = translation_scores(*load_translations(str(tmp_path / "gen.out")))
    assert result["comet"] == 0.8125 and result["comet_model"] == "Unbabel/wmt22-comet-da"
    assert seen["path"] == "/cache/Unbabel/wmt22-comet-da.ckpt" and seen["gpus"] == 0
    assert seen["data"][1] == {"src": SOURCES[1], "mt": HYPOTHESES[1], "ref": REFERENCES[1]}
    assert "comet" not in translation_scores(HYPOTHESES, REFERENCES, SOURCES, comet_model=None)
    fake.download_model = lambda name: (_ for _ in ()).throw(OSError("no network"))
    offline = translation_scores(HYPOTHESES, REFERENCES, SOURCES)
    assert "comet" not in offline and offline["bleu"] == result["bleu"]
    assert offline["comet_skipped"] == "COMET model Unbabel/wmt22-comet-da could not be loaded (no network)"
    assert "needs the sources" in translation_scores(HYPOTHESES, REFERENCES)["comet_skipped"]


def test_misaligned_or_missing_input_is_a_clear_error(tmp_path, capsys):
    hyp = write(tmp_path / "hyp", HYPOTHESES)
    with pytest.raises(ScoringInputError, match=r"--hyp .*hyp: 4 lines, --ref .*short: 3 lines"):
        load_translations(hyp=hyp, ref=write(tmp_path / "short", REFERENCES[:3]))
    with pytest.raises(ScoringInputError, match=r"--hyp .*hyp needs --ref"):
        load_translations(hyp=hyp)
    with pytest.raises(ScoringInputError, match="give either a fairseq-generate output or --hyp"):
        load_translations()
    (tmp_path / "no_targets.out").write_text(generate_output(with_targets=False), encoding="utf-8")
    with pytest.raises(ScoringInputError, match=r"no_targets\.out has no T- line for 4 of its 4 sentences \(first: "
                                                r"sentence 0\); give the references with --ref"):
        load_translations(str(tmp_path / "no_targets.out"))
    (tmp_path / "gap.out").write_text(generate_output(ids=[0, 1, 3]), encoding="utf-8")
    with pytest.raises(ScoringInputError, match=r"gap\.out has hypotheses for 3 sentence ids, not for every id 0\.\.3"):
        load_translations(str(tmp_path / "gap.out"), ref=str(tmp_path / "hyp"))
    (tmp_path / "empty").write_text("")
    with pytest.raises(ScoringInputError, match=r"--ref .*empty is empty"):
        load_translations(hyp=hyp, ref=str(tmp_path / "empty"))
    (tmp_path / "log.txt").write_text("2024 | INFO | fairseq | nothing here\n")
    with pytest.raises(SystemExit, match=r"log\.txt has no D- or H- lines; is it fairseq-generate output\?"):
        score_cli.main([str(tmp_path / "log.txt")])
    with pytest.raises(SystemExit) as stop:
        score_cli.main(["--hyp", hyp, "--ref", hyp, "--context-key", hyp])
    assert stop.value.code == 2 and "--context-key scores a fairseq-generate output alone" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        score_cli.main(["--hyp", hyp, "--ref", hyp, "--json", hyp])
    assert stop.value.code == 2 and "is one of the inputs" in capsys.readouterr().err


def test_context_key_keeps_bleu_of_h_lines_and_context_accuracy(tmp_path, capsys):
    hyps = {0: "er ist alt .", 1: "sie ist alt .", 2: "es und er"}
    (tmp_path / "gen.out").write_text("".join(f"T-{i}\t{h}\nH-{i}\t-0.1\t{h}\n" for i, h in hyps.items()))
    (tmp_path / "key").write_text("er|sie,es\ner|sie,es\n\n")
    score_cli.main([str(tmp_path / "gen.out"), "--context-key", str(tmp_path / "key")])
    bleu = sacrebleu.BLEU()
    line = bleu.corpus_score(list(hyps.values()), [list(hyps.values())]).format(signature=str(bleu.get_signature()))
    assert line.startswith("BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert capsys.readouterr().out == f"{line}\ncontext accuracy = 0.500 (1/2 context-dependent sentences)\n"


def swap_synonyms(text: str) -> str:
    """The other synonym of every synonym noun (wagen ↔ karre ...) and the pronoun after it made to agree."""
    from fairseq_ctx.context.demo.synthetic_corpus import SYNONYMS

    other = {a: b for _, m, f in SYNONYMS for a, b in ((m, f), (f, m))}
    lines, swapped_gender = [], None
    for line in text.splitlines():
        words = line.split()
        if words and words[0] in ("er", "sie") and swapped_gender is not None:
            words[0] = swapped_gender
        swapped = [other.get(w, w) for w in words]
        swapped_gender = None
        if swapped != words:
            swapped_gender = "sie" if words[0] == "der" else "er"
            swapped[0] = "die" if words[0] == "der" else "der"
        lines.append(" ".join(swapped))
    return "\n".join(lines)


def test_target_setting_key_expects_the_pronoun_of_the_models_own_synonym(tmp_path, capsys):
    """On --setting target the reference picks a synonym at random; a model that picks the other
    synonym and the pronoun agreeing with it is right every time (comparing with the reference
    would give 0 here). A pronoun that disagrees with the model's own synonym is wrong; a previous
    hypothesis without a synonym leaves its pronoun undecided."""
    from fairseq_ctx.cli import make_corpus

    make_corpus.main([str(tmp_path / "raw"), "--setting", "target", "--train-docs", "1", "--valid-docs", "1",
                      "--test-docs", "12", "--contrastive-blocks", "1"])
    capsys.readouterr()
    references = [line for line in (tmp_path / "raw" / "test.de").read_text().splitlines() if line]
    keys = (tmp_path / "raw" / "test.ctxkey").read_text().splitlines()
    assert len(keys) == len(references) and all(k.count("|") == 2 for k in keys if k)
    hypotheses = swap_synonyms("\n".join(references)).splitlines()
    pronoun_sentences = [i for i, k in enumerate(keys) if k]
    assert len(pronoun_sentences) >= 20 and all(hypotheses[i] != references[i] for i in pronoun_sentences)
    wrong = pronoun_sentences[0]
    hypotheses[wrong] = " ".join(["er" if hypotheses[wrong].split()[0] == "sie" else "sie",
                                  *hypotheses[wrong].split()[1:]])
    undecided = pronoun_sentences[1]
    hypotheses[undecided - 1] = "wir sahen es ."
    output = tmp_path / "gen.out"
    output.write_text("".join(f"T-{i}\t{r}\nH-{i}\t-0.1\t{h}\n" for i, (r, h) in enumerate(zip(references, hypotheses))))
    result = score(str(output), str(tmp_path / "raw" / "test.ctxkey"))
    total = len(pronoun_sentences) - 1
    assert (result["context_correct"], result["context_total"], result["context_undetermined"]) == (total - 1, total, 1)
    score_cli.main([str(output), "--context-key", str(tmp_path / "raw" / "test.ctxkey")])
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("BLEU|nrefs:1|") and printed[1] == (
        f"context accuracy = {(total - 1) / total:.3f} ({total - 1}/{total} context-dependent sentences; expected: the "
        f"pronoun agreeing with the synonym the hypothesis of the previous sentence chose; 1 more left out, their "
        f"previous hypothesis names no synonym)")


def test_a_chosen_tokenizer_gets_no_detokenization_note(tmp_path, caplog):
    """100 lines ending in ' .' make sacreBLEU say the text looks tokenized, which is what a user
    choosing --tokenize (or scoring the tokenized demo corpus with --context-key) means."""
    lines = [f"das haus {i} steht hier ." for i in range(100)]
    hyp, ref = write(tmp_path / "hyp", lines), write(tmp_path / "ref", lines)
    (tmp_path / "gen.out").write_text("".join(f"T-{i}\t{h}\nH-{i}\t-0.1\t{h}\n" for i, h in enumerate(lines)))
    write(tmp_path / "key", [""] * 100)
    for argv in (["--hyp", hyp, "--ref", ref, "--tokenize", "13a", "--no-comet"],
                 [str(tmp_path / "gen.out"), "--context-key", str(tmp_path / "key")]):
        caplog.clear()
        score_cli.main(argv)
        assert not [r for r in caplog.records if "detokenize" in r.getMessage()], argv
    caplog.clear()
    score_cli.main(["--hyp", hyp, "--ref", ref, "--no-comet"])  # the default: sacreBLEU's own check stays
    assert [r for r in caplog.records if "forgot to detokenize" in r.getMessage()]


def test_paired_bootstrap_tells_a_real_gain_from_none():
    """60 references; the better system gets 40 of them exactly right where the baseline gets 10, a
    copy of the baseline differs in nothing. p is sacreBLEU's paired bootstrap (fixed seed)."""
    references = [f"a photo of dog {i} running on the grass near house {i}" for i in range(60)]
    baseline = [r if i < 10 else f"a photo of cat {i} on grass" for i, r in enumerate(references)]
    better = [r if i < 40 else baseline[i] for i, r in enumerate(references)]
    p = paired_bootstrap(baseline, {"better": better, "copy": list(baseline)}, references, tokenize="none", samples=200)
    assert p["better"]["bleu_p"] < 0.01 and p["better"]["chrf_p"] < 0.01
    assert p["copy"] == {"bleu_p": 1.0, "chrf_p": 1.0}
    assert paired_bootstrap(baseline, {}, references) == {}
    with pytest.raises(ScoringInputError, match="short has 59 hypotheses for 60 references"):
        paired_bootstrap(baseline, {"short": better[:59]}, references)
