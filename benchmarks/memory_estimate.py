"""Parameter counts and per-GPU training memory for the thesis-size presets (docs/scaling.md).

Parameters are counted exactly: each preset's model is built by fairseq (same CLI parsing as
fairseq-train) on the meta device, with a generated dictionary of the preset's vocabulary size.
Activation memory is an estimate from the per-layer formulas of Korthikanti et al. (2022),
"Reducing Activation Recomputation in Large Transformer Models", generalised to an FFN of width F,
in bytes for 16-bit activations (s = length, b = sentences, h = model dim, a = heads):
    self-attention block 11·s·b·h + 5·a·s²·b;  FFN block 3·s·b·h + 4·s·b·F;  2 LayerNorms 4·s·b·h
    cross-attention (query length s, memory length m) 9·s·b·h + 4·m·b·h + 5·a·s·m·b
    output layer + float32 loss 6·s·b·V
fp32 training doubles the activation bytes. Model states per parameter: fp32 + Adam 16 bytes
(weights, gradients, two moments); fairseq --fp16 20 bytes (fp16 weights and gradients plus the
fp32 master copy, its gradients and Adam moments). Nothing here was measured on a GPU.

    python -m benchmarks.memory_estimate [--max-tokens 4096] [--sentence-length 32] [--context-size 2]
"""
import argparse
import logging
import warnings
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import torch
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

import fairseq_ctx
fairseq_ctx.register()

USER_DIR = str(Path(fairseq_ctx.__file__).parent)
GIB = 1024 ** 3


@dataclass
class Preset:
    """A thesis-size configuration: arch, task, vocabulary and the activation layout."""
    name: str
    task: str
    arch: str
    vocab: int
    layout: str  # "context" (source + N context passes), "concat" (one (N+1)·T pass), "embedding", "lstm"
    extra: List[str]


PRESETS = [
    Preset("hmce (512, 6+6, 8 heads)", "context_translation", "hmce", 32000, "context", []),
    Preset("hce (512, 6+6, 8 heads)", "context_translation", "hce", 32000, "context", []),
    Preset("dat (512, 6+6)", "context_translation", "dat", 32000, "context", []),
    Preset("han (512, 6+6)", "context_translation", "han", 32000, "context", []),
    Preset("dct (512, 6+6)", "context_translation", "dct", 32000, "context", []),
    Preset("ctx_concat / TwC (512, 6+6)", "context_translation", "ctx_concat", 32000, "concat", []),
    Preset("ct_mde (1024, 16 heads, FFN 4096, 6+1)", "multilingual_embedding", "ct_mde", 50000, "embedding", []),
    Preset("tmde_p (ct_mde sizes, pyramid 32/16/8)", "multilingual_embedding", "tmde_p", 50000, "embedding",
           ["--encoder-embed-dim", "1024", "--decoder-embed-dim", "1024", "--encoder-ffn-embed-dim", "4096",
            "--decoder-ffn-embed-dim", "4096", "--encoder-attention-heads", "16", "--decoder-attention-heads", "16"]),
    Preset("laser_bilstm (LASER: 5x512 BiLSTM, 2048 decoder)", "multilingual_embedding", "laser_bilstm", 50000,
           "lstm", ["--encoder-layers", "5"]),
]
LANG_PAIRS = "de-en,de-es,en-es,es-en,fr-en,fr-es,it-en,it-es"


def write_dictionaries(root: Path, vocab: int) -> None:
    lines = "".join(f"tok{i} 1\n" for i in range(vocab - 4))  # fairseq adds <s> <pad> </s> <unk>
    for name in ("dict.txt", "dict.en.txt", "dict.de.txt"):
        (root / name).write_text(lines)


def build_on_meta(preset: Preset, root: Path):
    task_args = (["--context-size", "2", "--source-lang", "en", "--target-lang", "de"] if preset.task == "context_translation"
                 else ["--lang-pairs", LANG_PAIRS, "--criterion", "distance_constraint"])
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, input_args=[
        str(root), "--user-dir", USER_DIR, "--task", preset.task, "--arch", preset.arch, *task_args, *preset.extra,
        *(["--share-all-embeddings"] if preset.task == "context_translation" else []),
    ])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    with torch.device("meta"):
        model = task.build_model(cfg.model)
    return model, cfg.model


def encoder_layer_bytes(s: float, b: float, h: int, f: int, a: int) -> float:
    return (11 * s * b * h + 5 * a * s * s * b) + (3 * s * b * h + 4 * s * b * f) + 4 * s * b * h


def decoder_layer_bytes(s: float, m: float, b: float, h: int, f: int, a: int) -> float:
    return encoder_layer_bytes(s, b, h, f, a) + 9 * s * b * h + 4 * m * b * h + 5 * a * s * m * b + 2 * s * b * h


def activation_bytes(preset: Preset, cfg, tokens: int, length: int, context: int) -> Optional[float]:
    """16-bit activation bytes for one batch of ``tokens`` target tokens of sentences of ``length``."""
    if preset.layout == "lstm":
        return None
    b = tokens / length
    h, f, a = cfg.encoder_embed_dim, cfg.encoder_ffn_embed_dim, cfg.encoder_attention_heads
    dh, df, da = cfg.decoder_embed_dim, cfg.decoder_ffn_embed_dim, cfg.decoder_attention_heads
    enc_layers, dec_layers = cfg.encoder_layers, cfg.decoder_layers
    if preset.layout == "concat":
        encoder = enc_layers * encoder_layer_bytes((context + 1) * length, b, h, f, a)
        memory = (context + 1) * length
    elif preset.layout == "context":
        encoder = (1 + context) * enc_layers * encoder_layer_bytes(length, b, h, f, a)
        memory = length
    else:
        encoder = enc_layers * encoder_layer_bytes(length, b, h, f, a)
        memory = length if getattr(cfg, "full_encoder_attention", False) else 1
    decoder = dec_layers * decoder_layer_bytes(length, memory, b, dh, df, da)
    return encoder + decoder + 6 * length * b * preset.vocab


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-tokens", type=int, default=4096, help="tokens per GPU per forward (fairseq --max-tokens)")
    parser.add_argument("--sentence-length", type=int, default=32, help="average sentence length in tokens")
    parser.add_argument("--context-size", type=int, default=2, help="context sentences N (thesis: 2)")
    opts = parser.parse_args()
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    print(f"max-tokens {opts.max_tokens} per GPU, sentences of {opts.sentence_length} tokens, N = {opts.context_size}")
    print("| preset | vocab | parameters | fp32+Adam states | --fp16 states | activations (16-bit) | total --fp16 | total fp32 |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for preset in PRESETS:
            root = Path(tmp) / preset.arch
            root.mkdir()
            write_dictionaries(root, preset.vocab)
            model, cfg = build_on_meta(preset, root)
            params = sum(p.numel() for p in model.parameters())
            acts = activation_bytes(preset, cfg, opts.max_tokens, opts.sentence_length, opts.context_size)
            act_text = "n/a (LSTM)" if acts is None else f"{acts / GIB:.2f} GiB"
            fp16 = "" if acts is None else f"{(20 * params + acts) / GIB:.2f} GiB"
            fp32 = "" if acts is None else f"{(16 * params + 2 * acts) / GIB:.2f} GiB"
            print(f"| {preset.name} | {preset.vocab} | {params / 1e6:.1f}M | {16 * params / GIB:.2f} GiB "
                  f"| {20 * params / GIB:.2f} GiB | {act_text} | {fp16} | {fp32} |")


if __name__ == "__main__":
    main()
