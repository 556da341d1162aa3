"""The one sentencepiece helper: plain text to the space-separated pieces a model was trained on,
and back (``--spm`` of the tools, ``spm_model`` of the hub)."""
import os
from typing import List


class SentencePieceCodec:
    """A sentencepiece model (Kudo and Richardson 2018) applied to whole lines."""

    def __init__(self, model_file: str) -> None:
        if not os.path.isfile(model_file):
            raise FileNotFoundError(f"sentencepiece model {model_file} does not exist; pass the .model file "
                                    f"written by spm_train (--spm)")
        import sentencepiece

        self.processor = sentencepiece.SentencePieceProcessor(model_file=model_file)

    def encode(self, line: str) -> str:
        return " ".join(self.processor.encode(line.strip(), out_type=str))

    def decode(self, pieces: str) -> str:
        tokens: List[str] = pieces.split()
        return self.processor.decode(tokens)
