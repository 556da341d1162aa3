"""Data stages of the SCAT En→Fr recipe (Yun (2022) ch. 3 two-stage recipe on SCAT, Yin et al. (2021)).

- Stage-1 corpus: all the en–fr sentence data of the two sets but SCAT valid: Multi30k task 1
  (Elliott et al., 2016), the raw cased ``{train,val}.{en,fr}.gz``, plus every SCAT training
  sentence and every SCAT training context line, markers removed, as plain pairs. A context line
  holds several subtitle sentences whose English and French sentence counts differ in about 44% of
  the lines (merged or dropped subtitles), so a line is one segment pair, never split.
  Validation: Multi30k val.
- Stage-2 corpus: every SCAT example is a two-line document ``[context line, sentence]`` (the
  preceding sentences kept as one segment, exactly as ``fairseq-ctx-contrastive --format scat``
  reads them), so ``--context-size 1`` gives each sentence its context line. An example whose
  English or French context line is empty is a one-line document (no context). The conversion is
  the package's (``fairseq_ctx.context.data.one_line_context``, ``fairseq-ctx-prepare-docs
  --src-context ...``).
- One joint sentencepiece model (Kudo and Richardson, 2018) over all English and French training
  text; its pieces are the fairseq dictionary shared by both corpora.
- Test sets (a stage of their own, ``WORK/test/``, binarized with the training dictionary into the
  ``test`` split of both corpora): Multi30k ``test_2016_flickr`` en→fr (raw, cased) for stage 1, and
  SCAT's published test split (1,000 examples, two-line documents as above) for every model.

Markers (``<p>…</p>``, ``<hon>…<hoff>``) are removed everywhere with the contrastive importer's
own ``unmark``, so training and contrastive scoring see the same text.
"""
import gzip
import json
import os
from pathlib import Path
from typing import Dict, List, Sequence, Set, Tuple

from fairseq_ctx.context.contrastive.example import check_same_length, read_lines
from fairseq_ctx.context.contrastive.scat import PRONOUN, unmark
from fairseq_ctx.context.data.one_line_context import OneLineContextError, OneLineExample, read_examples, write_documents

SRC, TGT = "en", "fr"
SCAT_SOURCE = "github.com/neulab/contextual-mt, data/scat/ (Yin et al., 2021)"
MULTI30K_SOURCE = "github.com/multi30k/dataset, data/task1/raw/ (Elliott et al., 2016)"
MULTI30K_TEST = "test_2016_flickr"
STAGE_ONE_CORPUS = ("Multi30k train + SCAT train sentences + SCAT train context lines (one segment pair each); "
                    "validation: Multi30k val")


class RecipeInputError(ValueError):
    """A data file of the recipe is missing or malformed."""


def scat_paths(scat_dir: Path, split: str) -> Dict[str, Path]:
    prefix = scat_dir / f"highlighted.{split}"
    return {"context en": Path(f"{prefix}.context.{SRC}"), "sentence en": Path(f"{prefix}.{SRC}"),
            "context fr": Path(f"{prefix}.context.{TGT}"), "sentence fr": Path(f"{prefix}.{TGT}")}


def multi30k_paths(multi30k_dir: Path, split: str) -> Dict[str, Path]:
    return {lang: multi30k_dir / f"{split}.{lang}.gz" for lang in (SRC, TGT)}


def check_inputs(scat_dir: Path, multi30k_dir: Path) -> None:
    """Stop before any work when a data file is missing, naming every missing file and its source."""
    missing = [str(p) for split in ("train", "valid", "test") for p in scat_paths(scat_dir, split).values()
               if not p.is_file()]
    if missing:
        raise RecipeInputError("SCAT files missing: " + ", ".join(missing)
                               + f"; get data/scat/ from {SCAT_SOURCE} and pass its directory with --scat-dir")
    missing = [str(p) for split in ("train", "val", MULTI30K_TEST) for p in multi30k_paths(multi30k_dir, split).values()
               if not p.is_file()]
    if missing:
        raise RecipeInputError("Multi30k files missing: " + ", ".join(missing)
                               + f"; get the raw {{train,val,{MULTI30K_TEST}}}.{{en,fr}}.gz from {MULTI30K_SOURCE} and pass "
                               f"their directory with --multi30k-dir")


def read_scat(scat_dir: Path, split: str) -> List[OneLineExample]:
    """The examples of a split (context en, sentence en, context fr, sentence fr), markers removed."""
    paths = scat_paths(scat_dir, split)
    try:
        return read_examples(*(str(paths[name]) for name in ("context en", "sentence en", "context fr", "sentence fr")),
                             clean=unmark)
    except OneLineContextError as err:
        raise RecipeInputError(f"SCAT {split}: {err}") from None


def read_multi30k(multi30k_dir: Path, split: str) -> List[Tuple[str, str]]:
    paths = multi30k_paths(multi30k_dir, split)
    columns = {}
    for lang, path in paths.items():
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            columns[str(path)] = [" ".join(line.split()) for line in handle]
    check_same_length(columns, f"the Multi30k {split} files")
    pairs = list(zip(*columns.values()))
    for number, (en, fr) in enumerate(pairs, 1):
        if not en or not fr:
            raise RecipeInputError(f"{paths[SRC]}:{number} / {paths[TGT]}:{number}: empty sentence")
    return pairs


def write_lines(path: Path, lines: Sequence[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def train_sentencepiece(inputs: Sequence[Path], prefix: Path, vocab_size: int) -> Path:
    """Joint BPE model over ``inputs``; returns the ``.model`` file."""
    import sentencepiece

    sentencepiece.SentencePieceTrainer.train(
        input=",".join(str(p) for p in inputs), model_prefix=str(prefix), vocab_size=vocab_size,
        model_type="bpe", character_coverage=1.0, hard_vocab_limit=False, input_sentence_size=2000000,
        shuffle_input_sentence=True, minloglevel=2)
    return Path(f"{prefix}.model")


def write_dictionary(model: Path, destination: Path) -> None:
    """fairseq dictionary of every piece of the sentencepiece model (except its unk/bos/eos),
    so that both corpora and the contrastive tool share one vocabulary."""
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=str(model))
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())
              if not (processor.is_unknown(i) or processor.is_control(i))]
    write_lines(destination, [f"{piece} 1" for piece in pieces])


def encode_file(codec, source: Path, destination: Path) -> None:
    lines = source.read_text(encoding="utf-8").splitlines()
    encoded = [codec.encode(line) for line in lines]
    for number, pieces in enumerate(encoded, 1):
        if not pieces:
            raise RecipeInputError(f"{source}:{number} is empty after sentencepiece")
    write_lines(destination, encoded)


def marked_pronouns(scat_dir: Path, split: str) -> Dict[str, int]:
    """How often each French pronoun is marked as SCAT's ambiguous one in ``split`` (lowercased)."""
    counts: Dict[str, int] = {}
    for line in read_lines(str(scat_paths(scat_dir, split)["sentence fr"])):
        for pronoun in PRONOUN.findall(line):
            counts[pronoun.strip().lower()] = counts.get(pronoun.strip().lower(), 0) + 1
    return dict(sorted(counts.items()))


def prepare_text(scat_dir: Path, multi30k_dir: Path, prep: Path) -> Dict:
    """Plain text of both stages in ``prep``: ``sentence.{train,valid}.{en,fr}`` (stage 1),
    ``scat.{train,valid}.{en,fr,docids,sentence_ids}`` (the documents, line of each example's sentence),
    ``scat.valid.ref.fr`` (the sentences scored by BLEU), and
    ``corpus.json``: what stage 1 is made of, its counts, and the pronouns SCAT train marks.
    Returns the content of ``corpus.json``."""
    scat = {split: read_scat(scat_dir, split) for split in ("train", "valid")}
    multi30k = {split: read_multi30k(multi30k_dir, name) for split, name in (("train", "train"), ("valid", "val"))}
    sentences = [(e.source, e.target) for e in scat["train"]]
    context_lines = [(e.source_context, e.target_context) for e in scat["train"] if e.source_context and e.target_context]
    sentence_pairs = {"train": multi30k["train"] + sentences + context_lines, "valid": multi30k["valid"]}
    for split, pairs in sentence_pairs.items():
        for index, lang in enumerate((SRC, TGT)):
            write_lines(prep / f"sentence.{split}.{lang}", [pair[index] for pair in pairs])
    for split, examples in scat.items():
        write_documents(examples, str(prep / f"scat.{split}"), SRC, TGT, doc_prefix=f"scat-{split}-")
    write_lines(prep / "scat.valid.ref.fr", [e.target for e in scat["valid"]])
    training_sources = {en for en, _ in sentence_pairs["train"]}
    corpus = {"stage_one_corpus": STAGE_ONE_CORPUS,
              "counts": {"multi30k_train": len(multi30k["train"]), "scat_train_sentences": len(sentences),
                         "scat_train_context_lines": len(context_lines),
                         "stage_one_train": len(sentence_pairs["train"]),
                         "multi30k_valid": len(multi30k["valid"]), "scat_valid": len(scat["valid"]),
                         "scat_valid_sentences_in_stage_one_train": sum(e.source in training_sources
                                                                        for e in scat["valid"])},
              "scat_train_pronouns": marked_pronouns(scat_dir, "train")}
    (prep / "corpus.json").write_text(json.dumps(corpus, indent=2), encoding="utf-8")
    return corpus


def prepare_test_text(scat_dir: Path, multi30k_dir: Path, out: Path, training_sources: Set[str]) -> Dict:
    """Plain text of the test sets in ``out``: ``sentence.test.{en,fr}`` (Multi30k test_2016_flickr),
    ``scat.test.{en,fr,docids,sentence_ids}`` (SCAT test as two-line documents) and
    ``scat.test.ref.fr`` (the SCAT sentences, the reference of BLEU and chrF); returns their counts
    and how many test sources are verbatim among ``training_sources`` (stage 1's English side)."""
    multi30k = read_multi30k(multi30k_dir, MULTI30K_TEST)
    scat = read_scat(scat_dir, "test")
    for index, lang in enumerate((SRC, TGT)):
        write_lines(out / f"sentence.test.{lang}", [pair[index] for pair in multi30k])
    write_documents(scat, str(out / "scat.test"), SRC, TGT, doc_prefix="scat-test-")
    write_lines(out / "scat.test.ref.fr", [e.target for e in scat])
    return {"multi30k_test": len(multi30k), "scat_test": len(scat),
            "multi30k_test_sources_in_stage_one_train": sum(en in training_sources for en, _ in multi30k),
            "scat_test_sentences_in_stage_one_train": sum(e.source in training_sources for e in scat)}


def encode_test(model: Path, text: Path, out: Path) -> None:
    """The sentencepiece pieces of :func:`prepare_test_text`'s files, ``out/{sentence,scat}.test.{en,fr}``."""
    from fairseq_ctx.core.sentencepiece_codec import SentencePieceCodec

    codec = SentencePieceCodec(str(model))
    for prefix in ("sentence.test", "scat.test"):
        for lang in (SRC, TGT):
            encode_file(codec, text / f"{prefix}.{lang}", out / f"{prefix}.{lang}")


def spm_inputs(prep: Path) -> List[Path]:
    return [prep / f"{name}.{lang}" for name in ("sentence.train", "scat.train") for lang in (SRC, TGT)]


def encoded_prefixes() -> List[str]:
    return ["sentence.train", "sentence.valid", "scat.train", "scat.valid"]


def encode_all(model: Path, prep: Path, out: Path) -> None:
    from fairseq_ctx.core.sentencepiece_codec import SentencePieceCodec

    codec = SentencePieceCodec(str(model))
    for prefix in encoded_prefixes():
        for lang in (SRC, TGT):
            encode_file(codec, prep / f"{prefix}.{lang}", out / f"{prefix}.{lang}")


def replace_dir(tmp: Path, final: Path) -> None:
    """Publish a completed stage directory (an interrupted stage is redone on the next run)."""
    os.replace(tmp, final)
