"""ContraPro (Müller et al. (2018), github.com/ZurichNLP/ContraPro), English→German pronouns.

``contrapro.json`` is a list of entries (``src pronoun``, ``ref pronoun``, ``ante distance``,
``intrasegmental``, ``errors``: one ``{"contrastive": ...}`` per wrong pronoun, ...). ContraPro's
``conversion_scripts/json2text_and_context.pl --source en --target de --context N`` writes, for
every entry in order, one line for the reference and one per error into
``contrapro.text.{en,de}``, and for every such line N lines into ``contrapro.context.{en,de}``
(the N previous document sentences, farthest first; an empty line before the document start).
The text files are what is scored (tokenise them like the training data); the JSON gives the
grouping and the breakdowns ``category`` (``src:ref`` pronoun), ``ante distance`` (0, 1, 2, 3,
>3) and ``intrasegmental``, as in ContraPro's ``evaluate.py``.
"""
import os
from typing import Any, Dict, List, Optional

from fairseq_ctx.context.contrastive.example import (Candidate, ContrastiveExample, ContrastiveInputError,
                                                     check_same_length, is_integer, load_json, read_lines,
                                                     strip_missing)

EXTRACT_HINT = ("write them with ContraPro's conversion_scripts/json2text_and_context.pl --source {src} "
                "--target {tgt} --dir DOCUMENTS --json {json} --context N (it writes into the current directory; "
                "give that directory as --text-dir)")


def entry_name(json_path: str, number: int, entry: Any) -> str:
    where = f"{json_path}: entry {number + 1}"
    if isinstance(entry, dict) and "document id" in entry:
        where += f" (document id {entry['document id']}, segment id {entry.get('segment id')})"
    return where


def check_entry(json_path: str, number: int, entry: Any) -> None:
    where = entry_name(json_path, number, entry)
    if not isinstance(entry, dict):
        raise ContrastiveInputError(f"{where}: expected an object, got {type(entry).__name__}")
    for key in ("src pronoun", "ref pronoun", "ante distance", "errors"):
        if key not in entry:
            raise ContrastiveInputError(f"{where}: missing '{key}'")
    errors = entry["errors"]
    well_formed = all(isinstance(e, dict) and "contrastive" in e for e in errors) if isinstance(errors, list) else False
    if not errors or not well_formed:
        raise ContrastiveInputError(f"{where}: 'errors' must be a non-empty list of objects with a 'contrastive' "
                                    f"translation")
    if not is_integer(entry["ante distance"]):
        raise ContrastiveInputError(f"{where}: 'ante distance' must be an integer, got {entry['ante distance']!r}")


def labels_of(entry: Dict) -> Dict[str, str]:
    distance = entry["ante distance"]
    intrasegmental = entry.get("intrasegmental")
    return {
        "category": f"{str(entry['src pronoun']).lower()}:{str(entry['ref pronoun']).lower()}",
        "ante distance": str(distance) if distance <= 3 else ">3",
        "intrasegmental": "none" if intrasegmental is None else str(intrasegmental).lower(),
    }


def read_contrapro(json_path: str, text_dir: Optional[str] = None, source_lang: str = "en",
                   target_lang: str = "de") -> List[ContrastiveExample]:
    """Read ``contrapro.json`` and the text and context files extracted from it (in ``text_dir``,
    default the JSON's directory, named after the JSON: ``{stem}.text.{lang}``, ``{stem}.context.{lang}``)."""
    entries = load_json(json_path)
    if not isinstance(entries, list):
        raise ContrastiveInputError(f"{json_path}: expected a JSON list of entries (ContraPro's contrapro.json)")
    for number, entry in enumerate(entries):
        check_entry(json_path, number, entry)
    stem = os.path.splitext(os.path.basename(json_path))[0]
    directory = text_dir if text_dir is not None else (os.path.dirname(json_path) or ".")
    paths = {kind: {lang: os.path.join(directory, f"{stem}.{kind}.{lang}") for lang in (source_lang, target_lang)}
             for kind in ("text", "context")}
    missing = [p for kind in paths.values() for p in kind.values() if not os.path.isfile(p)]
    if missing:
        hint = EXTRACT_HINT.format(src=source_lang, tgt=target_lang, json=json_path)
        raise ContrastiveInputError(f"{json_path}: missing {', '.join(missing)}; {hint}")
    text = {lang: read_lines(p) for lang, p in paths["text"].items()}
    context = {lang: read_lines(p) for lang, p in paths["context"].items()}
    lines = check_same_length({paths["text"][lang]: text[lang] for lang in text}, "the ContraPro text files")
    context_lines = check_same_length({paths["context"][lang]: context[lang] for lang in context},
                                      "the ContraPro context files")
    expected = sum(1 + len(entry["errors"]) for entry in entries)
    source_path = paths["text"][source_lang]
    if lines != expected:
        raise ContrastiveInputError(
            f"{source_path} has {lines} lines but {json_path} needs {expected} (one for the reference and one per "
            f"'errors' item of each of its {len(entries)} entries); extract the text files again from this JSON")
    if context_lines % max(lines, 1):
        raise ContrastiveInputError(
            f"{paths['context'][source_lang]} has {context_lines} lines, not a multiple of the {lines} lines of "
            f"{source_path} (json2text_and_context.pl --context N writes N context lines per text line)")
    per_line = context_lines // max(lines, 1)

    def context_of(lang: str, line: int) -> List[str]:
        return strip_missing(context[lang][line * per_line:(line + 1) * per_line][::-1])

    examples, first = [], 0
    for number, entry in enumerate(entries):
        group = range(first, first + 1 + len(entry["errors"]))
        for line in group:
            if text[source_lang][line] != text[source_lang][first]:
                raise ContrastiveInputError(
                    f"{source_path}:{line + 1}: the source differs from line {first + 1}, though both belong to "
                    f"{entry_name(json_path, number, entry)} (the reference and its contrastive translations share "
                    f"one source); the text files do not follow the JSON: extract them again")
        candidates = [Candidate(text[target_lang][line], context_of(target_lang, line)) for line in group]
        examples.append(ContrastiveExample(
            source=text[source_lang][first], source_context=context_of(source_lang, first),
            correct=candidates[0], contrastive=candidates[1:], labels=labels_of(entry),
            origin=f"{source_path}:{first + 1}",
        ))
        first = group.stop
    return examples
