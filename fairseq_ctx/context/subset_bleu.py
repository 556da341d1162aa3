"""BLEU on the helpful-context and unhelpful-context subsets of a test set and their gap
(Yun 2022, Table 3.5): unhelpful − helpful; a small gap means the model exploits helpful context
as well as it translates sentences whose context does not help."""
from typing import Dict, List

import sacrebleu

from fairseq_ctx.core.scoring import read_generate_output


def read_ids(path: str, known: Dict[int, str]) -> List[int]:
    ids = []
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            line = line.strip()
            if not line:
                continue
            if not line.isdigit() or int(line) not in known:
                raise ValueError(f"{path}:{line_no}: '{line}' is not a sentence id of the generate output "
                                 f"(ids 0..{max(known)})")
            ids.append(int(line))
    if not ids:
        raise ValueError(f"{path} lists no sentence ids")
    return ids


def subset_bleu(generate_output: str, helpful: str, unhelpful: str) -> Dict[str, float]:
    hyps, refs = read_generate_output(generate_output)
    if not hyps:
        raise ValueError(f"{generate_output} has no H- lines; is it fairseq-generate output?")
    result = {}
    for name, path in (("helpful", helpful), ("unhelpful", unhelpful)):
        ids = read_ids(path, hyps)
        result[f"bleu_{name}"] = sacrebleu.corpus_bleu([hyps[i] for i in ids], [[refs.get(i, "") for i in ids]]).score
        result[f"{name}_sentences"] = len(ids)
    result["gap"] = result["bleu_unhelpful"] - result["bleu_helpful"]
    return result
