#!/usr/bin/env bash
# Multimodal and multi-source demo: generated corpus where the translation of an ambiguous
# source word (bank → ufer|bank, bat, glasses, letter) is decided only by the auxiliary input —
# either the "image" features (img) or a second source language (fr) that names the sense
# with a distinct word (bank → rive|banque).
# For each auxiliary input: trains the four hierarchical_attention_decoder strategies and the
# multisource_rnn with hierarchical attention (plus one text-only Transformer that both share, and
# for the image hierarchical with half the heads over the image: --input-attention-heads 4,2),
# decodes with beam 5, scores the ambiguous words, shuffles the auxiliary input across the test
# set (fairseq-ctx-adversarial) and plots the attention over inputs. The harder setting gives
# each sentence three images, only one of which shows the intended sense (the others a sense of
# another ambiguous word), and trains the five image models again on it.
# Writes results.md, attention{,-rnn}{,-fr}.png/.json.
# Usage: bash examples/multimodal_mt/demo.sh [WORK_DIR] [MAX_UPDATE]   (default work/multimodal_demo, 150)
set -euo pipefail
WORK=${1:-work/multimodal_demo}
MAX_UPDATE=${2:-150}
HERE=$(cd "$(dirname "$0")" && pwd)
USER_DIR=$(fairseq-ctx-user-dir)
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK"

echo "== generate corpus and fairseq-preprocess (en-de joined dictionary; fr, the second source, its own)"
fairseq-ctx-make-multimodal-corpus raw --test 200
SPLITS="--trainpref raw/train --validpref raw/valid --testpref raw/test"
fairseq-preprocess --source-lang en --target-lang de $SPLITS --destdir data-bin --joined-dictionary \
  --workers 2 > preprocess.log 2>&1
fairseq-preprocess --source-lang fr --target-lang de --only-source $SPLITS --destdir fr-bin \
  --workers 2 > preprocess-fr.log 2>&1
cp raw/*.img.npy fr-bin/dict.fr.txt fr-bin/*.fr-de.fr.bin fr-bin/*.fr-de.fr.idx data-bin/
echo "== harder setting: the same sentences with three images each (img1-img3)"
fairseq-ctx-make-multimodal-corpus raw-hard --test 200 --images 3
cp -r data-bin data-bin-hard && cp raw-hard/*.npy data-bin-hard/

# what each auxiliary input adds to the task's command line (also read by the adversarial and plot tools)
declare -A AUX=([img]="--feature-inputs img" [fr]="--extra-source-langs fr --extra-source-dict own"
                [img3]="--feature-inputs img1,img2,img3")
LANGS="--source-lang en --target-lang de"
MODEL="--share-all-embeddings --encoder-embed-dim 64 --decoder-embed-dim 64 --encoder-ffn-embed-dim 128
  --decoder-ffn-embed-dim 128 --encoder-layers 2 --decoder-layers 2 --encoder-attention-heads 4 --decoder-attention-heads 4"
RNN="--encoder-embed-dim 64 --encoder-hidden-size 64 --decoder-embed-dim 64 --decoder-hidden-size 128 --attention-dim 64"
COMMON="--criterion label_smoothed_cross_entropy --label-smoothing 0.1 --dropout 0.1 --max-tokens 2000
  --max-update $MAX_UPDATE --seed 1 --cpu --no-epoch-checkpoints --disable-validation --log-format simple --log-interval 50"
TRANSFORMER_OPT="--optimizer adam --adam-betas (0.9,0.98) --lr 3e-3 --lr-scheduler inverse_sqrt --warmup-updates 100"
RNN_OPT="--optimizer adam --lr 3e-3 --clip-norm 1.0"

train_and_attack() {  # NAME AUX_ARGS ARCH_ARGS...   (data: $DATA, default data-bin)
  local name=$1 aux=$2 data=${DATA:-data-bin}
  shift 2
  echo "== $name: fairseq-train"
  fairseq-train $data --user-dir "$USER_DIR" --task multimodal_translation $LANGS $aux "$@" $COMMON \
    --save-dir ckpt-$name > train-$name.log 2>&1
  fairseq-ctx-adversarial $data --path ckpt-$name/checkpoint_last.pt $LANGS $aux \
    --key raw/test.key --beam 5 --cpu --json adv-$name.json | tee adv-$name.txt
}

train_and_attack text-only "" --arch hierarchical_attention_decoder $MODEL $TRANSFORMER_OPT
for input in img fr; do
  suffix=$([ $input = img ] && echo "" || echo "-$input")
  for strategy in serial parallel flat hierarchical; do
    train_and_attack $strategy$suffix "${AUX[$input]}" --arch hierarchical_attention_decoder \
      --combination $strategy $MODEL $TRANSFORMER_OPT
  done
  train_and_attack rnn-hierarchical$suffix "${AUX[$input]}" --arch multisource_rnn --combination hierarchical \
    $RNN $RNN_OPT
done
# hierarchical with half the heads over the image (4 over the source, 2 over the image), the
# cheaper form timed by benchmarks/multisource_speed.py --image-heads
train_and_attack hierarchical-2-image-heads "${AUX[img]}" --arch hierarchical_attention_decoder \
  --combination hierarchical --input-attention-heads 4,2 $MODEL $TRANSFORMER_OPT
# the harder setting (the text, and so the text-only model, is the same)
for strategy in serial parallel flat hierarchical; do
  DATA=data-bin-hard train_and_attack $strategy-img3 "${AUX[img3]}" --arch hierarchical_attention_decoder \
    --combination $strategy $MODEL $TRANSFORMER_OPT
done
DATA=data-bin-hard train_and_attack rnn-hierarchical-img3 "${AUX[img3]}" --arch multisource_rnn \
  --combination hierarchical $RNN $RNN_OPT

python - > results.md <<'PY'
import json, re

def row(name, shuffled_input):
    r = json.load(open(f"adv-{name}.json"))
    updates = re.findall(r"num_updates (\d+)", open(f"train-{name}.log").read())[-1]
    shuffled = r.get(f"shuffled {shuffled_input}")
    attacked = f"{shuffled['accuracy']:.3f} | {shuffled['bleu']:.1f} |" if shuffled else "n/a (no auxiliary input) | n/a |"
    return f"| {name} | {updates} | {r['original']['bleu']:.1f} | {r['original']['accuracy']:.3f} | {attacked}"

for input, title, suffix in [("img", "Auxiliary input: image features (img)", ""),
                             ("fr", "Auxiliary input: second source language (fr)", "-fr")]:
    print(f"### {title}\n")
    print(f"| model | updates | BLEU | ambiguous-word accuracy | accuracy, {input} shuffled (adversarial) | BLEU, {input} shuffled |")
    print("|---|---|---|---|---|---|")
    strategies = ["serial", "parallel", "flat", "hierarchical"] + (["hierarchical-2-image-heads"] if input == "img" else [])
    for name in ["text-only"] + [s + suffix for s in strategies + ["rnn-hierarchical"]]:
        print(row(name, input))
    print()

print("### Harder setting: three images per sentence (img1-img3), one shows the intended sense\n")
print("| model | updates | BLEU | ambiguous-word accuracy | accuracy, img1 / img2 / img3 shuffled |")
print("|---|---|---|---|---|")
for name in ["text-only"] + [s + "-img3" for s in ["serial", "parallel", "flat", "hierarchical", "rnn-hierarchical"]]:
    r = json.load(open(f"adv-{name}.json"))
    updates = re.findall(r"num_updates (\d+)", open(f"train-{name}.log").read())[-1]
    shuffled = " / ".join(f"{r[f'shuffled img{i}']['accuracy']:.3f}" for i in (1, 2, 3)) if name != "text-only" else "n/a"
    print(f"| {name} | {updates} | {r['original']['bleu']:.1f} | {r['original']['accuracy']:.3f} | {shuffled} |")
print()
PY
cat results.md

echo "== attention over inputs (hierarchical β; Transformer last layer and RNN) for three test sentences"
for input in img fr; do
  suffix=$([ $input = img ] && echo "" || echo "-$input")
  fairseq-ctx-attention-plot data-bin --path ckpt-hierarchical$suffix/checkpoint_last.pt ${AUX[$input]} \
    --sentences 0,1,2 --out attention$suffix
  fairseq-ctx-attention-plot data-bin --path ckpt-rnn-hierarchical$suffix/checkpoint_last.pt ${AUX[$input]} \
    --sentences 0,1,2 --out attention-rnn$suffix
  cp attention$suffix.png attention$suffix.json attention-rnn$suffix.png attention-rnn$suffix.json "$HERE/"
done
cp results.md "$HERE/"
