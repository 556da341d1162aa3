"""``fairseq-ctx-embed``: one float32 embedding row per input line, streamed to a .npy file.

Memory stays constant in the number of lines: the file is read in chunks, each chunk is
sorted by length and batched by token count, and rows are written into a memory-mapped .npy
whose shape is known from a first counting pass. Output order = input order.
"""
import argparse
import itertools
from typing import Iterator, List

import numpy as np
import torch
from fairseq.data import data_utils

import fairseq_ctx  # noqa: F401  (registers the task and archs)
from fairseq_ctx.cli.tool_args import refuse_overwriting
from fairseq_ctx.core.checkpoint_loading import load_ensemble
from fairseq_ctx.core.output_paths import split_files


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

    def __init__(self, path: str, lang: str, data: str = None, spm: str = None, max_doc_tokens: int = 750,
                 cpu: bool = True):
        overrides = {"data": data} if data else None
        models, _, self.task = load_ensemble(path, ["multilingual_embedding"], "fairseq-ctx-embed --path", overrides)
        self.task.check_language(lang)
        self.model = models[0].eval()
        self.use_cuda = torch.cuda.is_available() and not cpu
        if self.use_cuda:
            self.model.cuda()
        self.max_doc_tokens = max_doc_tokens
        self.spm = None
        if spm:
            import sentencepiece

            self.spm = sentencepiece.SentencePieceProcessor(model_file=spm)

    @classmethod
    def from_model(cls, model, task, max_doc_tokens: int = 750) -> "Embedder":
        """Wrap an in-memory model (benchmarks, tests) instead of loading a checkpoint."""
        embedder = cls.__new__(cls)
        embedder.model, embedder.task, embedder.use_cuda = model.eval(), task, False
        embedder.max_doc_tokens, embedder.spm = max_doc_tokens, None
        return embedder

    def encode(self, line: str) -> torch.Tensor:
        line = line.strip()
        if self.spm is not None:
            line = " ".join(self.spm.encode(line, out_type=str))
        return self.task.encode_line(line, self.max_doc_tokens)

    @torch.no_grad()
    def embed_tokens(self, tokens: List[torch.Tensor]) -> torch.Tensor:
        pad = self.task.source_dictionary.pad()
        src = data_utils.collate_tokens(tokens, pad, left_pad=False)
        lengths = torch.LongTensor([t.numel() for t in tokens])
        if self.use_cuda:
            src, lengths = src.cuda(), lengths.cuda()
        return self.model.embed(src, lengths).float().cpu()

    def embed_lines(self, lines: List[str], max_tokens: int) -> np.ndarray:
        tokens = [self.encode(line) for line in lines]
        rows = np.zeros((len(lines), self.dim), dtype=np.float32)
        for batch in token_batches([t.numel() for t in tokens], max_tokens):
            rows[batch] = self.embed_tokens([tokens[i] for i in batch]).numpy()
        return rows

    @property
    def dim(self) -> int:
        return int(self.embed_tokens([self.encode("")]).shape[-1])


def embed_file(embedder: Embedder, input_path: str, output_path: str, max_tokens: int, chunk_lines: int) -> int:
    with open(input_path, encoding="utf-8") as handle:
        total = sum(1 for _ in handle)
    out = np.lib.format.open_memmap(output_path, mode="w+", dtype=np.float32, shape=(total, embedder.dim))
    start = 0
    with open(input_path, encoding="utf-8") as handle:
        while True:
            chunk = list(itertools.islice(handle, chunk_lines))
            if not chunk:
                break
            out[start:start + len(chunk)] = embedder.embed_lines(chunk, max_tokens)
            start += len(chunk)
    out.flush()
    del out
    return total


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--path", required=True, help="checkpoint of a multilingual_embedding model")
    parser.add_argument("--lang", required=True, help="language of the input (must be one the model was trained on)")
    parser.add_argument("--input", required=True, help="text file, one sentence or document per line "
                        "(tokenized/BPE'd like the training data unless --spm is given)")
    parser.add_argument("--output", required=True, help="output .npy, shape (lines, d), float32")
    parser.add_argument("--spm", help="sentencepiece model applied to every line first")
    parser.add_argument("--data", help="data directory with the dictionary (default: the one in the checkpoint)")
    parser.add_argument("--max-tokens", type=int, default=12000, help="padded tokens per batch")
    parser.add_argument("--max-doc-tokens", type=int, default=750,
                        help="only the first N tokens of a line are embedded (SPEC §5: 750)")
    parser.add_argument("--chunk-lines", type=int, default=20000, help="lines read and sorted at a time")
    parser.add_argument("--cuda", action="store_true", help="embed on the GPU when one is available")
    args = parser.parse_args(argv)
    refuse_overwriting(parser, {"--output": args.output}, {
        "--input": args.input, "--path": args.path, "--spm": args.spm, "--data": split_files(args.data)})
    try:
        embedder = Embedder(args.path, args.lang, args.data, args.spm, args.max_doc_tokens, cpu=not args.cuda)
    except ValueError as err:
        parser.exit(2, f"fairseq-ctx-embed: error: {err}\n")
    count = embed_file(embedder, args.input, args.output, args.max_tokens, args.chunk_lines)
    print(f"embedded {count} lines of {args.input} -> {args.output}")


if __name__ == "__main__":
    main()
