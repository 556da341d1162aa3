"""The published small-Transformer baseline of the Multi30k recipes and of the SCAT recipe's
stage 1: Transformer-tiny of Wu et al. (2021, "Good for Misconceived Reasons", ACL, §4, and the
README-baseline of their repository LividWo/Revisit-MMT): 4+4 layers of dimension 128, FFN 256, 4
heads, shared embeddings, dropout 0.3, Adam with lr 5e-3, inverse_sqrt with 2000 warmup updates,
fairseq's default clip-norm 25 of that version, max-tokens 4096 on 2 GPUs per update, and the
average of the last 10 epoch checkpoints as the tested model. One place, so that both recipes
train the same baseline."""
from dataclasses import dataclass


@dataclass(frozen=True)
class TransformerTiny:
    """Wu et al. (2021)'s Transformer-tiny settings (their ``transformer_tiny`` arch and training command)."""

    embed_dim: int = 128
    ffn_dim: int = 256
    layers: int = 4
    heads: int = 4
    dropout: float = 0.3
    lr: float = 5e-3
    warmup_updates: int = 2000
    clip_norm: float = 25.0
    max_tokens: int = 4096
    gpus: int = 2  # batches per update: --update-freq 2 with --max-tokens 4096 on one device
    average_last: int = 10
    source: str = ("Wu et al. (2021), Transformer-tiny (github.com/LividWo/Revisit-MMT, README-baseline.md): 41.02 BLEU "
                   "on Multi30k test_2016_flickr en→de")


TINY = TransformerTiny()
