"""The consistency test sets of Voita et al. (2019) (github.com/lena-voita/good-translation-
wrong-in-context), English→Russian: deixis, lexical cohesion, ellipsis (inflection, VP).

``consistency_testsets/{name}.json`` is a list of groups ``{"src": ..., "dst": [candidates],
"true_ind": index of the correct candidate, "ctx_dist": 1-3}``; every sentence is 4 sentences
joined by ``_eos`` (3 context, then the current one). ``consistency_testsets/scoring_data/
{name}.src`` / ``.dst`` hold the same text flattened, one line per candidate (the form to
preprocess for a model): with ``text_dir`` the text is read from there, the JSON still gives
the groups. Every candidate carries its own target context (the candidates differ in it for
deixis and lexical cohesion). Breakdowns: ``phenomenon`` (the set's name without
``_dev``/``_test``) and ``distance`` (``ctx_dist``, as in the published ``evaluate_consistency.py``).
"""
import os
from typing import Any, List, Optional, Tuple

from fairseq_ctx.context.contrastive.example import (Candidate, ContrastiveExample, ContrastiveInputError,
                                                     check_same_length, is_integer, load_json, read_lines)

SEPARATOR = "_eos"


def split_context(line: str) -> Tuple[str, List[str]]:
    """``c1 _eos c2 _eos c3 _eos current`` → (current, [c3, c2, c1]) (context nearest first)."""
    sentences, words = [], []
    for word in line.split():
        if word == SEPARATOR:
            sentences.append(" ".join(words))
            words = []
        else:
            words.append(word)
    sentences.append(" ".join(words))
    return sentences[-1], sentences[-2::-1]


def check_group(json_path: str, number: int, group: Any) -> None:
    where = f"{json_path}: group {number + 1}"
    if not (isinstance(group, dict) and isinstance(group.get("src"), str) and isinstance(group.get("dst"), list)
            and len(group["dst"]) >= 2 and all(isinstance(d, str) for d in group["dst"])):
        raise ContrastiveInputError(f"{where}: needs 'src' (a string) and 'dst' (a list of at least two candidate "
                                    f"strings)")
    index = group.get("true_ind")
    if not is_integer(index) or not 0 <= index < len(group["dst"]):
        raise ContrastiveInputError(f"{where}: 'true_ind' must index one of its {len(group['dst'])} candidates, "
                                    f"got {index!r}")


JSON_KINDS = {dict: "object", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


def read_voita(json_path: str, text_dir: Optional[str] = None) -> List[ContrastiveExample]:
    """Read one consistency test set; with ``text_dir``, the text from ``{text_dir}/{name}.src``
    and ``.dst`` (one line per candidate, groups in the JSON's order)."""
    groups = load_json(json_path)
    if not isinstance(groups, list):
        raise ContrastiveInputError(f"{json_path}: expected a JSON list of groups (Voita et al.'s "
                                    f"consistency_testsets/*.json), found a JSON {JSON_KINDS.get(type(groups), 'value')}")
    if not groups:
        raise ContrastiveInputError(f"{json_path}: the JSON list holds no groups, so there is nothing to score; give "
                                    f"a consistency test set of Voita et al. (consistency_testsets/*.json), whose "
                                    f"groups each list a source 'src', candidates 'dst' and 'true_ind'")
    for number, group in enumerate(groups):
        check_group(json_path, number, group)
    name = os.path.splitext(os.path.basename(json_path))[0]
    phenomenon = name.rsplit("_", 1)[0] if name.endswith(("_dev", "_test")) else name
    sizes = [len(group["dst"]) for group in groups]
    if text_dir is not None:
        src_path, dst_path = (os.path.join(text_dir, f"{name}.{side}") for side in ("src", "dst"))
        sources, targets = read_lines(src_path), read_lines(dst_path)
        lines = check_same_length({src_path: sources, dst_path: targets}, "the scoring_data files")
        if lines != sum(sizes):
            raise ContrastiveInputError(f"{src_path} has {lines} lines but {json_path} has {sum(sizes)} candidates "
                                        f"in {len(groups)} groups; use the scoring_data files of this test set")
    else:
        src_path = json_path
        sources = [group["src"] for group, size in zip(groups, sizes) for _ in range(size)]
        targets = [candidate for group in groups for candidate in group["dst"]]
    examples, first = [], 0
    for group, size in zip(groups, sizes):
        lines = range(first, first + size)
        for line in lines:
            if sources[line] != sources[first]:
                raise ContrastiveInputError(f"{src_path}:{line + 1}: the source differs from line {first + 1} of the "
                                            f"same group (the JSON's group sizes do not fit these files)")
        candidates = [Candidate(*split_context(targets[line])) for line in lines]
        correct = candidates.pop(group["true_ind"])
        source, source_context = split_context(sources[first])
        labels = {"phenomenon": phenomenon}
        if "ctx_dist" in group:
            labels["distance"] = str(group["ctx_dist"])
        origin = f"{src_path}:{first + 1}" if text_dir is not None else f"{json_path}: group {len(examples) + 1}"
        examples.append(ContrastiveExample(source, source_context, correct, candidates, labels, origin=origin))
        first = lines.stop
    return examples
