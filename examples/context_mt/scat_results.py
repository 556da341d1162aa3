"""Results of the SCAT En→Fr recipe: ``scat_en_fr.md`` (tables and run facts), ``.json`` (every
run), the plain-text files next to them that every number is recomputed from
(``scat_en_fr.translations/MODEL[.seedN].fr``: the beam translations of the SCAT test sentences, and
``sentence.multi30k.fr``: stage 1's of Multi30k test_2016_flickr;
``scat_en_fr.contrastive.tsv``: both candidates' scores per example; ``scat_en_fr.cxmi.tsv``: CXMI
per sentence; ``scat_en_fr.supporting_attention.tsv``: α on the marked supporting words per context
line, for hce/hmce reading the target context), and ``.png`` (contrastive accuracy and BLEU per model, where matplotlib is
installed).

Over seeds every number is mean ± sd; each context model is compared with the no-context control
trained on the same SCAT lines (a paired t-test over seeds: a seed's runs share the stage-1
model and the batch order); CXMI tells whether a model uses its context at all (one-sample
t-test over seeds); the pronoun-prior table tells how much of an accuracy a preference for one
gender explains."""
import json
import shutil
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from devtools.bootstrap_intervals import paired_difference_interval
from devtools.recipe_report import RunHeader, plot_if_possible, unfinished_lines
from devtools.seed_statistics import (HELD, NOT_HELD, UNDECIDED, UNTESTED, direction_verdict, format_mean_sd, mean_sd,
                                      t_test)
from fairseq_ctx.core.generate_output import read_generate_lines
from examples.context_mt.scat_extra_sets import extra_set_lines

SENTENCE = "sentence"  # the stage-1 sentence-level model
SENTENCE_ON_SCAT = "sentence_scat"  # stage 1 continued on the SCAT lines without context: the stage-2 control
STEM = "scat_en_fr"
# No published en→fr number of this model was found: Wu et al. (2021)'s repository states the
# en→de result only; that one, with its source, is what stage 1 can be set beside.
PUBLISHED_BASELINE = (
    "no published text-only Transformer-tiny BLEU on Multi30k test_2016_flickr **en→fr** was found in the sources "
    "we could read (the repositories of Wu et al. (2021), github.com/LividWo/Revisit-MMT, and of Li et al. (2022), "
    "github.com/libeineu/fairseq_mmt, state none). The same model's published **en→de** result is 41.02 BLEU "
    "(Revisit-MMT `README-baseline.md`: 8000 updates, average of the last 10 epoch checkpoints, beam 5, fairseq's "
    "BLEU on lowercased, Moses-tokenised text), against which the Multi30k parity recipe of this repository reaches "
    "39.70 at best (38.86–39.47 in runs of at most 150 minutes); it is a different language pair and not comparable to the number above")
FEMININE, MASCULINE = ("elle", "elles"), ("il", "ils")
CONTEXT_USE = {HELD: "yes (CXMI > 0)", NOT_HELD: "no: the context lowers the reference's probability (CXMI < 0)",
               UNDECIDED: "undecided"}


def sentence_hypotheses(generate_output: Path, sentence_ids: Path) -> List[str]:
    """Detokenised hypotheses (``D-`` lines) of the SCAT sentences, in example order; the context
    lines of the two-line documents are translated too but not scored."""
    detokenised = read_generate_lines(str(generate_output))["D"]
    ids = [int(line) for line in sentence_ids.read_text().split()]
    missing = [i for i in ids if i not in detokenised]
    if missing:
        raise ValueError(f"{generate_output} has no D- line for {len(missing)} of the {len(ids)} SCAT sentences "
                         f"(first: line {missing[0]}); generate the whole split with --required-batch-size-multiple 1")
    return [detokenised[i] for i in ids]


def ordered_hypotheses(generate_output: Path, count: int) -> List[str]:
    """Detokenised hypotheses (``D-`` lines) of sentences 0 … count − 1 of a whole split, in order."""
    detokenised = read_generate_lines(str(generate_output))["D"]
    missing = [i for i in range(count) if i not in detokenised]
    if missing:
        raise ValueError(f"{generate_output} has no D- line for {len(missing)} of the {count} sentences (first: "
                         f"{missing[0]}); generate the whole split with --required-batch-size-multiple 1")
    return [detokenised[i] for i in range(count)]


def run_name(row: Dict) -> str:
    return row["model"] if row["model"] == SENTENCE else f"{row['model']}.seed{row['seed']}"


# ---- the pronoun prior ---------------------------------------------------------------------------
def gender(pronoun: str) -> Optional[str]:
    return "feminine" if pronoun in FEMININE else "masculine" if pronoun in MASCULINE else None


def gender_breakdown(examples: Sequence[Dict]) -> Dict[str, float]:
    """Accuracy where the correct pronoun is feminine / masculine, their mean (balanced accuracy:
    0.5 for a model that always picks one gender), and the share of examples where the model
    scores the feminine candidate higher (examples with pronouns of both genders left out)."""
    by_gender = {g: [e for e in examples if gender(e["pronoun"]) == g] for g in ("feminine", "masculine")}
    accuracy = {g: sum(e["correct"] for e in mine) / len(mine) if mine else 0.0 for g, mine in by_gender.items()}
    judged = by_gender["feminine"] + by_gender["masculine"]
    feminine_first = [e["scores"][0] > e["scores"][1] if gender(e["pronoun"]) == "feminine"
                      else e["scores"][1] > e["scores"][0] for e in judged]
    return {"feminine_accuracy": accuracy["feminine"], "masculine_accuracy": accuracy["masculine"],
            "balanced_accuracy": (accuracy["feminine"] + accuracy["masculine"]) / 2,
            "prefers_feminine": sum(feminine_first) / len(judged) if judged else 0.0}


def prior_rows(examples: Sequence[Dict], train_pronouns: Dict[str, int]) -> List[Dict]:
    """Accuracy of choosing without the model: always feminine, always masculine, and the gender
    SCAT train marks more often for the pronoun's number (il/elle, ils/elles)."""
    judged = [e for e in examples if gender(e["pronoun"])]
    majority = {number: max(pair, key=lambda p: train_pronouns.get(p, 0)) for number, pair in
                (("singular", ("il", "elle")), ("plural", ("ils", "elles")))}

    def accuracy(choose) -> Dict:
        flags = [gender(choose(e["pronoun"])) == gender(e["pronoun"]) for e in judged]
        mine = {g: [f for f, e in zip(flags, judged) if gender(e["pronoun"]) == g] for g in ("feminine", "masculine")}
        return {"accuracy": sum(flags) / len(flags),
                **{f"{g}_accuracy": sum(f) / len(f) if f else 0.0 for g, f in mine.items()}}

    return [{"rule": "always the feminine pronoun", **accuracy(lambda p: "elle")},
            {"rule": "always the masculine pronoun", **accuracy(lambda p: "il")},
            {"rule": f"SCAT train's majority per number ({majority['singular']} for il/elle, {majority['plural']} for "
                     f"ils/elles)", **accuracy(lambda p: majority["plural" if p.endswith("s") else "singular"])}]


# ---- over seeds ----------------------------------------------------------------------------------
def by_model(rows: Sequence[Dict]) -> Dict[str, List[Dict]]:
    grouped: Dict[str, List[Dict]] = {}
    for row in rows:
        grouped.setdefault(row["model"], []).append(row)
    return grouped


def comparisons(rows: Sequence[Dict]) -> List[Dict]:
    """Each context model against the control, per metric: the per-seed differences (seeds both
    have), their mean ± sd, the paired t-test and the verdict (expected: context model above)."""
    grouped = by_model(rows)
    control = {r["seed"]: r for r in grouped.get(SENTENCE_ON_SCAT, [])}
    out = []
    for model, mine in grouped.items():
        if model in (SENTENCE, SENTENCE_ON_SCAT) or not control:
            continue
        paired = [(r, control[r["seed"]]) for r in mine if r["seed"] in control]
        entry = {"model": model, "seeds": [r["seed"] for r, _ in paired]}
        for metric, digits in (("contrastive_accuracy", 3), ("bleu", 2), ("chrf", 2)):
            test = t_test([r[metric] - c[metric] for r, c in paired])
            entry[metric] = {"differences": list(test.differences), "mean": test.mean, "sd": test.sd, "p": test.p,
                             "verdict": direction_verdict(test.mean, test.p), "text": test.describe(digits)}
        entry["examples_interval"] = examples_interval(paired)
        out.append(entry)
    return out


def examples_interval(paired: Sequence[tuple]) -> Dict[str, float]:
    """The contrastive-accuracy difference on the same SCAT test examples, each example's outcome
    averaged over the paired seeds: its 95% paired bootstrap interval over the examples (the test
    set's sampling error, which the t-test over seeds does not see)."""
    def outcomes(run: Dict) -> Dict[int, bool]:
        return {e["line"]: bool(e["correct"]) for e in run["examples"]}

    model_runs, control_runs = [outcomes(r) for r, _ in paired], [outcomes(c) for _, c in paired]
    lines = sorted(set.intersection(*(set(o) for o in model_runs + control_runs)))
    return paired_difference_interval([sum(o[line] for o in model_runs) / len(model_runs) for line in lines],
                                      [sum(o[line] for o in control_runs) / len(control_runs) for line in lines])


def context_use(rows: Sequence[Dict]) -> List[Dict]:
    """Per stage-2 model: CXMI over seeds against 0 (one-sample t-test), and the share of SCAT
    sentences whose reference the context made more likely."""
    out = []
    for model, mine in by_model(rows).items():
        if mine[0]["context_size"] == 0:  # CXMI is 0 by construction
            continue
        test = t_test([r["cxmi"] for r in mine])
        sentences = [value for r in mine for value in r["cxmi_per_sentence"]]
        verdict = direction_verdict(test.mean, test.p)
        word = verdict.removesuffix(f" {UNTESTED}")
        out.append({"model": model, "values": list(test.differences), "p": test.p,
                    "verdict": CONTEXT_USE[word] + (f" {UNTESTED}" if word != verdict else ""),
                    "text": test.describe(3, "t-test against 0"),
                    "positive_share": sum(v > 0 for v in sentences) / len(sentences) if sentences else 0.0})
    return out


# ---- markdown ------------------------------------------------------------------------------------
def context_of(row: Dict) -> str:
    if row["model"] == SENTENCE:
        return "none (stage 1)"
    if row["context_size"] == 0:
        return "none (stage 2 on SCAT lines)"
    return "1 segment (source + own target)" if row.get("target_context_size") else "1 segment (source)"


def mean_sd_of(mine: Sequence[Dict], key: str, digits: int) -> str:
    return format_mean_sd([r[key] for r in mine], digits)


def summary_table(rows: Sequence[Dict]) -> List[str]:
    lines = ["| model | context | runs | contrastive acc. | balanced acc. | support context / current | CXMI (nats) "
             "| BLEU | chrF | sentences / update |", "|---|---|---|---|---|---|---|---|---|---|"]
    for model, mine in by_model(rows).items():
        support = " / ".join(format_mean_sd([r["support"][k]["accuracy"] for r in mine if k in r["support"]], 3)
                             if any(k in r["support"] for r in mine) else "–" for k in ("context", "current"))
        per_update = [r["sentences_per_update"] for r in mine if r.get("sentences_per_update")]
        lines.append(f"| {model} | {context_of(mine[0])} | {len(mine)} | {mean_sd_of(mine, 'contrastive_accuracy', 3)} "
                     f"| {format_mean_sd([r['pronoun_prior']['balanced_accuracy'] for r in mine], 3)} | {support} | "
                     f"{mean_sd_of(mine, 'cxmi', 3)} | {mean_sd_of(mine, 'bleu', 2)} | {mean_sd_of(mine, 'chrf', 2)} | "
                     f"{format_mean_sd(per_update, 1) if per_update else '–'} |")
    return lines


def run_table(rows: Sequence[Dict]) -> List[str]:
    lines = ["| model | seed | updates | contrastive acc. (correct/total) | CXMI | BLEU | chrF | valid loss "
             "| train | evaluate |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        valid_loss = f"{r['valid_loss'][-1][1]:.3f}" if r.get("valid_loss") else "–"
        lines.append(f"| {r['model']} | {r['seed']} | {r['updates']} | {r['contrastive_accuracy']:.3f} "
                     f"({r['contrastive_correct']}/{r['contrastive_total']}) | {r['cxmi']:.3f} | {r['bleu']:.2f} | "
                     f"{r['chrf']:.2f} | {valid_loss} | {r['train_seconds'] / 60:.1f} min | "
                     f"{r['eval_seconds'] / 60:.1f} min |")
    return lines


def verdict_lines(facts: Dict) -> List[str]:
    lines = ["| context model | seeds | Δ contrastive acc. | verdict | Δ on the examples [95% paired bootstrap], p "
             "| Δ BLEU | Δ chrF |", "|---|---|---|---|---|---|---|"]
    for c in facts["comparisons"]:
        interval = c["examples_interval"]
        lines.append(f"| {c['model']} | {len(c['seeds'])} | {c['contrastive_accuracy']['text']} | "
                     f"**{c['contrastive_accuracy']['verdict']}** | {interval['difference']:+.3f} "
                     f"[{interval['low']:+.3f}, {interval['high']:+.3f}], p {interval['p']:.3f} | "
                     f"{c['bleu']['text']} ({c['bleu']['verdict']}) | {c['chrf']['text']} ({c['chrf']['verdict']}) |")
    lines += ["", "The verdict is the t-test over seeds (fixed before the runs); the bootstrap column is the "
              "sampling error of the 1,000 test examples for the same difference (each example's outcome averaged "
              f"over the seeds; {len(facts['comparisons'])} comparison(s) with the control)."]
    lines += ["", "| model | CXMI over seeds (nats per sentence) | uses its context | SCAT "
              "sentences with CXMI > 0 |", "|---|---|---|---|"]
    lines += [f"| {u['model']} | {u['text']} | {u['verdict']} | {u['positive_share']:.2f} |"
              for u in facts["context_use"]]
    return lines


def supporting_attention_lines(rows: Sequence[Dict]) -> List[str]:
    measured = [(r, s) for r in rows for s in r.get("supporting_attention", [])]
    if not measured:
        return []
    lines = ["## Where the word-level context attention looks", "",
             "For hce/hmce: the weights α with which the context encoder pools a context line (Yun 2022, eq. "
             "3.15–3.16) on the words SCAT's translators marked as supporting the pronoun, against the share a "
             "uniform α gives them (`fairseq-ctx-supporting-attention`): the English context of the SCAT training "
             "lines with English marks (lines the model was trained on; SCAT test marks only 2 English context lines), "
             "and for hmce_target the French context of SCAT test. Difference per context line, mean ± sd; lines above / "
             "below the uniform share with the two-sided sign test.", "",
             "| model | seed | context (SCAT split) | marked lines | α on marked words | uniform share | difference "
             "| above / below (sign test p) | largest α on a marked word |", "|---|---|---|---|---|---|---|---|---|"]
    for r, s in measured:
        where = f"{'English' if s['side'] == 'source' else 'French'} ({Path(s['input']).name.split('.')[1]})"
        lines.append(f"| {r['model']} | {r['seed']} | {where} | {s['examples']} | {s['mass']:.4f} | {s['uniform']:.4f} "
                     f"| {s['gap_mean']:+.4f} ± {s['gap_sd']:.4f} | {s['above_uniform']} / {s['below_uniform']} "
                     f"(p = {s['sign_test_p']:.3g}) | {s['top_marked']}/{s['examples']} |")
    return [*lines, ""]


def prior_lines(rows: Sequence[Dict], facts: Dict) -> List[str]:
    lines = ["| model or rule | accuracy | feminine antecedent | masculine antecedent | prefers the feminine pronoun |",
             "|---|---|---|---|---|"]
    for model, mine in by_model(rows).items():
        prior = [r["pronoun_prior"] for r in mine]
        lines.append(f"| {model} | {mean_sd_of(mine, 'contrastive_accuracy', 3)} | "
                     + " | ".join(format_mean_sd([p[k] for p in prior], 3)
                                  for k in ("feminine_accuracy", "masculine_accuracy", "prefers_feminine")) + " |")
    for prior in facts["prior_rows"]:
        lines.append(f"| {prior['rule']} | {prior['accuracy']:.3f} | {prior['feminine_accuracy']:.3f} | "
                     f"{prior['masculine_accuracy']:.3f} | – |")
    return lines


def stage_one_lines(stage_one: Dict, facts: Dict) -> List[str]:
    """Stage 1 on Multi30k test_2016_flickr en→fr, and what has been published for the model."""
    scores = stage_one["multi30k_test"]
    cased, lowercased = scores["cased"], scores["lowercased"]
    return ["## Stage 1 (sentence level) on Multi30k test_2016_flickr en→fr", "",
            "| model | updates | BLEU (cased) | BLEU (lowercased) | BP | length ratio | chrF |", "|---|---|---|---|---|---|---|",
            f"| {SENTENCE}, average of {', '.join(stage_one['averaged_checkpoints'])} | {stage_one['updates']} | "
            f"{cased['bleu']:.2f} | {lowercased['bleu']:.2f} | {cased['bp']:.3f} | {cased['ratio']:.3f} | "
            f"{scores['chrf']:.2f} |", "",
            f"- published: {PUBLISHED_BASELINE}",
            f"- ours: sacreBLEU against the raw cased reference ({scores['reference']}), {scores['sentences']} "
            f"sentences: `{cased['signature']}`, `{lowercased['signature']}`, `{scores['chrf_signature']}`; "
            f"translations: `{STEM}.translations/{SENTENCE}.multi30k.fr`", ""]


def stage_one_identity_lines(rows: Sequence[Dict], stage_one: Dict) -> List[str]:
    """Which stage-2 runs record that they started from this stage-1 model (its parameters'
    SHA-256): runs made in another session started from a stage 1 trained again there."""
    digest = stage_one.get("weights_sha256")
    if digest is None:
        return []
    runs = [r for r in rows if r["model"] != SENTENCE]
    same = [run_name(r) for r in runs if r.get("stage_one_sha256") == digest]
    other = [run_name(r) for r in runs if r.get("stage_one_sha256") not in (None, digest)]
    unknown = [run_name(r) for r in runs if r.get("stage_one_sha256") is None]
    return [f"- Stage-1 model: parameters SHA-256 `{digest}`; stage-2 runs started from it: "
            f"{', '.join(same) or 'none recorded'}"
            + (f"; **from another stage-1 model: {', '.join(other)}**" if other else "")
            + (f"; not recorded (trained before the digest was kept): {', '.join(unknown)}" if unknown else "")]


def markdown(rows: Sequence[Dict], header: RunHeader, facts: Dict) -> str:
    a, counts, stage_one = facts["settings"], facts["corpus"]["counts"], facts["stage_one"]
    test_counts = facts["corpus"]["test_counts"]
    genders = {g: sum(gender(e["pronoun"]) == g for e in rows[0]["examples"]) for g in ("feminine", "masculine")}
    lines = [
        "# SCAT En→Fr: two-stage context models (Yun 2022, ch. 3) on ambiguous pronouns", "", *header.lines(),
        f"- Stage 1: seed {stage_one['seed']}, {header.threads * header.jobs} torch thread(s), {a['sentence_updates']} "
        f"updates of {a['update_freq']} × {a['max_tokens']} tokens, lr {a['lr']} (inverse_sqrt, warmup {a['warmup']}), "
        f"every epoch checkpoint kept; the average of the last {a['average_last']} initialises every stage-2 model; "
        f"stage 2 on SCAT train (context line + sentence per example), lr {a['context_lr']} (warmup "
        f"{a['context_warmup']}), checkpoint_last.pt evaluated",
        *stage_one_identity_lines(rows, stage_one),
        f"- Model: {a['embed_dim']} dims, {a['layers']}+{a['layers']} layers, {a['heads']} heads, FFN {a['ffn_dim']}, "
        f"shared embeddings (Transformer-tiny of Wu et al., 2021), joint sentencepiece BPE {a['spm_vocab']}, dropout "
        f"{a['dropout']}, clip-norm {a['clip_norm']:g}",
        f"- Stage 1 data: {facts['corpus']['stage_one_corpus']}: {counts['multi30k_train']} + "
        f"{counts['scat_train_sentences']} + {counts['scat_train_context_lines']} = {counts['stage_one_train']} pairs; "
        f"SCAT test sentences found verbatim among them: {test_counts['scat_test_sentences_in_stage_one_train']} of "
        f"{test_counts['scat_test']}; Multi30k test sources: {test_counts['multi30k_test_sources_in_stage_one_train']} "
        f"of {test_counts['multi30k_test']}",
        f"- Evaluation: SCAT test (the published split), {test_counts['scat_test']} examples ({genders['feminine']} "
        f"with a feminine, {genders['masculine']} with a masculine correct pronoun); the 95% interval of one accuracy "
        f"near 0.8 on it is about ±{1.96 * (0.8 * 0.2 / test_counts['scat_test']) ** 0.5:.3f}", "",
        *stage_one_lines(stage_one, facts),
        "## Results on SCAT test (mean ± sd over seeds)", "", *summary_table(rows), "",
        "- contrastive acc.: `fairseq-ctx-contrastive --format scat` (correct translation vs the same with the marked "
        "pronoun's gender flipped; ties count as errors); balanced acc.: the mean of the accuracies where the correct "
        "pronoun is feminine and where it is masculine (0.5 for a model that always prefers one gender); support: "
        "accuracy where the translators marked the deciding words in the context / in the current sentence;",
        "- CXMI: `fairseq-ctx-cxmi` (Fernandes et al., 2021), log p(reference | source, context) − log p(reference | "
        "source) in nats, mean over the SCAT test sentences (0 for a model without context);",
        f"- BLEU, chrF: sacreBLEU (`fairseq-ctx-score`) of beam-{a['beam']} translations of the SCAT test sentences "
        "only (the context lines fairseq-generate translates with them are left out) against their unmarked "
        "references; signatures below.", "",
        "## Verdict: each context model against the no-context control (sentence_scat)", "",
        "Expected direction: context models above the control trained on the same SCAT lines for the same updates "
        "and sentences per update. Δ = context model − control per seed, mean ± sd, and the verdict; uses its "
        "context: the verdict on \"CXMI is positive\" (a t-test of the seeds' CXMI against 0).", "",
        *verdict_lines(facts), "",
        "## What a model learns without context: the pronoun prior", "",
        "Accuracy by the gender of the correct pronoun (mean ± sd over seeds), the share of examples where the model "
        "scores the feminine candidate higher, and the accuracy of rules that ignore the example:", "",
        *prior_lines(rows, facts), "",
        *supporting_attention_lines(rows),
        *extra_set_lines(rows, facts.get("extra_sets", [])),
        "## Every run", "", *run_table(rows), "",
        "## Convergence", "",
        f"- {SENTENCE} (stage 1), validation loss (Multi30k val) at the end of each epoch, by update: "
        + ", ".join(f"{u}: {v:.3f}" for u, v in stage_one.get("valid_loss", [])),
        *[f"- {run_name(r)}: validation loss by update (SCAT valid with its context): "
          + ", ".join(f"{u}: {v:.3f}" for u, v in r["valid_loss"]) for r in rows if r["model"] != SENTENCE], "",
        *unfinished_lines(facts["unfinished"]), "",
        "## Files", "",
        f"- `{STEM}.translations/MODEL[.seedN].fr`: the translations scored above, one per SCAT test example; rescore "
        "with `fairseq-ctx-score --hyp FILE --ref REF --no-comet`, REF = SCAT's highlighted.test.fr with the markers "
        "removed (the recipe writes it to WORK/test/scat.test.ref.fr); "
        f"`{STEM}.translations/{SENTENCE}.multi30k.fr`: stage 1's Multi30k test translations (`sacrebleu REF -i "
        "FILE -m bleu chrf [-lc]`, REF = test_2016_flickr.fr, the unzipped raw file of --multi30k-dir);",
        f"- `{STEM}.contrastive.tsv`: per run and example, the correct pronoun, where the support is, both scores; "
        f"`{STEM}.cxmi.tsv`: per run and SCAT sentence, its CXMI;"
        + (f" `{STEM}.supporting_attention.tsv`: per run and marked context line, α on the marked words and the "
           "uniform share;" if any("supporting_attention" in r for r in rows) else ""),
        "- signatures: " + "; ".join(f"`{s}`" for s in sorted({r["bleu_signature"] for r in rows}
                                                              | {r["chrf_signature"] for r in rows})), "",
    ]
    return "\n".join(lines)


# ---- files ---------------------------------------------------------------------------------------
def contrastive_tsv(rows: Sequence[Dict]) -> str:
    lines = ["model\tseed\tline\tcorrect_pronoun\tsupport\tcorrect\tscore_correct\tscore_flipped"]
    lines += [f"{r['model']}\t{r['seed']}\t{e['line']}\t{e['pronoun']}\t{e['support']}\t{int(e['correct'])}\t"
              f"{e['scores'][0]:.4f}\t{e['scores'][1]:.4f}" for r in rows for e in r["examples"]]
    return "\n".join(lines) + "\n"


def cxmi_tsv(rows: Sequence[Dict]) -> str:
    lines = ["model\tseed\texample\tcxmi"]
    lines += [f"{r['model']}\t{r['seed']}\t{number}\t{value:.4f}" for r in rows
              for number, value in enumerate(r["cxmi_per_sentence"], 1)]
    return "\n".join(lines) + "\n"


def supporting_attention_tsv(rows: Sequence[Dict]) -> str:
    lines = ["model\tseed\tside\torigin\tmass\tuniform\ttop_marked"]
    lines += [f"{r['model']}\t{r['seed']}\t{s['side']}\t{Path(e['origin']).name}\t{e['mass']:.4f}\t{e['uniform']:.4f}\t"
              f"{int(e['top_marked'])}" for r in rows for s in r.get("supporting_attention", []) for e in s["per_example"]]
    return "\n".join(lines) + "\n"


def plot(rows: Sequence[Dict], destination: Path) -> None:
    """Contrastive accuracy and BLEU per stage-2 model (mean, sd as the error bar), stage 1 and
    chance as reference lines."""
    from fairseq_ctx.core.plots import pyplot

    plt = pyplot()

    grouped = {m: mine for m, mine in by_model(rows).items() if m != SENTENCE}
    stage_one = by_model(rows).get(SENTENCE, [])
    figure, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for axis, (key, title) in zip(axes, (("contrastive_accuracy", "SCAT contrastive accuracy"), ("bleu", "BLEU"))):
        if grouped:
            means, sds = zip(*(mean_sd([r[key] for r in mine]) for mine in grouped.values()))
            errors = [0.0 if sd is None else sd for sd in sds]  # one seed: no error bar
            axis.bar(list(grouped), means, color="#4c72b0", yerr=errors)
        if stage_one:
            axis.axhline(stage_one[0][key], color="#999999", linestyle="--", label="stage 1")
        if key == "contrastive_accuracy":
            axis.axhline(0.5, color="#cc4444", linestyle=":", label="chance (2 candidates)")
        axis.set_title(title)
        axis.tick_params(axis="x", rotation=45)
        axis.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(destination, dpi=110)
    plt.close(figure)


def write(rows: Sequence[Dict], header: RunHeader, facts: Dict, out: Path) -> Dict:
    """Write every results file into ``out``; ``rows``: the result of stage 1 and of every stage-2
    run; ``facts``: settings, corpus, stage_one, unfinished, translations ({run name: hypothesis
    file}). Returns the JSON payload."""
    out.mkdir(parents=True, exist_ok=True)
    facts = {**facts, "comparisons": comparisons(rows), "context_use": context_use(rows),
             "prior_rows": prior_rows(rows[0]["examples"], facts["corpus"]["scat_train_pronouns"])}
    translations = out / f"{STEM}.translations"
    shutil.rmtree(translations, ignore_errors=True)
    translations.mkdir()
    for name, source in facts.pop("translations").items():
        shutil.copyfile(source, translations / f"{name}.fr")
    stage_one = facts["stage_one"]
    shutil.copyfile(stage_one["multi30k_test"]["hypotheses"], translations / f"{SENTENCE}.multi30k.fr")
    payload = {**header.as_dict(), **facts, "rows": list(rows)}
    (out / f"{STEM}.json").write_text(json.dumps(payload, indent=2, ensure_ascii=False), encoding="utf-8")
    (out / f"{STEM}.md").write_text(markdown(rows, header, facts), encoding="utf-8")
    (out / f"{STEM}.contrastive.tsv").write_text(contrastive_tsv(rows), encoding="utf-8")
    (out / f"{STEM}.cxmi.tsv").write_text(cxmi_tsv(rows), encoding="utf-8")
    if any("supporting_attention" in r for r in rows):
        (out / f"{STEM}.supporting_attention.tsv").write_text(supporting_attention_tsv(rows), encoding="utf-8")
    plot_if_possible(lambda: plot(rows, out / f"{STEM}.png"), out / f"{STEM}.png")
    return payload
