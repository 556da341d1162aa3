#!/usr/bin/env bash
# Main demo: generate the document corpus -> fairseq-preprocess -> fairseq-train --arch hmce
# -> fairseq-generate --beam 5 -> BLEU and context accuracy. About 2-5 minutes on 2 CPU cores.
# Usage: bash examples/context_mt/demo.sh [WORK_DIR]   (default: work/demo, recreated)
set -euo pipefail
WORK=${1:-work/demo}
USER_DIR=$(fairseq-ctx-user-dir)
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK"

echo "== 1/5 generate the document-level corpus"
fairseq-ctx-make-corpus raw
for split in train valid test; do
  fairseq-ctx-prepare-docs --src-docs raw/$split.en --tgt-docs raw/$split.de \
    --out-prefix prep/$split --src-lang en --tgt-lang de
done

echo "== 2/5 fairseq-preprocess"
fairseq-preprocess --source-lang en --target-lang de \
  --trainpref prep/train --validpref prep/valid --testpref prep/test \
  --destdir data-bin --joined-dictionary --workers 2 > preprocess.log 2>&1
for split in train valid test; do cp prep/$split.docids data-bin/$split.docids; done

echo "== 3/5 fairseq-train --arch hmce (log: $WORK/train.log)"
fairseq-train data-bin --user-dir "$USER_DIR" --task context_translation --context-size 2 \
  --arch hmce --share-all-embeddings \
  --encoder-embed-dim 128 --decoder-embed-dim 128 --encoder-ffn-embed-dim 256 --decoder-ffn-embed-dim 256 \
  --encoder-layers 2 --decoder-layers 2 --encoder-attention-heads 4 --decoder-attention-heads 4 \
  --optimizer adam --adam-betas '(0.9,0.98)' --lr 2e-3 --lr-scheduler inverse_sqrt --warmup-updates 200 \
  --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --dropout 0.1 \
  --max-tokens 4000 --max-update 400 --seed 1 --cpu \
  --save-dir checkpoints --no-epoch-checkpoints --log-format simple --log-interval 50 > train.log 2>&1
grep "valid on 'valid'" train.log | tail -n 1

echo "== 4/5 fairseq-generate --beam 5"
fairseq-generate data-bin --user-dir "$USER_DIR" --task context_translation --context-size 2 \
  --path checkpoints/checkpoint_best.pt --gen-subset test --beam 5 --batch-size 64 --cpu \
  > generate.out 2> generate.log
tail -n 1 generate.out

echo "== 5/5 scores"
fairseq-ctx-score generate.out --context-key raw/test.ctxkey --json scores.json 2>/dev/null
