"""The one sentencepiece helper: plain text to the space-separated pieces a model was trained on,
and back (``--spm`` of the tools, ``spm_model`` of the hub)."""
import os
from typing import List


class SentencePieceModelError(ValueError):
    """A file given as a sentencepiece model that is not one."""


class SentencePieceCodec:
    """A sentencepiece model (Kudo and Richardson 2018) applied to whole lines."""

    def __init__(self, model_file: str) -> None:
        if not os.path.isfile(model_file):
            raise FileNotFoundError(f"sentencepiece model {model_file} does not exist; pass the .model file "
                                    f"written by spm_train (--spm)")
        import sentencepiece

        try:
            self.processor = sentencepiece.SentencePieceProcessor(model_file=model_file)
        except RuntimeError as err:  # sentencepiece's only error for a file it cannot parse
            raise SentencePieceModelError(
                f"sentencepiece model {model_file} is not a sentencepiece model ({err}); pass the .model file written "
                f"by spm_train (--spm), not its .vocab or a text file") from None

    def encode(self, line: str) -> str:
        return " ".join(self.processor.encode(line.strip(), out_type=str))

    def decode(self, pieces: str) -> str:
        tokens: List[str] = pieces.split()
        return self.processor.decode(tokens)
