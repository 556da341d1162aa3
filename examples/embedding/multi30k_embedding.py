"""Multi30k task 1 (Elliott et al., 2016), 4-way en/de/fr/cs: the multilingual embedding recipe of
Li (2021), ch. 4, with two pivot targets (en, de).

    Multi30k text -> one joint sentencepiece BPE model over en, de, fr, cs -> one shared dictionary,
    fairseq-preprocess per pair (fr-en fr-de cs-en cs-de en-de de-en) -> tmde, tmde + distance_constraint
    (cT-MDE), tmde_f, tmde_p, laser_bilstm with the same update budget -> fairseq-ctx-embed of every
    language of test_2016_flickr (--spm) -> xsim (LASER's definition: ratio margin, k=4, textual error)
    for every language pair, both directions, the pair never seen in training (fr<->cs) first
    -> results .md / .json / .png.

Input (never downloaded here): ``data/task1/tok/`` of https://github.com/multi30k/dataset, i.e.
DATA/{train,val,test_2016_flickr}.lc.norm.tok.{en,de,fr,cs}. Every stage is skipped when its output
exists (a model counts as finished when checkpoints/NAME/run.json exists; an interrupted training
resumes from its checkpoint_last.pt), so the recipe can be rerun after an interruption or with
further --models. Results cover every finished model of the work directory.

    python examples/embedding/multi30k_embedding.py --data multi30k-dataset/data/task1/tok --work work/multi30k
"""
import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPOSITORY = str(Path(HERE).parents[1])  # holds devtools, the helpers of the scripts and tests
for directory in (HERE, REPOSITORY):
    if directory not in sys.path:
        sys.path.insert(0, directory)

from multi30k_report import write_results  # noqa: E402

URL = "https://github.com/multi30k/dataset"
LANGS = ("en", "de", "fr", "cs")
PIVOTS = ("en", "de")
TRAIN_PAIRS = ("fr-en", "fr-de", "cs-en", "cs-de", "en-de", "de-en")
SPLITS = {"train": "train", "valid": "val", "test": "test_2016_flickr"}  # fairseq split -> Multi30k file name
# Evaluation pairs: the pair never seen in training first, then the others.
EVAL_PAIRS = (("fr", "cs"), ("en", "de"), ("fr", "en"), ("fr", "de"), ("cs", "en"), ("cs", "de"))

# Model name -> (label, arch, criterion). Same updates, batches and optimiser for all.
MODELS = {
    "tmde": ("T-MDE", "tmde", "label_smoothed_cross_entropy"),
    "ct_mde": ("cT-MDE (T-MDE + distance_constraint)", "tmde", "distance_constraint"),
    "tmde_f": ("T-MDE_F (no bottleneck)", "tmde_f", "label_smoothed_cross_entropy"),
    "tmde_p": ("T-MDE_P (pyramid queries)", "tmde_p", "label_smoothed_cross_entropy"),
    "laser": ("LASER BiLSTM", "laser_bilstm", "label_smoothed_cross_entropy"),
}

# Model sizes. "small" trains in about half an hour per model on 2 CPU cores; "thesis" is Table 4.1
# (ct_mde: 1024 dims, 16 heads, FFN 4096, 6 encoder / 1 decoder layers, pre-norm, dropout 0.3;
# LASER with a 5-layer BiLSTM of 2x512), for GPUs; "tiny" is for tests.
SIZES = {
    "tiny": {
        "transformer": ["--encoder-embed-dim", "32", "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
                        "--decoder-ffn-embed-dim", "64", "--encoder-layers", "3", "--decoder-layers", "1",
                        "--encoder-attention-heads", "4", "--decoder-attention-heads", "4", "--dropout", "0.1"],
        "pyramid": ["--pyramid-queries", "8,4,2"],
        "laser": ["--encoder-embed-dim", "32", "--encoder-hidden-size", "16", "--encoder-layers", "1",
                  "--decoder-embed-dim", "32", "--decoder-hidden-size", "64", "--decoder-lang-embed-dim", "8",
                  "--dropout", "0.1"],
        "train": ["--lr", "2e-3", "--warmup-updates", "10", "--max-tokens", "1000"],
    },
    "small": {
        "transformer": ["--encoder-embed-dim", "128", "--decoder-embed-dim", "128", "--encoder-ffn-embed-dim", "512",
                        "--decoder-ffn-embed-dim", "512", "--encoder-layers", "3", "--decoder-layers", "1",
                        "--encoder-attention-heads", "4", "--decoder-attention-heads", "4", "--dropout", "0.1"],
        "pyramid": ["--pyramid-queries", "32,16,8"],
        "laser": ["--encoder-embed-dim", "128", "--encoder-hidden-size", "64", "--encoder-layers", "1",
                  "--decoder-embed-dim", "128", "--decoder-hidden-size", "256", "--decoder-lang-embed-dim", "32",
                  "--dropout", "0.1"],
        "train": ["--lr", "1e-3", "--warmup-updates", "400", "--max-tokens", "2000"],
    },
    "thesis": {
        "transformer": ["--encoder-embed-dim", "1024", "--decoder-embed-dim", "1024", "--encoder-ffn-embed-dim", "4096",
                        "--decoder-ffn-embed-dim", "4096", "--encoder-layers", "6", "--decoder-layers", "1",
                        "--encoder-attention-heads", "16", "--decoder-attention-heads", "16", "--dropout", "0.3",
                        "--encoder-normalize-before", "--decoder-normalize-before", "--weight-decay", "1e-4"],
        "pyramid": ["--pyramid-queries", "32,16,8"],
        "laser": ["--encoder-embed-dim", "320", "--encoder-hidden-size", "512", "--encoder-layers", "5",
                  "--decoder-embed-dim", "320", "--decoder-hidden-size", "2048", "--decoder-lang-embed-dim", "32",
                  "--dropout", "0.1"],
        "train": ["--lr", "5e-4", "--warmup-updates", "4000", "--max-tokens", "4000"],
    },
}


class RecipeError(ValueError):
    """Bad input or a work directory prepared with other settings."""


def data_file(data: str, split: str, lang: str) -> str:
    return os.path.join(data, f"{SPLITS[split]}.lc.norm.tok.{lang}")


def count_lines(path: str) -> int:
    with open(path, encoding="utf-8") as handle:
        return sum(1 for _ in handle)


def check_data(data: str, k: int) -> Dict[str, int]:
    """Every file present, the four languages of a split aligned line by line; lines per split."""
    missing = [data_file(data, s, l) for s in SPLITS for l in LANGS if not os.path.isfile(data_file(data, s, l))]
    if missing:
        raise RecipeError(f"Multi30k files missing in --data {data}: {', '.join(os.path.basename(m) for m in missing)}; "
                          f"give the data/task1/tok directory of {URL}")
    counts = {}
    for split in SPLITS:
        lines = {lang: count_lines(data_file(data, split, lang)) for lang in LANGS}
        if len(set(lines.values())) != 1:
            raise RecipeError(f"{SPLITS[split]} is not aligned: " + ", ".join(
                f"{os.path.basename(data_file(data, split, l))} has {n} lines" for l, n in lines.items())
                + "; the four languages of a split must have one translation per line")
        counts[split] = lines[LANGS[0]]
    if counts["test"] <= k:
        raise RecipeError(f"{data_file(data, 'test', LANGS[0])} has {counts['test']} lines; xsim with k={k} nearest "
                          f"neighbours needs more than {k}")
    return counts


def load_state(path: str) -> Optional[dict]:
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def save_state(path: str, state: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(state, handle, indent=2)
    os.replace(tmp, path)


def prepare(data: str, work: str, bpe_vocab: int) -> dict:
    """Joint sentencepiece BPE over the four training files, applied to every split, then the shared
    dictionary and one fairseq-preprocess per pair (docs/embedding.md). Skipped when already done."""
    settings = {"data": os.path.abspath(data), "bpe_vocab": bpe_vocab}
    state_path = os.path.join(work, "prepare.json")
    state = load_state(state_path)
    if state is not None:
        if state["settings"] != settings:
            raise RecipeError(f"{work} was prepared with {state['settings']}, not {settings}; use another --work "
                              f"or delete {work}")
        return state
    import sentencepiece

    from fairseq_ctx.core.sentencepiece_codec import SentencePieceCodec
    from fairseq_ctx.embedding.data.multilingual_binarize import binarize_multilingual

    start = time.time()
    spm_dir, text_dir = os.path.join(work, "spm"), os.path.join(work, "text")
    os.makedirs(spm_dir, exist_ok=True)
    os.makedirs(text_dir, exist_ok=True)
    print(f"== sentencepiece BPE, joint {'/'.join(LANGS)}, vocabulary {bpe_vocab}", flush=True)
    prefix = os.path.join(spm_dir, "spm")
    sentencepiece.SentencePieceTrainer.train(
        input=",".join(data_file(data, "train", lang) for lang in LANGS), model_prefix=prefix, vocab_size=bpe_vocab,
        model_type="bpe", character_coverage=1.0, hard_vocab_limit=False, num_threads=2, minloglevel=2)
    codec = SentencePieceCodec(prefix + ".model")  # the encoding fairseq-ctx-embed --spm applies
    for split in SPLITS:
        for lang in LANGS:
            with open(data_file(data, split, lang), encoding="utf-8") as src, \
                    open(os.path.join(text_dir, f"{split}.{lang}"), "w", encoding="utf-8") as dst:
                dst.writelines(codec.encode(line) + "\n" for line in src)
    print(f"== shared dictionary, fairseq-preprocess for {' '.join(TRAIN_PAIRS)}", flush=True)
    binarize_multilingual(Path(text_dir), Path(work) / "data-bin", TRAIN_PAIRS, LANGS)
    state = {"settings": settings, "spm": prefix + ".model", "data_bin": os.path.join(work, "data-bin"),
             "wall_time_s": time.time() - start}
    save_state(state_path, state)
    return state


def train_args(name: str, data_bin: str, save_dir: str, size: str, updates: int, seed: int) -> List[str]:
    """The fairseq-train arguments of one model."""
    import fairseq_ctx

    _, arch, criterion = MODELS[name]
    sizes = SIZES[size]
    model = sizes["laser"] if arch == "laser_bilstm" else sizes["transformer"]
    if arch == "tmde_p":
        model = model + sizes["pyramid"]
    return [data_bin, "--user-dir", os.path.dirname(os.path.abspath(fairseq_ctx.__file__)),
            "--task", "multilingual_embedding", "--lang-pairs", ",".join(TRAIN_PAIRS),
            "--arch", arch, *model, "--criterion", criterion, "--label-smoothing", "0.1",
            "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--lr-scheduler", "inverse_sqrt", *sizes["train"],
            "--max-update", str(updates), "--seed", str(seed), "--cpu", "--num-workers", "0",
            "--save-dir", save_dir, "--no-epoch-checkpoints", "--log-format", "simple", "--log-interval", "50"]


def quote(args: Sequence[str]) -> str:
    import shlex

    return " ".join(shlex.quote(a) for a in args)


def train(args: List[str], log_path: str) -> Tuple[float, float]:
    """fairseq-train in this process (saves an interpreter start per model); wall and CPU seconds
    (CPU time is what the run takes on otherwise idle cores, wall time what it took here)."""
    from fairseq import distributed_utils, options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq_cli import train as fairseq_train

    parsed = options.parse_args_and_arch(options.get_training_parser(), input_args=args)
    cfg = convert_namespace_to_omegaconf(parsed)
    handler = logging.FileHandler(log_path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s | %(levelname)s | %(name)s | %(message)s"))
    logging.getLogger().addHandler(handler)
    start, cpu_start = time.time(), time.process_time()
    try:
        distributed_utils.call_main(cfg, fairseq_train.main)
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
    return time.time() - start, time.process_time() - cpu_start


def train_models(names: Sequence[str], prep: dict, work: str, size: str, updates: int, seed: int) -> None:
    for name in names:
        save_dir = os.path.join(work, "checkpoints", name)
        args = train_args(name, prep["data_bin"], save_dir, size, updates, seed)
        run_path = os.path.join(save_dir, "run.json")
        done = load_state(run_path)
        if done is not None:
            if done["args"] != args:
                raise RecipeError(f"{name} in {save_dir} was trained with other settings ({done['command']}); "
                                  f"use another --work or delete {save_dir}")
            print(f"== {name}: finished earlier ({done['updates']} updates, {done['wall_time_s']:.0f} s), skipped")
            continue
        os.makedirs(save_dir, exist_ok=True)
        print(f"== train {name} ({updates} updates), log {os.path.join(work, f'train.{name}.log')}", flush=True)
        wall, cpu = train(args, os.path.join(work, f"train.{name}.log"))
        save_state(run_path, {"args": args, "command": "fairseq-train " + quote(args), "updates": updates,
                              "size": size, "wall_time_s": wall, "cpu_time_s": cpu})


def evaluate(name: str, prep: dict, data: str, work: str, k: int) -> List[dict]:
    """fairseq-ctx-embed every test language (with --spm), then xsim (ratio margin, textual error)
    for every pair of EVAL_PAIRS in both directions: one row per direction."""
    from fairseq_ctx.embedding.embedder import Embedder, embed_file
    from fairseq_ctx.embedding.xsim import xsim_files

    out = os.path.join(work, "emb", name)
    os.makedirs(out, exist_ok=True)
    checkpoint = os.path.join(work, "checkpoints", name, "checkpoint_last.pt")
    for lang in LANGS:
        embedder = Embedder(checkpoint, lang, spm=prep["spm"])
        embed_file(embedder, data_file(data, "test", lang), os.path.join(out, f"test.{lang}.npy"),
                   max_tokens=6000, chunk_lines=5000)
    rows = []
    for src, tgt in EVAL_PAIRS:
        result = xsim_files(os.path.join(out, f"test.{src}.npy"), os.path.join(out, f"test.{tgt}.npy"), ("ratio",), k,
                            data_file(data, "test", src), data_file(data, "test", tgt))["ratio"]
        for direction, (a, b) in (("src2tgt", (src, tgt)), ("tgt2src", (tgt, src))):
            error = result[direction]
            rows.append({"model": name, "src": a, "tgt": b, "error_percent": error.percent, "errors": error.errors,
                         "total": error.total, "error_type": error.error_type,
                         "seen_in_training": f"{a}-{b}" in TRAIN_PAIRS or f"{b}-{a}" in TRAIN_PAIRS})
    return rows


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help=f"directory with {{train,val,test_2016_flickr}}.lc.norm.tok."
                        f"{{{','.join(LANGS)}}}: data/task1/tok of {URL}")
    parser.add_argument("--work", default="work/multi30k_embedding", help="everything but the results goes here")
    parser.add_argument("--out-dir", default=os.path.join(HERE, "results"),
                        help="where multi30k_embedding.{md,json,png} are written")
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"comma-separated subset of {','.join(MODELS)} to train (finished ones are skipped)")
    parser.add_argument("--size", choices=sorted(SIZES), default="small",
                        help="model sizes: small (CPU, ~30 min per model), thesis (Table 4.1, GPUs), tiny (tests)")
    parser.add_argument("--updates", type=int, default=2400,
                        help="training updates of every model (2400: about 1.4 epochs of the 6 pairs at --size small)")
    parser.add_argument("--bpe-vocab", type=int, default=8000, help="joint sentencepiece BPE vocabulary")
    parser.add_argument("--k", type=int, default=4, help="nearest neighbours of the xsim ratio margin (LASER: 4)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (1 is fastest for small models on a shared machine)")
    parser.add_argument("--no-eval", action="store_true", help="train only; write no results")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown or not names:
        parser.error(f"--models {args.models}: unknown {', '.join(unknown) or '(none given)'}; "
                     f"choose from {','.join(MODELS)}")
    args.models = names
    if args.updates < 1:
        parser.error(f"--updates {args.updates}: must be at least 1")
    return args


def main(argv: Optional[Sequence[str]] = None) -> dict:
    args = parse_args(argv)
    command = "python examples/embedding/multi30k_embedding.py " + quote(sys.argv[1:] if argv is None else argv)
    import torch

    torch.set_num_threads(args.threads)
    try:
        counts = check_data(args.data, args.k)
        os.makedirs(args.work, exist_ok=True)
        prep = prepare(args.data, args.work, args.bpe_vocab)
        train_models(args.models, prep, args.work, args.size, args.updates, args.seed)
    except RecipeError as err:
        sys.exit(f"multi30k_embedding: error: {err}")
    if args.no_eval:
        return {}
    finished = [n for n in MODELS if os.path.exists(os.path.join(args.work, "checkpoints", n, "run.json"))]
    start = time.time()
    rows = []
    for name in finished:
        print(f"== embed test_2016_flickr and xsim: {name}", flush=True)
        rows += evaluate(name, prep, args.data, args.work, args.k)
    runs = {n: load_state(os.path.join(args.work, "checkpoints", n, "run.json")) for n in finished}
    return write_results(args.out_dir, rows, runs, {n: MODELS[n][0] for n in finished}, counts, prep["wall_time_s"],
                         time.time() - start, command, vars(args), TRAIN_PAIRS, EVAL_PAIRS[0])


if __name__ == "__main__":
    main()
