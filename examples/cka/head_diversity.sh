#!/usr/bin/env bash
# Reproduction 2 (Yun 2022, Table 4.5 direction): baseline vs --drophead 0.5 vs the HSIC regularizer,
# on the generated context corpus, fairseq's stock `transformer` trained through the `head_diversity`
# criterion (same seed, data and number of updates), then fairseq-ctx-analyze-heads on each.
# Writes examples/cka/results/head_diversity.{csv,md} and heads_*.png. ~10-20 minutes on 2 shared CPU cores.
# Usage: bash examples/cka/head_diversity.sh [WORK_DIR]   (default: work/cka_heads, recreated)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${1:-work/cka_heads}
UPDATES=${UPDATES:-150}
HSIC_LAMBDA=${HSIC_LAMBDA:-0.1}
USER_DIR=$(fairseq-ctx-user-dir)
rm -rf "$WORK"; mkdir -p "$WORK" "$HERE/results"; cd "$WORK"

fairseq-ctx-make-corpus raw --train-docs 300
for split in train valid test; do
  fairseq-ctx-prepare-docs --src-docs raw/$split.en --tgt-docs raw/$split.de --out-prefix prep/$split --src-lang en --tgt-lang de
done
fairseq-preprocess --source-lang en --target-lang de --trainpref prep/train --validpref prep/valid --testpref prep/test \
  --destdir data-bin --joined-dictionary --workers 2 > preprocess.log 2>&1
for split in train valid test; do cp prep/$split.docids data-bin/$split.docids; done

train() {  # name, extra criterion options
  local name=$1; shift
  fairseq-train data-bin --user-dir "$USER_DIR" --task context_translation --context-size 0 --arch transformer \
    --share-all-embeddings --encoder-embed-dim 64 --decoder-embed-dim 64 --encoder-ffn-embed-dim 128 \
    --decoder-ffn-embed-dim 128 --encoder-layers 2 --decoder-layers 2 --encoder-attention-heads 4 --decoder-attention-heads 4 \
    --optimizer adam --adam-betas '(0.9,0.98)' --lr 2e-3 --lr-scheduler inverse_sqrt --warmup-updates 50 \
    --criterion head_diversity --label-smoothing 0.1 --dropout 0.1 "$@" \
    --max-tokens 1000 --max-update "$UPDATES" --seed 1 --cpu --no-epoch-checkpoints --no-last-checkpoints \
    --save-dir ckpt_$name --log-format simple --log-interval 25 --disable-validation --save-interval-updates "$UPDATES" > train_$name.log 2>&1
  fairseq-ctx-analyze-heads data-bin --path ckpt_$name/checkpoint_*_"$UPDATES".pt --split valid \
    --tag "$name" --output-dir analysis_$name > analysis_$name.log
  cat analysis_$name.log
}
train baseline
train drophead0.5 --drophead 0.5
train hsic --hsic-lambda "$HSIC_LAMBDA"
python "$HERE/summarize_heads.py" analysis_baseline analysis_drophead0.5 analysis_hsic --out "$HERE/results/head_diversity" \
  --command "UPDATES=$UPDATES HSIC_LAMBDA=$HSIC_LAMBDA bash examples/cka/head_diversity.sh $*"
cp analysis_*/heads_*.png "$HERE/results/"
