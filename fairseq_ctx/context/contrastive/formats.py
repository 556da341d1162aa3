"""One entry point over the layouts: ``--format plain`` with its parallel files, or a published
set given by ``--input`` (the set's own JSON file, or SCAT's file prefix), ``--text-dir``
(where the set's plain-text extraction lives) and the languages of its file names."""
from typing import List, Optional, Sequence, Tuple

from fairseq_ctx.context.contrastive.contrapro import read_contrapro
from fairseq_ctx.context.contrastive.discevalmt import read_discevalmt
from fairseq_ctx.context.contrastive.example import ContrastiveExample, ContrastiveInputError, check_examples
from fairseq_ctx.context.contrastive.plain import read_contrastive_set
from fairseq_ctx.context.contrastive.scat import read_scat
from fairseq_ctx.context.contrastive.voita import read_voita

FORMATS = ("plain", "contrapro", "discevalmt", "scat", "voita")
DEFAULT_LANGS = {"contrapro": ("en", "de"), "scat": ("en", "fr")}


def read_set(fmt: str, inputs: Sequence[str] = (), text_dir: Optional[str] = None, source_lang: Optional[str] = None,
             target_lang: Optional[str] = None, source: Optional[str] = None, reference: Optional[str] = None,
             contrastive: Sequence[str] = (), context: Sequence[str] = (),
             categories: Optional[str] = None) -> Tuple[List[ContrastiveExample], List[str]]:
    """Examples (of every input file, in order) and the ``file:line`` of skipped lines, each example
    checked by :func:`check_examples`. ``source`` … ``categories`` are the files of ``--format
    plain``; ``inputs`` … ``target_lang`` locate a published set."""
    if fmt not in FORMATS:
        raise ContrastiveInputError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    plain_files = source or reference or contrastive or context or categories
    if fmt == "plain":
        if inputs or text_dir or source_lang or target_lang:
            raise ContrastiveInputError("--format plain reads --source, --reference, --contrastive (--context, "
                                        "--categories); --input, --text-dir and the languages are for published sets")
        if not (source and reference):
            raise ContrastiveInputError("--format plain needs --source, --reference and --contrastive")
        examples = read_contrastive_set(source, reference, contrastive, context, categories)
        check_examples(examples)
        return examples, []
    if plain_files:
        raise ContrastiveInputError(f"--source, --reference, --contrastive, --context and --categories are for "
                                    f"--format plain; --format {fmt} reads --input")
    if not inputs:
        raise ContrastiveInputError(f"--format {fmt} needs --input (the set's file)")
    if text_dir is not None and fmt in ("discevalmt", "scat"):
        raise ContrastiveInputError(f"--text-dir is not used by --format {fmt}: its --input holds all the text")
    if (source_lang or target_lang) and fmt not in DEFAULT_LANGS:
        raise ContrastiveInputError(f"--source-lang / --target-lang are not used by --format {fmt}")
    src, tgt = DEFAULT_LANGS.get(fmt, (None, None))
    src, tgt = source_lang or src, target_lang or tgt
    examples: List[ContrastiveExample] = []
    skipped: List[str] = []
    for path in inputs:
        if fmt == "contrapro":
            examples.extend(read_contrapro(path, text_dir, src, tgt))
        elif fmt == "discevalmt":
            examples.extend(read_discevalmt(path))
        elif fmt == "voita":
            examples.extend(read_voita(path, text_dir))
        else:
            found, missed = read_scat(path, src, tgt)
            examples.extend(found)
            skipped.extend(missed)
    if not examples:
        raise ContrastiveInputError(f"no contrastive example in {', '.join(inputs)}")
    check_examples(examples)
    return examples, skipped
