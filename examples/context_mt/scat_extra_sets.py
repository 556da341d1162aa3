"""Contrastive sets beyond SCAT test, given on the SCAT recipe's command line in their published
layouts and scored with every trained model by ``fairseq-ctx-contrastive``:

* ``discevalmt:PATH/anaphora.json`` (or ``lexical-choice.json``): DiscEvalMT (Bawden et al., 2018),
  en→fr, the previous sentence as context on both sides;
* ``contrapro:PATH/contrapro.json[:TEXT_DIR]``: a set in ContraPro's layout (Müller et al., 2018),
  with the text and context files its ``json2text_and_context.pl`` writes (in TEXT_DIR, default
  next to the JSON file), read as en→fr (``*.text.en`` / ``*.text.fr``: e.g. the EN→FR set of Lopes
  et al. (2020), published in that layout);
* ``scat:PATH/highlighted.SPLIT``: a set in SCAT's layout (Yin et al., 2021), the prefix of its
  ``.en`` / ``.fr`` / ``.context.{en,fr}`` files.

Each set is read once before any training (an unreadable one is refused then, naming the file), and
scored for every model that has no score on it yet, finished runs included, while the model's
checkpoint is in the work directory.
"""
import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from devtools.recipe_runs import device_args
from devtools.seed_statistics import format_mean_sd
from fairseq_ctx.context.contrastive.example import ContrastiveInputError
from fairseq_ctx.context.contrastive.formats import read_set

EXTRA_FORMATS = ("discevalmt", "contrapro", "scat")
LANGS = ("en", "fr")  # the recipe's direction; passed for ContraPro's layout, whose default is en→de


@dataclass(frozen=True)
class ExtraSet:
    """One contrastive set: its layout, its file (SCAT: the prefix) and, for ContraPro, the
    directory of its text extraction."""
    format: str
    input: str
    text_dir: Optional[str] = None

    @property
    def name(self) -> str:
        """The set's name in the results: its file name without ``.json``."""
        name = Path(self.input).name
        return name[:-len(".json")] if name.endswith(".json") else name

    def contrastive_args(self) -> List[str]:
        """The options of ``fairseq-ctx-contrastive`` that read this set."""
        args = ["--format", self.format, "--input", self.input]
        if self.text_dir:
            args += ["--text-dir", self.text_dir]
        if self.format == "contrapro":
            args += ["--source-lang", LANGS[0], "--target-lang", LANGS[1]]
        return args


def parse_extra_set(value: str) -> ExtraSet:
    """``FORMAT:INPUT[:TEXT_DIR]`` (the argparse type of ``--extra-contrastive``)."""
    parts = value.split(":")
    if len(parts) not in (2, 3) or not all(parts) or parts[0] not in EXTRA_FORMATS:
        raise argparse.ArgumentTypeError(f"{value!r}: give FORMAT:INPUT[:TEXT_DIR], FORMAT one of "
                                         f"{', '.join(EXTRA_FORMATS)}")
    if len(parts) == 3 and parts[0] != "contrapro":
        raise argparse.ArgumentTypeError(f"{value!r}: only contrapro takes a TEXT_DIR (the other layouts hold all "
                                         f"their text)")
    return ExtraSet(*parts)


def check_extra_sets(sets: Sequence[ExtraSet]) -> Dict[str, int]:
    """Read every set as ``fairseq-ctx-contrastive`` will; returns the examples per set name.
    Raises :class:`ContrastiveInputError` naming the set for one that cannot be read, and for two
    sets of the same name."""
    names = [s.name for s in sets]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ContrastiveInputError(f"--extra-contrastive: two sets are named {repeated[0]!r} (the file name "
                                    f"without .json); give each set once")
    counts = {}
    for extra in sets:
        langs = LANGS if extra.format == "contrapro" else (None, None)
        try:
            examples, _ = read_set(extra.format, [extra.input], extra.text_dir, *langs)
        except (ContrastiveInputError, OSError) as error:
            raise ContrastiveInputError(f"--extra-contrastive {extra.format}:{extra.input}: {error}") from error
        counts[extra.name] = len(examples)
    return counts


def score_extra_sets(recipe, out: Path, checkpoint: Path, sets: Sequence[ExtraSet]) -> Dict[str, Dict]:
    """Contrastive accuracy of ``checkpoint`` on each of ``sets`` (``out/contrastive.NAME.json``);
    ``recipe``: the run (its tool runner, settings and data directories)."""
    scores = {}
    for extra in sets:
        report = out / f"contrastive.{extra.name}.json"
        report.unlink(missing_ok=True)
        print(f"== {checkpoint}: contrastive set {extra.name} ({extra.format})", flush=True)
        recipe.run("fairseq-ctx-contrastive", [
            str(checkpoint), "--data", str(recipe.bin / "scat"), *device_args(recipe.args.device), "--spm",
            str(recipe.spm_dir / "spm.model"), *extra.contrastive_args(), "--json", str(report)])
        result = json.loads(report.read_text())
        scores[extra.name] = {"format": extra.format, "input": extra.input, "accuracy": result["accuracy"],
                              "correct": result["correct"], "total": result["total"]}
    return scores


def extra_set_lines(rows: Sequence[Dict], sets: Sequence[Dict]) -> List[str]:
    """The results section: per model, mean ± sd over its runs of the accuracy on each set
    (``sets``: name, format, input, examples); nothing without sets."""
    if not sets:
        return []
    models: Dict[str, List[Dict]] = {}
    for row in rows:
        models.setdefault(row["model"], []).append(row)
    lines = ["## Other contrastive sets (mean ± sd over seeds)", "",
             "| model | " + " | ".join(f"{s['name']} ({s['format']}, {s['examples']})" for s in sets) + " |",
             "|---|" + "---|" * len(sets)]
    for model, mine in models.items():
        cells = []
        for extra in sets:
            scored = [r["extra_contrastive"][extra["name"]]["accuracy"] for r in mine
                      if extra["name"] in r.get("extra_contrastive", {})]
            missing = len(mine) - len(scored)
            cells.append((format_mean_sd(scored, 3) if scored else "–")
                         + (f" ({missing} of {len(mine)} runs not scored: checkpoint gone)" if scored and missing else ""))
        lines.append(f"| {model} | " + " | ".join(cells) + " |")
    lines += ["", "- `fairseq-ctx-contrastive --format FORMAT --input INPUT` with each model, the sets given by "
              "`--extra-contrastive`: " + "; ".join(f"{s['name']}: `{s['input']}`" for s in sets)
              + " (ties count as errors)", ""]
    return lines
