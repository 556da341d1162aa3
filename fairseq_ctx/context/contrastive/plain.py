"""Plain parallel files, one example per line (``--format plain``): the layout
``fairseq-ctx-make-contrastive`` writes and any set once split into files.

    --source src.txt --reference ref.txt --contrastive wrong1.txt [wrong2.txt ...]
    [--context ctx0.txt [ctx1.txt ...]]   nearest previous source sentence first; empty line = none
    [--categories cat.txt]                one label per line (breakdown ``category``)

An empty line in a contrastive file means the example has no such variant. The files carry
no target-side context."""
from typing import List, Optional, Sequence

from fairseq_ctx.context.contrastive.example import (Candidate, ContrastiveExample, ContrastiveInputError,
                                                     check_same_length, read_lines)


def read_contrastive_set(source: str, reference: str, contrastive: Sequence[str], context: Sequence[str] = (),
                         categories: Optional[str] = None) -> List[ContrastiveExample]:
    """Read the parallel files; raise :class:`ContrastiveInputError` naming every file and its
    line count when they differ, or the line of an example without any contrastive target."""
    if not contrastive:
        raise ContrastiveInputError("give at least one --contrastive file")
    paths = {"--source": [source], "--reference": [reference], "--contrastive": list(contrastive),
             "--context": list(context), "--categories": [categories] if categories else []}
    columns = {f"{flag} {path}": read_lines(path) for flag, files in paths.items() for path in files}
    count = check_same_length(columns, "the contrastive files")
    examples = []
    for line_no in range(count):
        def column(flag: str, path: str) -> str:
            return columns[f"{flag} {path}"][line_no]

        variants = [v for v in (column("--contrastive", p) for p in contrastive) if v.strip()]
        if not variants:
            raise ContrastiveInputError(f"line {line_no + 1}: no contrastive target in {', '.join(contrastive)}")
        examples.append(ContrastiveExample(
            source=column("--source", source),
            source_context=[c for c in (column("--context", p) for p in context) if c.strip()],
            correct=Candidate(column("--reference", reference)),
            contrastive=[Candidate(v) for v in variants],
            labels={"category": column("--categories", categories).strip()} if categories else {},
            origin=f"{source}:{line_no + 1}",
            origins={"source": f"{source}:{line_no + 1}", "correct": f"{reference}:{line_no + 1}"},
        ))
    return examples
