"""Scores of translations: sacreBLEU's BLEU and chrF with their signatures (Post, 2018), COMET
(Rei et al., 2020) when unbabel-comet is installed, paired bootstrap p-values of a difference
(Koehn, 2004), and the context accuracy of an answer key.

BLEU, chrF and COMET are computed on detokenized text: hypotheses from the ``D-`` lines of
``fairseq-generate`` (``H-`` when there are none), references from ``T-`` lines or a plain
file, sentencepiece pieces removed as ``fairseq-generate --post-process sentencepiece`` does.

Document files (``fairseq-ctx-translate-doc`` output and its reference, one sentence per line, a
blank line between documents): a line blank in both is a document boundary, left out of the
sentence scores; a reference blank where the hypothesis is not stays an error. Their d-BLEU is
sacreBLEU's BLEU over the documents, each joined into one segment (the document-level BLEU of
the document-MT literature, e.g. Liu et al., 2020, mBART), printed with its signature.
"""
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from fairseq_ctx.core.generate_output import read_generate
from fairseq_ctx.core.text_input import read_utf8_lines

PIECE = "\u2581"
REMOVE_BPE = ("auto", "sentencepiece", "subword_nmt", "none")
DEFAULT_COMET_MODEL = "Unbabel/wmt22-comet-da"
# (hypotheses, references, sources or None)
Translations = Tuple[List[str], Optional[List[str]], Optional[List[str]]]


class ScoringInputError(ValueError):
    """Hypotheses, references or sources that cannot be scored together."""


def remove_bpe(lines: Sequence[str], symbol: str = "auto") -> List[str]:
    """``lines`` with subword segmentation undone by fairseq's ``post_process``; ``auto`` is
    ``sentencepiece`` when a line holds a '▁' piece and ``none`` otherwise, so text that is
    already detokenized is left as it is."""
    if symbol not in REMOVE_BPE:
        raise ValueError(f"--remove-bpe must be one of {', '.join(REMOVE_BPE)}, got '{symbol}'")
    if symbol == "auto":
        symbol = "sentencepiece" if any(PIECE in line for line in lines) else "none"
    if symbol == "none":
        return list(lines)
    from fairseq.data.data_utils import post_process

    return [post_process(line, symbol) for line in lines]


def _read_lines(path: str, option: str) -> List[str]:
    lines = read_utf8_lines(path)
    if not lines:
        raise ScoringInputError(f"{option} {path} is empty; it needs one sentence per line")
    return lines


def check_references(references: Sequence[str], name: str, numbers: Optional[Sequence[int]] = None) -> None:
    """A reference must have words: an empty one (a blank line, a ``T-`` line without text) is
    scored as a sentence nobody can match, which lowers BLEU without any sign. ``numbers`` name
    the sentences (default: line numbers)."""
    empty = [i for i, reference in enumerate(references) if not reference.strip()]
    if empty:
        where = f"sentence {numbers[empty[0]]}" if numbers is not None else f"line {empty[0] + 1}"
        raise ScoringInputError(f"{name}: {len(empty)} of its {len(references)} references are empty (first: {where}); "
                                f"an empty reference cannot be matched by any translation. Remove those sentences "
                                f"(with their hypotheses and sources) or give their references")


def _in_id_order(texts: Dict[int, str], ids: List[int], path: str, kind: str, fix: str) -> List[str]:
    missing = [i for i in ids if i not in texts]
    if missing:
        raise ScoringInputError(f"{path} has no {kind}- line for {len(missing)} of its {len(ids)} sentences "
                                f"(first: sentence {missing[0]}); {fix}")
    return [texts[i] for i in ids]


def _from_generate_output(path: str, need_refs: bool, need_sources: bool, aligned_to_files: bool,
                          on_partial: Optional[Callable[[str], None]]) -> Translations:
    output = read_generate(path)
    lines = output.lines
    hypotheses = lines["D"] or lines["H"]
    if not hypotheses:
        raise ScoringInputError(f"{path} has no D- or H- lines; is it fairseq-generate output?")
    ids = sorted(hypotheses)
    incomplete = None if aligned_to_files else output.incomplete()
    if incomplete is not None:
        if on_partial is None:
            raise ScoringInputError(f"{incomplete}. Score the output of a complete run, or pass --allow-partial to "
                                    f"score the {len(ids)} sentences present")
        on_partial(f"{incomplete}; scoring the {len(ids)} sentences present (--allow-partial)")
    if aligned_to_files and ids != list(range(len(ids))):
        raise ScoringInputError(f"{path} has hypotheses for {len(ids)} sentence ids, not for every id 0..{max(ids)}; "
                                f"translate the whole split (fairseq-generate --required-batch-size-multiple 1, "
                                f"no --skip-invalid-size-inputs-valid-test) so that line i of --ref / --src is "
                                f"sentence i")
    refs = sources = None
    if need_refs:
        refs = _in_id_order(lines["T"], ids, path, "T", "give the references with --ref, or generate on a split "
                                                        "that has targets")
        check_references(refs, path, ids)
    if need_sources and lines["S"]:
        sources = _in_id_order(lines["S"], ids, path, "S", "give the sources with --src")
    return [hypotheses[i] for i in ids], refs, sources


class Documents(NamedTuple):
    """Sentences of document files with their boundaries: ``spans`` are (first, end) indices
    into the sentence lists, one per document."""

    hypotheses: List[str]
    references: List[str]
    sources: Optional[List[str]]
    spans: List[Tuple[int, int]]


def split_documents(hypotheses: Sequence[str], references: Sequence[str], sources: Optional[Sequence[str]],
                    hyp_name: str, ref_name: str) -> Documents:
    """The sentences of aligned document files without the lines blank in both hypotheses and
    references (document boundaries), and the documents those lines separate. A reference blank
    where the hypothesis is not is an error naming the line."""
    one_sided = [i for i, (hyp, ref) in enumerate(zip(hypotheses, references)) if not ref.strip() and hyp.strip()]
    if one_sided:
        raise ScoringInputError(f"{ref_name}: line {one_sided[0] + 1} is blank but line {one_sided[0] + 1} of "
                                f"{hyp_name} is not ({len(one_sided)} such lines); a document boundary is a line blank "
                                f"in both files, so give that sentence's reference")
    kept: List[int] = []
    spans: List[Tuple[int, int]] = []
    start = 0
    for index, ref in enumerate(references):
        if ref.strip():
            kept.append(index)
        elif len(kept) > start:
            spans.append((start, len(kept)))
            start = len(kept)
    if len(kept) > start:
        spans.append((start, len(kept)))
    if not kept:
        raise ScoringInputError(f"{ref_name} has no sentence: every line is blank")
    pick = (lambda lines: [lines[i] for i in kept])
    return Documents(pick(hypotheses), pick(references), None if sources is None else pick(sources), spans)


def document_bleu(documents: Documents, tokenize: Optional[str] = None) -> Dict[str, object]:
    """d-BLEU: sacreBLEU's corpus BLEU over the documents, each one segment of its sentences
    joined by spaces, with the signature and formatted line."""
    joined = [(" ".join(documents.hypotheses[a:b]), " ".join(documents.references[a:b])) for a, b in documents.spans]
    bleu, _ = sacrebleu_metrics(tokenize)
    result = bleu.corpus_score([hyp for hyp, _ in joined], [[ref for _, ref in joined]])
    signature = str(bleu.get_signature())
    return {"documents": len(joined), "d_bleu": result.score, "d_bleu_signature": signature,
            "d_bleu_line": f"d-BLEU ({len(joined)} documents, each one segment): {result.format(signature=signature)}"}


def read_sentence_ids(path: str, sentences: int) -> List[int]:
    """The sentence ids of ``path``, one per line, 0-based (fairseq's sentence ids, the line numbers
    minus one), as ``fairseq-ctx-prepare-docs --src-context`` writes ``PREFIX.sentence_ids``: each a
    whole number below ``sentences``, each once."""
    ids = []
    for number, line in enumerate(_read_lines(path, "--sentence-ids"), start=1):
        if not line.strip().isdigit() or int(line) >= sentences:
            raise ScoringInputError(f"--sentence-ids {path}, line {number}: {line.strip()!r} is not a sentence id of "
                                    f"the {sentences} translated sentences (0-based whole numbers, 0..{sentences - 1})")
        ids.append(int(line))
    if len(set(ids)) != len(ids):
        raise ScoringInputError(f"--sentence-ids {path} names a sentence twice; give each id once")
    return ids


def load_translations(generate_output: Optional[str] = None, hyp: Optional[str] = None, ref: Optional[str] = None,
                      src: Optional[str] = None, symbol: str = "auto",
                      on_partial: Optional[Callable[[str], None]] = None) -> Translations:
    """(hypotheses, references, sources or None), detokenized and aligned, from a
    ``fairseq-generate`` output and/or plain files (``--hyp``, ``--ref``, ``--src``, one
    sentence per line); plain files take the place of the output's lines of that kind. A
    generate output that does not cover its split (cut off, sentences left out) is an error, or,
    with ``on_partial``, scored as it is after ``on_partial`` is told what is missing; an empty
    reference of a generate output is an error (with ``--hyp``, blank lines are left in for
    :func:`split_documents`)."""
    if (generate_output is None) == (hyp is None):
        raise ScoringInputError("give either a fairseq-generate output or --hyp (a file of hypotheses), not both")
    if hyp is not None:
        if ref is None:
            raise ScoringInputError(f"--hyp {hyp} needs --ref, the references, one per line")
        hyps, refs, sources = _read_lines(hyp, "--hyp"), None, None
        counts = [(f"--hyp {hyp}", len(hyps))]
    else:
        hyps, refs, sources = _from_generate_output(generate_output, ref is None, src is None,
                                                    aligned_to_files=bool(ref or src), on_partial=on_partial)
        counts = [(generate_output, len(hyps))]
    if ref is not None:
        refs = _read_lines(ref, "--ref")
        if hyp is None:
            check_references(refs, f"--ref {ref}")
        counts.append((f"--ref {ref}", len(refs)))
    if src is not None:
        sources = _read_lines(src, "--src")
        counts.append((f"--src {src}", len(sources)))
    if len({count for _, count in counts}) > 1:
        described = ", ".join(f"{name}: {count} lines" for name, count in counts)
        raise ScoringInputError(f"hypotheses, references and sources must be aligned, one sentence per line, "
                                f"but {described}")
    return (remove_bpe(hyps, symbol), remove_bpe(refs, symbol),
            remove_bpe(sources, symbol) if sources is not None else None)


def comet_available() -> bool:
    try:
        import comet  # noqa: F401
    except ImportError:
        return False
    return True


def comet_score(sources: Sequence[str], hypotheses: Sequence[str], references: Sequence[str],
                model: str = DEFAULT_COMET_MODEL, batch_size: int = 8) -> float:
    """COMET's system score (Rei et al., 2020); ``model`` is a model name (downloaded by
    unbabel-comet on first use) or the path of a local COMET checkpoint."""
    import os

    from comet import download_model, load_from_checkpoint

    path = model if os.path.isfile(model) else download_model(model)
    data = [{"src": s, "mt": h, "ref": r} for s, h, r in zip(sources, hypotheses, references)]
    return float(load_from_checkpoint(path).predict(data, batch_size=batch_size, gpus=0).system_score)


def sacrebleu_metrics(tokenize: Optional[str] = None, references: Optional[Sequence[str]] = None,
                      force: Optional[bool] = None) -> Tuple:
    """sacreBLEU's BLEU (``tokenize``: its tokenizer, None for its default 13a) and chrF, the two
    metrics every score and every significance test here uses; with ``references``, cached in them.
    ``force`` (default: whether ``tokenize`` is chosen) turns off sacreBLEU's note that the text
    looks tokenized: a deliberately chosen tokenizer is given the text it expects."""
    from sacrebleu.metrics import BLEU, CHRF

    refs = None if references is None else [list(references)]
    force = tokenize is not None if force is None else force
    return BLEU(tokenize=tokenize, references=refs, force=force), CHRF(references=refs)


def translation_scores(hypotheses: Sequence[str], references: Sequence[str], sources: Optional[Sequence[str]] = None,
                       tokenize: Optional[str] = None, comet_model: Optional[str] = DEFAULT_COMET_MODEL) -> Dict:
    """sacreBLEU's corpus BLEU and chrF with their signatures and formatted lines, and COMET
    when ``comet_model`` is given, unbabel-comet is importable, there are sources and the model
    can be loaded (else ``comet_skipped`` says why, e.g. no network to download the model)."""
    bleu, chrf = sacrebleu_metrics(tokenize)
    bleu_score = bleu.corpus_score(list(hypotheses), [list(references)])
    chrf_score = chrf.corpus_score(list(hypotheses), [list(references)])
    result = {"sentences": len(hypotheses),
              "bleu": bleu_score.score, "bleu_signature": str(bleu.get_signature()),
              "bleu_line": bleu_score.format(signature=str(bleu.get_signature())),
              "chrf": chrf_score.score, "chrf_signature": str(chrf.get_signature()),
              "chrf_line": chrf_score.format(signature=str(chrf.get_signature()))}
    if comet_model is None:
        result["comet_skipped"] = "not asked for"
    elif not comet_available():
        result["comet_skipped"] = "unbabel-comet is not installed (pip install -e '.[comet]')"
    elif sources is None:
        result["comet_skipped"] = "COMET needs the sources: give --src, or a generate output with S- lines"
    else:
        try:
            result["comet"] = comet_score(sources, hypotheses, references, comet_model)
        except OSError as err:
            result["comet_skipped"] = f"COMET model {comet_model} could not be loaded ({err})"
        else:
            result["comet_model"] = comet_model
    return result


def paired_bootstrap(baseline: Sequence[str], systems: Dict[str, Sequence[str]], references: Sequence[str],
                     tokenize: Optional[str] = None, samples: int = 1000) -> Dict[str, Dict[str, float]]:
    """p-values of each system's BLEU and chrF difference from ``baseline``: sacreBLEU's paired
    bootstrap resampling (Koehn, 2004), ``{system: {"bleu_p": p, "chrf_p": p}}``, with
    ``samples`` resamples of the test set and sacreBLEU's fixed seed (``SACREBLEU_SEED``, 12345),
    so the numbers are reproducible; the ``--paired-bs`` of the sacrebleu command line."""
    from sacrebleu.significance import PairedTest

    if not systems:
        return {}
    for name, hypotheses in [("baseline", baseline), *systems.items()]:
        if len(hypotheses) != len(references):
            raise ScoringInputError(f"{name} has {len(hypotheses)} hypotheses for {len(references)} references; "
                                    f"compare translations of the same test set")
    metrics = dict(zip(("bleu", "chrf"), sacrebleu_metrics(tokenize, references)))
    identical = {name for name, hypotheses in systems.items() if list(hypotheses) == list(baseline)}
    named = [("baseline", list(baseline)), *((name, list(h)) for name, h in systems.items())]
    _, results = PairedTest(named, metrics, references=None, test_type="bs", n_samples=samples)()
    # results: {"System": names, score name ("BLEU", "chrF2"): one Result per system}, metrics in order
    columns = [column for name, column in results.items() if name != "System"]
    # sacreBLEU gives a system identical to the baseline the smallest p it can, 1 / (samples + 1)
    return {name: {f"{key}_p": 1.0 if name in identical else column[row].p_value for key, column in zip(metrics, columns)}
            for row, name in enumerate(systems, start=1)}


class ContextAccuracy(NamedTuple):
    """Context-dependent sentences whose hypothesis has the expected word and none of the
    alternatives: ``correct`` of ``total``; ``undetermined``: sentences of a previous-translation
    rule whose previous hypothesis names none (or several) of the rule's words, left out of ``total``."""

    accuracy: float
    correct: int
    total: int
    undetermined: int = 0
    rule: bool = False  # whether some key line judged by the previous translation


def _expected_words(key: str, previous: Optional[str]) -> Optional[Tuple[str, List[str]]]:
    """(expected word, alternatives) of a key line, or None when its rule cannot decide. A line
    ``expected|alternatives|word=expected,word=expected`` (the ``target`` setting) expects the word
    that goes with the rule's word found in the previous hypothesis."""
    fields = key.split("|")
    expected, alternatives = fields[0], [w for w in fields[1].split(",") if w]
    if len(fields) < 3:
        return expected, alternatives
    rule = dict(item.split("=", 1) for item in fields[2].split(","))
    found = [word for word in rule if previous is not None and word in previous.split()]
    if len(found) != 1:
        return None
    chosen = rule[found[0]]
    return chosen, [w for w in [expected, *alternatives] if w != chosen]


def context_accuracy(hyps: Dict[int, str], key_lines: List[str]) -> ContextAccuracy:
    """Share of the answer key's non-empty lines (``expected|alternative,alternative``, with an
    optional third field ``word=expected,...`` judged by the previous hypothesis) whose hypothesis
    contains the expected word and none of the alternatives."""
    correct = total = undetermined = 0
    rule = False
    for sent_id, key in enumerate(key_lines):
        key = key.strip()
        if not key or sent_id not in hyps:
            continue
        rule = rule or key.count("|") >= 2
        expected_words = _expected_words(key, hyps.get(sent_id - 1))
        if expected_words is None:
            undetermined += 1
            continue
        expected, alternatives = expected_words
        words = set(hyps[sent_id].split())
        total += 1
        correct += expected in words and not words.intersection(alternatives)
    return ContextAccuracy(correct / total if total else 0.0, correct, total, undetermined, rule)


def whole_split(generate_output: str) -> Tuple[Dict[int, str], List[int], List[str]]:
    """(``H-`` hypotheses by id, ids in order, ``T-`` references in that order) of a generate output
    that covers its whole split and has a non-empty reference for every sentence, else a
    :class:`ScoringInputError` saying what is missing."""
    output = read_generate(generate_output)
    hyps = output.lines["H"]
    if not hyps:
        raise ScoringInputError(f"{generate_output} has no H- lines; is it fairseq-generate output?")
    incomplete = output.incomplete()
    if incomplete is not None:
        raise ScoringInputError(f"{incomplete}. Score the output of a complete run")
    ids = sorted(hyps)
    references = _in_id_order(output.lines["T"], ids, generate_output, "T", "generate on a split that has targets")
    check_references(references, generate_output, ids)
    return hyps, ids, references


def read_answer_key(path: str, sentences: int, generate_output: str) -> List[str]:
    """The answer key's lines, one per sentence of the split."""
    key_lines = read_utf8_lines(path)
    if len(key_lines) != sentences:
        raise ScoringInputError(
            f"{generate_output} has {sentences} hypotheses but {path} has {len(key_lines)} lines; the answer key needs "
            f"one line per sentence of the split (empty for a sentence that does not depend on context)")
    return key_lines


def score(generate_output: str, context_key: str, tokenize: Optional[str] = None) -> Dict:
    """sacreBLEU's BLEU of the ``H-`` lines against the ``T-`` lines as they are (tokenized text, as
    the generated corpus is: sacreBLEU's detokenization note is off), with its signature, and the
    context accuracy of the answer key; the output must cover its whole split (:func:`whole_split`)."""
    hyps, ids, references = whole_split(generate_output)
    bleu, _ = sacrebleu_metrics(tokenize, force=True)
    bleu_score = bleu.corpus_score([hyps[i] for i in ids], [references])
    accuracy = context_accuracy(hyps, read_answer_key(context_key, len(ids), generate_output))
    signature = str(bleu.get_signature())
    return {"bleu": bleu_score.score, "bleu_signature": signature,
            "bleu_line": bleu_score.format(signature=signature), "context_accuracy": accuracy.accuracy,
            "context_correct": accuracy.correct, "context_total": accuracy.total,
            "context_undetermined": accuracy.undetermined,
            "context_rule": "previous translation" if accuracy.rule else "reference",
            "sentences": len(ids)}
