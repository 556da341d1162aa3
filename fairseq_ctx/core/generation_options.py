"""Decoder sizes checked before anything is decoded. fairseq accepts ``--beam 0``, an n-best
list longer than the beam, negative length limits or a maximum length of zero tokens and then
decodes nothing, fails deep inside the search (e.g. ``AssertionError: 200 < 200``) or runs with
a silently different setting; our tasks (hence fairseq-generate, fairseq-interactive, the hub and
the tools) refuse them with the option and the fix."""
from typing import List

from fairseq.dataclass.configs import GenerationConfig

DEFAULTS = GenerationConfig()


class GenerationOptionError(ValueError):
    """A decoder size that cannot decode."""


def generation_problems(beam: int, nbest: int = 1, max_len_a: float = 0.0, max_len_b: int = 200, min_len: int = 1,
                        match_source_len: bool = False) -> List[str]:
    """What is wrong with these decoder sizes (empty when nothing is)."""
    problems = []
    if beam < 1:
        problems.append(f"--beam {beam} must be at least 1 (1 is greedy search)")
    if nbest < 1 or (beam >= 1 and nbest > beam):
        problems.append(f"--nbest {nbest} must be between 1 and --beam {beam}")
    if max_len_a < 0 or max_len_b < 0:
        problems.append(f"--max-len-a {max_len_a} and --max-len-b {max_len_b} must not be negative (the longest "
                        f"output is a * source length + b tokens)")
    elif max_len_a == 0 and max_len_b < 1 and not match_source_len:
        problems.append(f"--max-len-a 0 with --max-len-b {max_len_b} allows no output token; give --max-len-b of at "
                        f"least 1 (fairseq's default is 200), or --max-len-a > 0")
    if min_len < 0:
        problems.append(f"--min-len {min_len} must not be negative")
    return problems


def check_generation_options(args) -> None:
    """Raise :class:`GenerationOptionError` for the decoder sizes of ``args`` (fairseq's generation
    options, or the Namespace a caller builds; what it leaves out takes fairseq's defaults), unless
    it scores given references (``score_reference``), which uses no search."""
    if getattr(args, "score_reference", False):
        return
    values = {name: getattr(args, name, getattr(DEFAULTS, name))
              for name in ("beam", "nbest", "max_len_a", "max_len_b", "min_len", "match_source_len")}
    problems = generation_problems(**values)
    if problems:
        raise GenerationOptionError("; ".join(problems))
