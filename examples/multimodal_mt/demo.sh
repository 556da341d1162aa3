#!/usr/bin/env bash
# Multimodal demo: generated corpus where the translation of an ambiguous source word
# (bank → ufer|bank, bat, glasses, letter) is decided only by the "image" features.
# Trains a text-only Transformer, the four hierarchical_attention_decoder strategies, the
# multisource_rnn with hierarchical attention,
# decodes with beam 5, scores the ambiguous words, shuffles the images (fairseq-ctx-adversarial)
# and plots the hierarchical model's attention over inputs. Writes results.md, attention.png.
# Usage: bash examples/multimodal_mt/demo.sh [WORK_DIR] [MAX_UPDATE]   (default work/multimodal_demo, 150)
set -euo pipefail
WORK=${1:-work/multimodal_demo}
MAX_UPDATE=${2:-150}
HERE=$(cd "$(dirname "$0")" && pwd)
USER_DIR=$(fairseq-ctx-user-dir)
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK"

echo "== generate corpus and fairseq-preprocess"
fairseq-ctx-make-multimodal-corpus raw --test 200
fairseq-preprocess --source-lang en --target-lang de --trainpref raw/train --validpref raw/valid \
  --testpref raw/test --destdir data-bin --joined-dictionary --workers 2 > preprocess.log 2>&1
cp raw/*.img.npy data-bin/

MODEL="--share-all-embeddings --encoder-embed-dim 64 --decoder-embed-dim 64 --encoder-ffn-embed-dim 128
  --decoder-ffn-embed-dim 128 --encoder-layers 2 --decoder-layers 2 --encoder-attention-heads 4 --decoder-attention-heads 4"
TRAIN="--optimizer adam --adam-betas (0.9,0.98) --lr 3e-3 --lr-scheduler inverse_sqrt --warmup-updates 100
  --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --dropout 0.1 --max-tokens 2000
  --max-update $MAX_UPDATE --seed 1 --cpu --no-epoch-checkpoints --disable-validation --log-format simple --log-interval 50"

for name in text-only serial parallel flat hierarchical; do
  if [ $name = text-only ]; then INPUTS=""; COMB=""; else INPUTS="img"; COMB="--combination $name"; fi
  echo "== $name: fairseq-train"
  fairseq-train data-bin --user-dir "$USER_DIR" --task multimodal_translation --feature-inputs "$INPUTS" \
    --arch hierarchical_attention_decoder $COMB $MODEL $TRAIN --save-dir ckpt-$name > train-$name.log 2>&1
  fairseq-ctx-adversarial data-bin --path ckpt-$name/checkpoint_last.pt --feature-inputs "$INPUTS" \
    --key raw/test.key --beam 5 --cpu --json adv-$name.json | tee adv-$name.txt
done

echo "== RNN, hierarchical attention combination: fairseq-train"
fairseq-train data-bin --user-dir "$USER_DIR" --task multimodal_translation --feature-inputs img \
  --arch multisource_rnn --combination hierarchical --encoder-embed-dim 64 --encoder-hidden-size 64 \
  --decoder-embed-dim 64 --decoder-hidden-size 128 --attention-dim 64 --optimizer adam --lr 3e-3 --clip-norm 1.0 \
  --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --dropout 0.1 --max-tokens 2000 \
  --max-update $MAX_UPDATE --seed 1 --cpu --no-epoch-checkpoints --disable-validation \
  --log-format simple --log-interval 50 --save-dir ckpt-rnn-hierarchical > train-rnn-hierarchical.log 2>&1
fairseq-ctx-adversarial data-bin --path ckpt-rnn-hierarchical/checkpoint_last.pt --feature-inputs img \
  --key raw/test.key --beam 5 --cpu --json adv-rnn-hierarchical.json | tee adv-rnn-hierarchical.txt

python - > results.md <<'PY'
import json, os, re
print("| model | updates | BLEU | ambiguous-word accuracy | accuracy, images shuffled (adversarial) |")
print("|---|---|---|---|---|")
for name in ["text-only", "serial", "parallel", "flat", "hierarchical", "rnn-hierarchical"]:
    r = json.load(open(f"adv-{name}.json"))
    updates = re.findall(r"num_updates (\d+)", open(f"train-{name}.log").read())[-1]
    shuffled = r.get("shuffled img", {}).get("accuracy")
    print(f"| {name} | {updates} | {r['original']['bleu']:.1f} | {r['original']['accuracy']:.3f} | "
          + (f"{shuffled:.3f} |" if shuffled is not None else "n/a (no image input) |"))
PY
cat results.md

echo "== attention over inputs (hierarchical β; Transformer last layer and RNN) for three test sentences"
fairseq-ctx-attention-plot data-bin --path ckpt-hierarchical/checkpoint_last.pt --feature-inputs img \
  --sentences 0,1,2 --out attention
fairseq-ctx-attention-plot data-bin --path ckpt-rnn-hierarchical/checkpoint_last.pt --feature-inputs img \
  --sentences 0,1,2 --out attention-rnn
cp results.md attention.png attention.json attention-rnn.png attention-rnn.json "$HERE/"
