"""A warning when the text given to a model is mostly ``<unk>``: text not segmented like the
training data (a sentencepiece model left out) or in another language or script gives output
that looks like a translation or an embedding but is not one."""
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

UNKNOWN_SHARE = 0.5


class UnknownTokenCheck:
    """Counts the tokens and ``<unk>`` tokens of the encoded input (``</s>`` not counted) and warns
    once, naming ``source`` and the share, when more than :data:`UNKNOWN_SHARE` are ``<unk>``.
    ``fix`` says what to do (e.g. "pass --spm MODEL ...")."""

    def __init__(self, dictionary, source: str, fix: str):
        self.unk, self.eos = dictionary.unk(), dictionary.eos()
        self.source, self.fix = source, fix
        self.tokens = self.unknown = 0
        self.warned = False

    def add(self, tokens: "torch.Tensor") -> None:
        words = tokens[tokens.ne(self.eos)]
        self.tokens += words.numel()
        self.unknown += int(words.eq(self.unk).sum())

    @property
    def share(self) -> float:
        return self.unknown / self.tokens if self.tokens else 0.0

    def check(self) -> bool:
        """Warn (once) when the input so far is mostly ``<unk>``; whether it is."""
        mostly = self.share > UNKNOWN_SHARE
        if mostly and not self.warned:
            self.warned = True
            logger.warning(f"{self.source}: {100 * self.share:.1f}% of its first {self.tokens} tokens are <unk> "
                           f"(not in the model's dictionary), so the output means nothing; the text is not "
                           f"segmented or written like the training data: {self.fix}")
        return mostly
