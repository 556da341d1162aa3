"""Parallel plain-text documents (blank line between documents) to the line-aligned
``PREFIX.SRC``, ``PREFIX.TGT`` and ``PREFIX.docids`` that fairseq-preprocess and the
``context_translation`` task read."""
import os
from typing import List

from fairseq_ctx.core.output_paths import check_outputs
from fairseq_ctx.core.atomic_output import atomic_output
from fairseq_ctx.core.text_input import read_utf8_lines


def read_documents(path: str) -> List[List[str]]:
    docs: List[List[str]] = [[]]
    for line in read_utf8_lines(path):
        line = line.strip()
        if line:
            docs[-1].append(line)
        elif docs[-1]:
            docs.append([])
    return [d for d in docs if d]


def prepare(src_docs: str, tgt_docs: str, out_prefix: str, src_lang: str, tgt_lang: str, doc_prefix: str) -> int:
    """Write the three files; raise ValueError naming the document that does not line up, or an
    output that is one of the inputs (``--out-prefix`` equal to the inputs' prefix) or another output."""
    outputs = {"--out-prefix + --src-lang": f"{out_prefix}.{src_lang}", "--out-prefix + --tgt-lang": f"{out_prefix}.{tgt_lang}",
               "--out-prefix + docids": f"{out_prefix}.docids"}
    check_outputs(outputs, {"--src-docs": src_docs, "--tgt-docs": tgt_docs})
    source, target = read_documents(src_docs), read_documents(tgt_docs)
    if not source:
        raise ValueError(f"{src_docs} contains no sentences")
    if len(source) != len(target):
        raise ValueError(f"{src_docs} has {len(source)} documents but {tgt_docs} has {len(target)}")
    for number, (s, t) in enumerate(zip(source, target), start=1):
        if len(s) != len(t):
            raise ValueError(
                f"document {number}: {len(s)} sentences in {src_docs} but {len(t)} in {tgt_docs}"
            )
    os.makedirs(os.path.dirname(os.path.abspath(out_prefix)), exist_ok=True)
    with atomic_output(f"{out_prefix}.{src_lang}") as fs, atomic_output(f"{out_prefix}.{tgt_lang}") as ft, \
            atomic_output(f"{out_prefix}.docids") as fd:
        for number, (s, t) in enumerate(zip(source, target)):
            for src_line, tgt_line in zip(s, t):
                fs.write(src_line + "\n")
                ft.write(tgt_line + "\n")
                fd.write(f"{doc_prefix}{number}\n")
    return sum(len(s) for s in source)
