#!/usr/bin/env bash
# Multilingual document embedding demo (Li, 2021, ch. 4): generated 5-language corpus -> shared dictionary
# -> fairseq-preprocess per pair -> tmde / tmde + distance_constraint / tmde_f / laser_bilstm with the
# same update budget, plus a bilingual pa<->pb run with and without the constraint
# -> retrieval error xa<->xb, X-Y document classification, t-SNE picture.
# About 13-20 minutes on 2 CPU cores, one training at a time. Usage: bash examples/embedding/demo.sh [WORK_DIR]
# (default work/embedding). The pictures need matplotlib, t-SNE also scikit-learn (pip install -e '.[plots]');
# without scikit-learn the pictures are PCA.
set -euo pipefail
python -c 'import sys; from fairseq_ctx.core.plots import missing_plots_message as m, plots_available as a
a() or sys.exit(m("examples/embedding/demo.sh (its t-SNE pictures)"))'
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${1:-work/embedding}
UPDATES=${UPDATES:-1200}
STARTED=$(date +%s)
COMMAND="UPDATES=$UPDATES bash examples/embedding/demo.sh $*"
# One intra-op thread: these models are tiny, and on a shared machine torch's thread pool spins
# against other processes (measured 0.2 vs 6 updates/s for the same run under load).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
USER_DIR=$(fairseq-ctx-user-dir)
LANGS="pa pb xa xb xc"
PAIRS=xa-pa,xa-pb,xb-pa,xb-pb,xc-pa,xc-pb,pa-pb,pb-pa
rm -rf "$WORK"; mkdir -p "$WORK"; cd "$WORK"

echo "== 1/5 generate the corpus (pivots pa, pb; other languages xa, xb, xc)"
fairseq-ctx-make-multilingual-corpus raw --train-docs 600 --valid-docs 40 --test-docs 200

echo "== 2/5 one shared dictionary, then fairseq-preprocess per pair"
for lang in $LANGS; do cat raw/train.$lang; done > raw/train.all
fairseq-preprocess --only-source --trainpref raw/train.all --destdir data-bin/dict --dict-only --workers 1 > preprocess.log 2>&1
for pair in ${PAIRS//,/ }; do
  fairseq-preprocess --source-lang ${pair%-*} --target-lang ${pair#*-} \
    --trainpref raw/train --validpref raw/valid --testpref raw/test \
    --srcdict data-bin/dict/dict.txt --tgtdict data-bin/dict/dict.txt --destdir data-bin --workers 1 >> preprocess.log 2>&1
done

TRANSFORMER="--encoder-embed-dim 64 --decoder-embed-dim 64 --encoder-ffn-embed-dim 128 --decoder-ffn-embed-dim 128
  --encoder-layers 3 --decoder-layers 1 --encoder-attention-heads 4 --decoder-attention-heads 4"
LASER="--encoder-embed-dim 64 --encoder-hidden-size 64 --encoder-layers 1 --decoder-embed-dim 64
  --decoder-hidden-size 128 --decoder-lang-embed-dim 16"
train() {  # NAME PAIRS ARCH SIZE CRITERION...
  local name=$1 pairs=$2 arch=$3 size=$4; shift 4
  fairseq-train data-bin --user-dir "$USER_DIR" --task multilingual_embedding --lang-pairs "$pairs" \
    --arch "$arch" $size --dropout 0.1 "$@" --label-smoothing 0.1 \
    --optimizer adam --adam-betas '(0.9,0.98)' --lr 2e-3 --lr-scheduler inverse_sqrt --warmup-updates 100 \
    --max-tokens 1500 --max-update "$UPDATES" --seed 1 --cpu --num-workers 0 \
    --save-dir "checkpoints/$name" --no-epoch-checkpoints --no-save-optimizer-state \
    --log-format simple --log-interval 50 > "train.$name.log" 2>&1
  echo "   $name: $(grep "valid on 'valid'" "train.$name.log" | tail -n 1 | grep -o 'loss [0-9.]*' | head -n 1)"
}

echo "== 3/5 train (same budget: $UPDATES updates each)"
train tmde     "$PAIRS" tmde "$TRANSFORMER" --criterion label_smoothed_cross_entropy
train ct_mde_small "$PAIRS" tmde "$TRANSFORMER" --criterion distance_constraint
train ct_mde_detached "$PAIRS" tmde "$TRANSFORMER" --criterion distance_constraint --distance-detach-target --distance-beta 0.5
train ct_mde_parallel "$PAIRS" tmde "$TRANSFORMER" --criterion distance_constraint --distance-normalizer parallel
train tmde_f   "$PAIRS" tmde_f "$TRANSFORMER" --criterion label_smoothed_cross_entropy
train laser    "$PAIRS" laser_bilstm "$LASER" --criterion label_smoothed_cross_entropy
train bi_tmde  pa-pb,pb-pa tmde "$TRANSFORMER" --criterion label_smoothed_cross_entropy
train bi_ct_mde pa-pb,pb-pa tmde "$TRANSFORMER" --criterion distance_constraint
train bi_ct_mde_detached pa-pb,pb-pa tmde "$TRANSFORMER" --criterion distance_constraint --distance-detach-target --distance-beta 0.5
train bi_ct_mde_b05 pa-pb,pb-pa tmde "$TRANSFORMER" --criterion distance_constraint --distance-beta 0.5
train bi_ct_mde_detached_b10 pa-pb,pb-pa tmde "$TRANSFORMER" --criterion distance_constraint --distance-detach-target --distance-beta 1.0

echo "== 4/5 the command-line tools on one model"
fairseq-ctx-embed --path checkpoints/ct_mde_small/checkpoint_last.pt --lang xa --input raw/test.xa --output xa.npy
fairseq-ctx-embed --path checkpoints/ct_mde_small/checkpoint_last.pt --lang xb --input raw/test.xb --output xb.npy
fairseq-ctx-xsim xa.npy xb.npy

echo "== 5/5 embed every model's documents and sentences; retrieval, X-Y classification, t-SNE"
python "$HERE/evaluate.py" --work . --out-dir "$HERE" --updates "$UPDATES" --started "$STARTED" --command "$COMMAND"
