"""Does HCE/HMCE's word-level context attention find the words that decide the pronoun?

SCAT (Yin et al., 2021) marks, per example, the context words human translators used to choose
the French pronoun (``<hon>…<hoff>``). HCE/HMCE read a context sentence through the weights α of
its self-attentive weighted sum s = Σ_j α_j e_j (Yun (2022), eq. 3.15–3.16), the only place
where the model weighs the words of its context one against another. Per example this module
measures the mass of α on the pieces of the marked words and the mass a uniform α would put
there (their share of the sentence's positions, ``</s>`` included); attention that follows the
translators puts more than the uniform share there.

SCAT marks its supporting words in the French context (every mark of SCAT valid) and, on some
training lines, in the English one: ``side="target"`` reads the French context line as a model
built with ``--target-context-size`` ≥ 1 reads it (the lower level over the target embeddings),
``side="source"`` the English one as any hce/hmce reads it. The context line is cut to the task's
``--max-context-tokens`` exactly as in training.
"""
import math
from dataclasses import asdict, dataclass
from statistics import mean, stdev
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from fairseq.data import data_utils

from fairseq_ctx.context.contrastive.example import ContrastiveInputError
from fairseq_ctx.context.contrastive.scat import MarkedLine
from fairseq_ctx.context.data.context_batch import context_sentence


@dataclass(frozen=True)
class SupportingAttention:
    """α on one context line: ``mass`` on the pieces of the marked words, ``uniform`` the share of
    the line's positions they hold, ``top_marked`` whether the largest weight is on one of them."""

    origin: str
    mass: float
    uniform: float
    top_marked: bool


def piece_flags(line: MarkedLine, encode: Optional[Callable[[str], str]]) -> List[bool]:
    """Per piece of ``line.text`` as ``encode`` (sentencepiece, line → space-separated pieces;
    None: the text is already in the model's tokens) segments it, whether it belongs to a marked
    word. Sentencepiece segments whitespace words apart, so the line's pieces are its words'
    pieces one after another; a line where they are not is refused."""
    words = line.text.split()
    if encode is None:
        return list(line.marked)
    per_word = [encode(word).split() for word in words]
    if [piece for pieces in per_word for piece in pieces] != encode(line.text).split():
        raise ContrastiveInputError(f"{line.origin}: the model's segmentation of the line is not that of its words one "
                                    f"after another; the marks cannot be placed on its pieces")
    return [marked for marked, pieces in zip(line.marked, per_word) for _ in pieces]


def attention_of(weights: torch.Tensor, flags: Sequence[bool], origin: str) -> SupportingAttention:
    """``weights``: α over the line's positions (pieces, then ``</s>``); ``flags``: marked pieces."""
    marked = torch.zeros(weights.numel(), dtype=torch.bool)
    marked[: len(flags)] = torch.tensor(flags, dtype=torch.bool)
    weights = weights.double().cpu()
    return SupportingAttention(origin, float(weights[marked].sum()), marked.sum().item() / weights.numel(),
                               bool(marked[int(weights.argmax())]))


TIE = 1e-6  # a difference from the uniform share within float rounding counts as neither above nor below
CUT = "marked words beyond --max-context-tokens"
UNPLACEABLE = "segmentation not that of the words one after another"


@torch.no_grad()
def measure(translator, lines: Sequence[MarkedLine], side: str, batch_size: int = 32
            ) -> Tuple[List[SupportingAttention], Dict[str, List[str]]]:
    """α of ``translator``'s first model (a loaded hce/hmce, :class:`fairseq_ctx.context.hub.DocumentTranslator`)
    on every line, and the origins of the lines left out, by reason (:data:`CUT`, :data:`UNPLACEABLE`)."""
    from fairseq_ctx.context.modules.hierarchical_context_encoder import HierarchicalContextEncoder

    encoder = translator.models[0].encoder
    if not isinstance(encoder, HierarchicalContextEncoder):
        raise ValueError(f"the model's encoder is a {type(encoder).__name__}; the word weights α exist in hce/hmce only")
    if side == "target" and encoder.target_context is None:
        raise ValueError("side 'target' needs a model that reads the target context (--target-context-size >= 1); "
                         "this one reads the source side only: use side 'source'")
    dictionary = translator.tgt_dict if side == "target" else translator.src_dict
    embed = encoder.target_context.embed_tokens if side == "target" else None
    boc = translator.task.target_boc_index if side == "target" else translator.task.boc_index
    encode = translator.spm.encode if translator.spm is not None else None
    usable, left_out = [], {CUT: [], UNPLACEABLE: []}
    for line in lines:
        tokens = context_sentence(translator.encode(line.text, dictionary), boc, dictionary.eos(),
                                  translator.task.context_limit)[1:]
        try:
            flags = piece_flags(line, encode)[: tokens.numel() - 1]
        except ContrastiveInputError:
            left_out[UNPLACEABLE].append(line.origin)
            continue
        if any(flags):
            usable.append((line, tokens, flags))
        else:
            left_out[CUT].append(line.origin)
    results = []
    for start in range(0, len(usable), batch_size):
        batch = usable[start:start + batch_size]
        tokens = data_utils.collate_tokens([row for _, row, _ in batch], dictionary.pad()).to(translator.device)
        weights = encoder.context_word_weights(tokens, embed)
        results += [attention_of(row_weights[: row.numel()], flags, line.origin)
                    for (line, row, flags), row_weights in zip(batch, weights)]
    return results, left_out


def sign_test(above: int, below: int) -> float:
    """Two-sided exact sign test: the probability of a split at least this uneven when each
    example is above or below with probability 1/2 (ties dropped)."""
    n = above + below
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(above, below) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def summarize(results: Sequence[SupportingAttention]) -> Dict:
    """Mean mass on the marked words against the uniform share, their per-example difference
    (mean ± sd), how many examples are above / below the uniform share (by more than :data:`TIE`) with the sign test, and
    how often the largest weight is on a marked word."""
    gaps = [r.mass - r.uniform for r in results]
    above, below = sum(g > TIE for g in gaps), sum(g < -TIE for g in gaps)
    return {
        "examples": len(results),
        "mass": mean(r.mass for r in results),
        "uniform": mean(r.uniform for r in results),
        "gap_mean": mean(gaps),
        "gap_sd": stdev(gaps) if len(gaps) > 1 else 0.0,
        "above_uniform": above,
        "below_uniform": below,
        "sign_test_p": sign_test(above, below),
        "top_marked": sum(r.top_marked for r in results),
        "per_example": [asdict(r) for r in results],
    }


def format_summary(summary: Dict) -> str:
    return (f"α on the marked supporting words: {summary['mass']:.4f} (uniform share {summary['uniform']:.4f}; "
            f"difference {summary['gap_mean']:+.4f} ± {summary['gap_sd']:.4f}) over {summary['examples']} context "
            f"lines; above uniform in {summary['above_uniform']}, below in {summary['below_uniform']} "
            f"(sign test p = {summary['sign_test_p']:.3g}); largest weight on a marked word in "
            f"{summary['top_marked']}/{summary['examples']}")
