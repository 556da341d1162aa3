"""BLEU on the helpful-context and unhelpful-context subsets of a test set and their gap
(Yun 2022, Table 3.5): unhelpful − helpful; a small gap means the model exploits helpful context
as well as it translates sentences whose context does not help. The two id lists must be
disjoint, without repeats, and every listed sentence needs a hypothesis and a non-empty
reference in the generate output."""
from typing import Dict, List

import sacrebleu

from fairseq_ctx.core.generate_output import read_generate_output
from fairseq_ctx.core.scoring import check_references
from fairseq_ctx.core.text_input import read_utf8_lines


def read_ids(path: str, known: Dict[int, str]) -> List[int]:
    ids: Dict[int, int] = {}
    for line_no, line in enumerate(read_utf8_lines(path), start=1):
        line = line.strip()
        if not line:
            continue
        if not line.isdigit() or int(line) not in known:
            raise ValueError(f"{path}:{line_no}: '{line}' is not a sentence id of the generate output "
                             f"(ids 0..{max(known)})")
        if int(line) in ids:
            raise ValueError(f"{path}:{line_no}: sentence id {line} is listed again (first at line {ids[int(line)]}); "
                             f"a sentence counts once: remove the repeat")
        ids[int(line)] = line_no
    if not ids:
        raise ValueError(f"{path} lists no sentence ids")
    return list(ids)


def subset_bleu(generate_output: str, helpful: str, unhelpful: str) -> Dict[str, float]:
    hyps, refs = read_generate_output(generate_output)
    if not hyps:
        raise ValueError(f"{generate_output} has no H- lines; is it fairseq-generate output?")
    subsets = {"helpful": read_ids(helpful, hyps), "unhelpful": read_ids(unhelpful, hyps)}
    both = sorted(set(subsets["helpful"]) & set(subsets["unhelpful"]))
    if both:
        raise ValueError(f"{len(both)} sentence ids are in both --helpful {helpful} and --unhelpful {unhelpful} "
                         f"(first: {both[0]}); the context of a sentence either helps or does not: give disjoint sets")
    result = {}
    for name, ids in subsets.items():
        missing = [i for i in ids if i not in refs]
        if missing:
            raise ValueError(f"{generate_output} has no T- line (reference) for {len(missing)} of the "
                             f"{len(ids)} --{name} sentences (first: sentence {missing[0]}); generate on a split "
                             f"that has targets")
        references = [refs[i] for i in ids]
        check_references(references, generate_output, ids)
        result[f"bleu_{name}"] = sacrebleu.corpus_bleu([hyps[i] for i in ids], [references]).score
        result[f"{name}_sentences"] = len(ids)
    result["gap"] = result["bleu_unhelpful"] - result["bleu_helpful"]
    return result
