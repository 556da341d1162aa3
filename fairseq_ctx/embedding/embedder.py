"""Embedding text with a trained ``multilingual_embedding`` model (Li 2021 ch. 4): one float32 row
per line, batched by token count, streamed into a memory-mapped ``.npy`` so that memory stays
constant in the number of lines (the file is read in chunks, each chunk sorted by length).
Output order = input order. Input that is mostly ``<unk>`` (another script, or --spm left out) is
warned about, naming the file."""
import itertools
from typing import Iterator, List, Optional

import numpy as np
import torch
from fairseq.data import data_utils

from fairseq_ctx.core.atomic_output import atomic_path, reserve_space
from fairseq_ctx.core.progress import progress
from fairseq_ctx.core.sentencepiece_codec import SentencePieceCodec
from fairseq_ctx.core.text_input import utf8_lines
from fairseq_ctx.core.tool_loading import DEFAULT_CHECKPOINT_FILE, load_models
from fairseq_ctx.core.unknown_tokens import UnknownTokenCheck


def token_batches(lengths: List[int], max_tokens: int) -> Iterator[List[int]]:
    """Indices grouped so that batch size × longest length stays within ``max_tokens``."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batch: List[int] = []
    for index in order:
        if batch and (len(batch) + 1) * lengths[index] > max_tokens:
            yield batch
            batch = []
        batch.append(index)
    if batch:
        yield batch


class Embedder:
    """A trained multilingual_embedding model turning text lines into embeddings."""

    def __init__(self, checkpoint: str, lang: str, data: Optional[str] = None, spm: Optional[str] = None,
                 max_doc_tokens: int = 750, cpu: bool = True, checkpoint_file: str = DEFAULT_CHECKPOINT_FILE):
        models, _, self.task = load_models(checkpoint, ["multilingual_embedding"], "fairseq-ctx-embed",
                                           checkpoint_file=checkpoint_file, data=data, cpu=cpu)
        self.task.check_language(lang)
        self.model = models[0]
        self.use_cuda = next(self.model.parameters()).is_cuda
        self.max_doc_tokens = max_doc_tokens
        self.spm = SentencePieceCodec(spm) if spm else None

    @classmethod
    def from_model(cls, model, task, max_doc_tokens: int = 750) -> "Embedder":
        """Wrap an in-memory model (benchmarks, tests) instead of loading a checkpoint."""
        embedder = cls.__new__(cls)
        embedder.model, embedder.task, embedder.use_cuda = model.eval(), task, False
        embedder.max_doc_tokens, embedder.spm = max_doc_tokens, None
        return embedder

    def encode(self, line: str) -> torch.Tensor:
        line = self.spm.encode(line) if self.spm is not None else line.strip()
        return self.task.encode_line(line, self.max_doc_tokens)

    @torch.no_grad()
    def embed_tokens(self, tokens: List[torch.Tensor]) -> torch.Tensor:
        pad = self.task.source_dictionary.pad()
        src = data_utils.collate_tokens(tokens, pad, left_pad=False)
        lengths = torch.LongTensor([t.numel() for t in tokens])
        if self.use_cuda:
            src, lengths = src.cuda(), lengths.cuda()
        return self.model.embed(src, lengths).float().cpu()

    def embed_lines(self, lines: List[str], max_tokens: int, unknown: Optional[UnknownTokenCheck] = None) -> np.ndarray:
        """One row per line; ``unknown`` counts the lines' tokens (without the tag) and warns, before
        embedding, when they are mostly ``<unk>``."""
        tokens = [self.encode(line) for line in lines]
        if unknown is not None:
            for line_tokens in tokens:
                unknown.add(line_tokens[1:])
            unknown.check()
        rows = np.zeros((len(lines), self.dim), dtype=np.float32)
        for batch in token_batches([t.numel() for t in tokens], max_tokens):
            rows[batch] = self.embed_tokens([tokens[i] for i in batch]).numpy()
        return rows

    @property
    def dim(self) -> int:
        return int(self.embed_tokens([self.encode("")]).shape[-1])


def unknown_tokens_fix(embedder: Embedder) -> str:
    if embedder.spm is None:
        return ("pass the sentencepiece model the training data was segmented with (--spm MODEL), or text tokenized "
                "as the training data was")
    return "the text is in another language or script than the model was trained on for this --lang"


def embed_file(embedder: Embedder, input_path: str, output_path: str, max_tokens: int, chunk_lines: int) -> int:
    """Embed every line of ``input_path`` (read as :mod:`~fairseq_ctx.core.text_input` reads text)
    into the .npy ``output_path``; returns the line count. The file is written atomically, its
    disk space reserved before the first row (a full disk is an error naming it, not a SIGBUS of
    the memory map). A warning names the input when its first chunk is mostly ``<unk>``."""
    with open(input_path, "rb") as handle:
        total = sum(1 for _ in utf8_lines(handle, input_path))
    unknown = UnknownTokenCheck(embedder.task.source_dictionary, input_path, unknown_tokens_fix(embedder))
    with atomic_path(output_path) as temporary:
        out = np.lib.format.open_memmap(temporary, mode="w+", dtype=np.float32, shape=(total, embedder.dim))
        reserve_space(temporary, output_path)
        start = 0
        with open(input_path, "rb") as handle, progress(total=total, desc="embed", unit="line") as bar:
            lines = utf8_lines(handle, input_path)
            while True:
                chunk = list(itertools.islice(lines, chunk_lines))
                if not chunk:
                    break
                out[start:start + len(chunk)] = embedder.embed_lines(chunk, max_tokens, unknown)
                start += len(chunk)
                bar.update(len(chunk))
        out.flush()
        del out
    return total
