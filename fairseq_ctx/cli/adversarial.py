"""``fairseq-ctx-adversarial``: how much does a model rely on each auxiliary input? (SPEC §4)

Re-decodes a split with stock ``fairseq-generate`` once unchanged and once per auxiliary input
with that input replaced by a random permutation of itself across the split (a feature input
through a permuted ``{split}.{name}.ids`` row map — the features are not copied; an extra source
language through a permuted binarized copy). Reports BLEU and, with ``--key``, the accuracy on
the ambiguous words, with the drop against the unchanged run.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import sacrebleu

from fairseq_ctx.cli.score import context_accuracy, read_generate_output
from fairseq_ctx.cli.tool_args import refuse_overwriting
from fairseq_ctx.core.output_paths import split_files
from fairseq_ctx.multisource.data.feature_file import ids_path, open_features, feature_path


def _link_data_dir(data: str, target: str, skip: List[str]) -> None:
    for name in os.listdir(data):
        if name not in skip:
            os.symlink(os.path.abspath(os.path.join(data, name)), os.path.join(target, name))


def _shuffle_feature(data: str, target: str, split: str, name: str, rng: np.random.Generator) -> List[str]:
    original = ids_path(data, split, name)
    if os.path.exists(original):
        rows = np.loadtxt(original, dtype=np.int64, ndmin=1)
    else:
        rows = np.arange(len(open_features(feature_path(data, split, name))))
    np.savetxt(ids_path(target, split, name), rng.permutation(rows), fmt="%d")
    return [os.path.basename(original)]


def _extra_source_stem(data: str, split: str, lang: str, tgt: Optional[str]) -> str:
    """``{split}.{lang}-{tgt}.{lang}``; without --target-lang the only such pair in the directory."""
    if tgt:
        return f"{split}.{lang}-{tgt}.{lang}"
    found = sorted(name[:-len(".idx")] for name in os.listdir(data)
                   if name.startswith(f"{split}.{lang}-") and name.endswith(f".{lang}.idx"))
    if len(found) != 1:
        sys.exit(f"fairseq-ctx-adversarial: found {found or 'no'} binarized '{lang}' files for split '{split}' in {data}; "
                 f"pass -t/--target-lang")
    return found[0]


def _shuffle_text(data: str, target: str, split: str, lang: str, tgt: Optional[str], rng: np.random.Generator) -> List[str]:
    from fairseq.data import indexed_dataset

    stem = _extra_source_stem(data, split, lang, tgt)
    dataset = indexed_dataset.MMapIndexedDataset(os.path.join(data, stem))
    builder = indexed_dataset.MMapIndexedDatasetBuilder(os.path.join(target, stem + ".bin"), dtype=dataset._index.dtype)
    for index in rng.permutation(len(dataset)):
        builder.add_item(dataset[int(index)])
    builder.finalize(os.path.join(target, stem + ".idx"))
    return [stem + ".bin", stem + ".idx"]


def decode(data: str, args, extra: List[str]) -> Dict[str, float]:
    command = [str(Path(sys.executable).parent / "fairseq-generate"), data, "--user-dir", args.user_dir,
               "--task", "multimodal_translation", "--path", args.path, "--gen-subset", args.gen_subset,
               "--beam", str(args.beam), "--batch-size", str(args.batch_size), "--required-batch-size-multiple", "1",
               "--feature-inputs", args.feature_inputs, "--extra-source-langs", args.extra_source_langs,
               "--extra-source-dict", args.extra_source_dict, *extra]
    for flag, value in (("--source-lang", args.source_lang), ("--target-lang", args.target_lang)):
        if value:
            command += [flag, value]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"fairseq-ctx-adversarial: fairseq-generate failed:\n{result.stderr[-3000:]}")
    with tempfile.NamedTemporaryFile("w", suffix=".out", delete=False) as handle:
        handle.write(result.stdout)
    hyps, refs = read_generate_output(handle.name)
    os.unlink(handle.name)
    ids = sorted(hyps)
    scores = {"bleu": sacrebleu.corpus_bleu([hyps[i] for i in ids], [[refs.get(i, "") for i in ids]]).score}
    if args.key:
        with open(args.key, encoding="utf-8") as key:
            scores["accuracy"] = context_accuracy(hyps, key.read().splitlines())[0]
    return scores


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", help="data directory of --task multimodal_translation")
    parser.add_argument("--path", required=True, help="checkpoint")
    parser.add_argument("--user-dir", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--gen-subset", default="test")
    parser.add_argument("--feature-inputs", default="")
    parser.add_argument("--extra-source-langs", default="")
    parser.add_argument("--extra-source-dict", default="shared")
    parser.add_argument("-s", "--source-lang")
    parser.add_argument("-t", "--target-lang", help="needed to find an extra source's binaries when the data "
                        "directory holds several {split}.{lang}-{tgt}.{lang} pairs")
    parser.add_argument("--shuffle", help="comma-separated inputs to shuffle (default: every auxiliary input)")
    parser.add_argument("--key", help="answer key (expected|alternatives per line) for the ambiguous-word accuracy")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="also write the results to this file")
    args, extra = parser.parse_known_args(argv)
    refuse_overwriting(parser, {"--json": args.json}, {
        "--path": args.path, "--key": args.key, "data": split_files(args.data, args.gen_subset)})
    features = [n for n in args.feature_inputs.split(",") if n]
    langs = [n for n in args.extra_source_langs.split(",") if n]
    targets = [n for n in (args.shuffle.split(",") if args.shuffle else features + langs) if n]
    rng = np.random.default_rng(args.seed)
    results = {"original": decode(args.data, args, extra)}
    for name in targets:
        with tempfile.TemporaryDirectory() as tmp:
            if name in features:
                skip = _shuffle_feature(args.data, tmp, args.gen_subset, name, rng)
            elif name in langs:
                skip = _shuffle_text(args.data, tmp, args.gen_subset, name, args.target_lang, rng)
            else:
                sys.exit(f"fairseq-ctx-adversarial: '{name}' is not in --feature-inputs or --extra-source-langs")
            _link_data_dir(args.data, tmp, skip)
            results[f"shuffled {name}"] = decode(tmp, args, extra)
    base = results["original"]
    print("condition\t" + "\t".join(f"{m}\tdrop" for m in base))
    for condition, scores in results.items():
        print(condition + "\t" + "\t".join(f"{scores[m]:.3f}\t{base[m] - scores[m]:+.3f}" for m in base))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
