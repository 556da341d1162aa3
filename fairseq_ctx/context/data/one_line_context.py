"""Sets that give each example's preceding sentences on one line, in the document layout of the
``context_translation`` task.

SCAT (Yin et al., 2021) ships ``highlighted.{split}.context.{en,fr}`` next to
``highlighted.{split}.{en,fr}``; the text extractions of ContraPro (Müller et al., 2018) and
other contextual sets are laid out the same way: line i of a context file holds the sentences
before example i, on one line. Here every example becomes a document of two sentences, its context
line (kept as one segment) then its sentence, or of its sentence alone when the source or the
target side has no context. The output is what fairseq-ctx-prepare-docs writes for documents,
``PREFIX.{src,tgt}`` (one sentence per line) and ``PREFIX.docids`` (the document of each line),
plus ``PREFIX.sentence_ids``: the line (0-based) of each example's sentence, to take its
translation from a fairseq-generate output. A model trained with ``--context-size 1`` (and
``--target-context-size 1``) reads each sentence with its context line.
"""
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Tuple

from fairseq_ctx.core.output_paths import check_outputs
from fairseq_ctx.core.atomic_output import atomic_output, write_text
from fairseq_ctx.core.text_input import read_utf8_lines


class OneLineContextError(ValueError):
    """Context and sentence files that do not line up, or an example without its sentence."""


@dataclass(frozen=True)
class OneLineExample:
    """One example: its source and target sentence and, on one line each, the sentences before it
    on each side ('' = none)."""

    source_context: str
    source: str
    target_context: str
    target: str

    def document(self) -> List[Tuple[str, str]]:
        """The (source, target) sentence pairs of the example's document."""
        context = [(self.source_context, self.target_context)] if self.source_context and self.target_context else []
        return [*context, (self.source, self.target)]


def collapse_spaces(text: str) -> str:
    return " ".join(text.split())


def read_examples(source_context: str, source: str, target_context: str, target: str,
                  clean: Callable[[str], str] = collapse_spaces) -> List[OneLineExample]:
    """The examples of four line-aligned files, every text passed through ``clean`` (default:
    runs of spaces collapsed). Files of different lengths, or an example whose sentence is empty,
    raise :class:`OneLineContextError` naming the files and counts, or the file and line."""
    paths = {"source context": source_context, "source": source, "target context": target_context, "target": target}
    columns: Dict[str, List[str]] = {name: read_utf8_lines(path) for name, path in paths.items()}
    counts = {paths[name]: len(lines) for name, lines in columns.items()}
    if len(set(counts.values())) > 1:
        listing = ", ".join(f"{path}: {count} lines" for path, count in counts.items())
        raise OneLineContextError(f"the context and sentence files must have one line per example, but {listing}")
    examples = []
    for number, texts in enumerate(zip(*columns.values()), start=1):
        example = OneLineExample(*(clean(text) for text in texts))
        for name in ("source", "target"):
            if not getattr(example, name):
                raise OneLineContextError(f"{paths[name]}:{number}: empty sentence; every example needs its "
                                          f"{name} sentence (an empty line is allowed in the context files only)")
        examples.append(example)
    if not examples:
        raise OneLineContextError(f"{source} holds no example")
    return examples


def write_documents(examples: List[OneLineExample], out_prefix: str, source_lang: str, target_lang: str,
                    doc_prefix: str = "doc") -> List[int]:
    """Write ``OUT_PREFIX.{source_lang,target_lang,docids,sentence_ids}``; returns the line of each
    example's sentence."""
    directory = os.path.dirname(os.path.abspath(out_prefix))
    os.makedirs(directory, exist_ok=True)
    sentence_ids: List[int] = []
    line = 0
    with atomic_output(f"{out_prefix}.{source_lang}") as src, atomic_output(f"{out_prefix}.{target_lang}") as tgt, \
            atomic_output(f"{out_prefix}.docids") as docids:
        for number, example in enumerate(examples):
            for source, target in example.document():
                src.write(source + "\n")
                tgt.write(target + "\n")
                docids.write(f"{doc_prefix}{number}\n")
                line += 1
            sentence_ids.append(line - 1)
    write_text(f"{out_prefix}.sentence_ids", "".join(f"{number}\n" for number in sentence_ids))
    return sentence_ids


def output_paths(out_prefix: str, source_lang: str, target_lang: str) -> Dict[str, str]:
    return {f"--out-prefix + {name}": f"{out_prefix}.{name}"
            for name in (source_lang, target_lang, "docids", "sentence_ids")}


def convert(source_context: str, source: str, target_context: str, target: str, out_prefix: str,
            source_lang: str, target_lang: str, doc_prefix: str = "doc",
            clean: Callable[[str], str] = collapse_spaces) -> Tuple[int, int]:
    """Read the four files and write the document layout; returns (examples, sentence lines).
    An output that would overwrite an input is refused first."""
    check_outputs(output_paths(out_prefix, source_lang, target_lang),
                  {"--src-context": source_context, "--src-sentences": source, "--tgt-context": target_context,
                   "--tgt-sentences": target})
    examples = read_examples(source_context, source, target_context, target, clean)
    sentence_ids = write_documents(examples, out_prefix, source_lang, target_lang, doc_prefix)
    return len(examples), sentence_ids[-1] + 1
