#!/usr/bin/env bash
# IWSLT 2017 En→De (TED talks) with document context: one document per talk.
#
#   talks → documents → fairseq-ctx-prepare-docs → sentencepiece (joint, 16k) → fairseq-preprocess
#   → stage 1: sentence-level transformer → stage 2: hmce initialised from stage 1
#   → fairseq-generate --beam 5 on the test split → sacrebleu (detokenized, case-sensitive)
#
# Input (not downloaded by this script): the official IWSLT 2017 archive
# 2017-01-trnted/texts/en/de/en-de.tgz from https://wit3.fbk.eu/, extracted:
#   RAW_DIR/train.tags.en-de.{en,de}
#   RAW_DIR/IWSLT17.TED.{dev2010,tst2010,...,tst2015}.en-de.{en,de}.xml
#
# Usage (with the package's environment active):
#   RAW_DIR=path/to/en-de NUM_GPUS=1 bash examples/context_mt/iwslt17_en_de.sh
# Every stage is skipped when its output exists, so the script can simply be rerun after an
# interruption; training resumes from checkpoint_last.pt. STOP_AFTER=data stops after binarizing.
set -euo pipefail

# ---- settings (each can be overridden from the environment) ---------------------------------
RAW_DIR=${RAW_DIR:-data/iwslt17/en-de}       # extracted en-de.tgz
WORK=${WORK:-work/iwslt17_en_de}             # everything this script writes
VALID_SETS=${VALID_SETS:-"dev2010 tst2010"}  # concatenated into the valid split
TEST_SETS=${TEST_SETS:-"tst2015"}            # concatenated into the test split
SPM_VOCAB=${SPM_VOCAB:-16000}                # joint En+De sentencepiece vocabulary
SPM_TYPE=${SPM_TYPE:-unigram}                # sentencepiece model type (unigram or bpe)
CONTEXT_SIZE=${CONTEXT_SIZE:-2}              # previous source sentences given to hmce
NUM_GPUS=${NUM_GPUS:-1}                      # 0 = CPU (smoke tests only; far too slow to train)
MAX_TOKENS=${MAX_TOKENS:-4096}               # per GPU; counts context tokens too in stage 2
UPDATE_FREQ=${UPDATE_FREQ:-1}                # effective batch = NUM_GPUS x MAX_TOKENS x UPDATE_FREQ
MAX_UPDATE_SENT=${MAX_UPDATE_SENT:-50000}    # stage 1 (about 1.1k updates per epoch at 4k tokens)
MAX_UPDATE_CTX=${MAX_UPDATE_CTX:-30000}      # stage 2
PATIENCE=${PATIENCE:-10}                     # stop after this many validations without a better BLEU
WORKERS=${WORKERS:-4}                        # fairseq-preprocess workers
SEED=${SEED:-1}
STOP_AFTER=${STOP_AFTER:-}                   # "data": stop after fairseq-preprocess
PYTHON=${PYTHON:-python3}
SRC=en
TGT=de

# ---- checks -----------------------------------------------------------------------------------
for tool in fairseq-ctx-prepare-docs fairseq-ctx-user-dir fairseq-preprocess fairseq-train \
    fairseq-generate sacrebleu "$PYTHON"; do
  command -v "$tool" > /dev/null || { echo "error: $tool not found; activate the environment where fairseq-ctx is installed" >&2; exit 1; }
done
"$PYTHON" -c "import sentencepiece" || { echo "error: python package sentencepiece missing ($PYTHON)" >&2; exit 1; }

missing=()
for f in train.tags.$SRC-$TGT.$SRC train.tags.$SRC-$TGT.$TGT; do
  [ -f "$RAW_DIR/$f" ] || missing+=("$f")
done
for set in $VALID_SETS $TEST_SETS; do
  for lang in $SRC $TGT; do
    f=IWSLT17.TED.$set.$SRC-$TGT.$lang.xml
    [ -f "$RAW_DIR/$f" ] || missing+=("$f")
  done
done
if [ ${#missing[@]} -gt 0 ]; then
  cat >&2 <<MSG
error: IWSLT17 files missing in RAW_DIR=$RAW_DIR:
$(printf '  %s\n' "${missing[@]}")

This script does not download data. Get the official IWSLT 2017 TED training/dev archive
  2017-01-trnted/texts/en/de/en-de.tgz   from https://wit3.fbk.eu/
(a mirror: https://raw.githubusercontent.com/hlt-mt/WIT3/master/archive/2017-01-trnted/texts/en/de/en-de.tgz)
extract it (tar xzf en-de.tgz creates en-de/ with train.tags.en-de.{en,de} and
IWSLT17.TED.{dev2010,tst2010,...,tst2015}.en-de.{en,de}.xml) and rerun with
  RAW_DIR=path/to/en-de bash $0
MSG
  exit 1
fi

mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
DOCS=$WORK/docs          # one document per talk, blank line between documents
PREP=$WORK/prep          # fairseq-ctx-prepare-docs output: {split}.{en,de,docids}
SPM=$WORK/spm            # sentencepiece model and encoded text
DATA_BIN=$WORK/data-bin  # fairseq-preprocess output + {split}.docids
CKPT=$WORK/checkpoints
EVAL=$WORK/eval
USER_DIR=$(fairseq-ctx-user-dir)

# ---- 1. talks → documents -----------------------------------------------------------------------
# Each data stage writes to a temporary directory and renames it when complete, so an
# interrupted stage is redone from scratch on the next run.
if [ ! -d "$DOCS" ]; then
  echo "== 1/7 talks -> documents ($DOCS)"
  rm -rf "$DOCS.tmp" && mkdir -p "$DOCS.tmp"
  "$PYTHON" - "$RAW_DIR" "$DOCS.tmp" "$SRC" "$TGT" "$VALID_SETS" "$TEST_SETS" <<'EOF'
"""Write {split}.{src,tgt}: one talk per document, a blank line between documents.

train.tags.*: lines starting with '<' are talk metadata (<url>, <talkid>, <doc ...>, ...);
the other lines are the talk's text, one segment per line, aligned across languages.
IWSLT17.TED.*.xml: <doc docid=...> ... <seg id=...>text</seg> ... </doc> (text extracted as
sacrebleu does: no entity unescaping, whitespace collapsed).
Source and target must have the same talks with the same number of lines; otherwise we stop.
"""
import os
import re
import sys

raw_dir, out_dir, src, tgt, valid_sets, test_sets = sys.argv[1:7]
TALKID = re.compile(r"<talkid>\s*([^<\s]+)\s*</talkid>")
DOC = re.compile(r"<doc\b[^>]*\bdocid=\"([^\"]*)\"")
SEG = re.compile(r"<seg\b[^>]*>(.*)</seg>")


def clean(text):
    # collapse all whitespace (also \r, \x0b, \x0c, \u2028, ... that would split a line later)
    return " ".join(text.split())


def read_train_tags(path):
    """[(talk id, [lines])]: a talk starts at the first tag line after text lines."""
    talks = [[None, []]]
    with open(path, encoding="utf-8", newline="\n") as handle:
        for line in handle:
            line = line.strip()
            if line.startswith("<"):
                if talks[-1][1]:
                    talks.append([None, []])
                match = TALKID.search(line)
                if match:
                    talks[-1][0] = match.group(1)
            elif line or talks[-1][1]:  # blank lines before a talk's text are ignored
                talks[-1][1].append(clean(line))
    return [talk for talk in talks if talk[1]]


def read_xml(path):
    """[(docid, [segments])] of an IWSLT XML file."""
    docs = []
    with open(path, encoding="utf-8", newline="\n") as handle:
        for number, line in enumerate(handle, start=1):
            line = line.strip()
            if re.match(r"<doc[\s>]", line):
                match = DOC.search(line)
                docs.append([match.group(1) if match else None, []])
            elif line.startswith("<seg"):
                match = SEG.search(line)
                if match is None or not docs:
                    sys.exit(f"error: {path}:{number}: cannot parse segment line: {line[:80]}")
                docs[-1][1].append(clean(match.group(1)))
    return docs


def aligned(src_path, tgt_path, reader):
    source, target = reader(src_path), reader(tgt_path)
    if len(source) != len(target):
        sys.exit(f"error: {src_path} has {len(source)} talks but {tgt_path} has {len(target)}")
    for number, ((sid, s), (tid, t)) in enumerate(zip(source, target), start=1):
        if sid != tid:
            sys.exit(f"error: talk #{number}: id {sid} in {src_path} but {tid} in {tgt_path}")
        if len(s) != len(t):
            sys.exit(f"error: talk #{number} (id {sid}): {len(s)} lines in {src_path} "
                     f"but {len(t)} in {tgt_path}")
    return [(sid, list(zip(s, t))) for (sid, s), (_, t) in zip(source, target)]


def write(split, talks):
    dropped = sentences = 0
    with open(os.path.join(out_dir, f"{split}.{src}"), "w", encoding="utf-8") as fs, \
            open(os.path.join(out_dir, f"{split}.{tgt}"), "w", encoding="utf-8") as ft:
        for _, pairs in talks:
            kept = [(s, t) for s, t in pairs if s and t]  # a blank line would end the document
            dropped += len(pairs) - len(kept)
            if not kept:
                continue
            for s, t in kept:
                fs.write(s + "\n")
                ft.write(t + "\n")
                sentences += 1
            fs.write("\n")
            ft.write("\n")
    print(f"{split}: {len(talks)} talks, {sentences} sentence pairs"
          + (f"; dropped {dropped} pair(s) with an empty side" if dropped else ""))


def raw(name):
    return os.path.join(raw_dir, name)


write("train", aligned(raw(f"train.tags.{src}-{tgt}.{src}"), raw(f"train.tags.{src}-{tgt}.{tgt}"),
                       read_train_tags))
for split, sets in (("valid", valid_sets), ("test", test_sets)):
    talks = []
    for name in sets.split():
        prefix = f"IWSLT17.TED.{name}.{src}-{tgt}"
        talks += aligned(raw(f"{prefix}.{src}.xml"), raw(f"{prefix}.{tgt}.xml"), read_xml)
    write(split, talks)
EOF
  mv "$DOCS.tmp" "$DOCS"
fi

# ---- 2. documents → sentence files + docids ----------------------------------------------------
if [ ! -d "$PREP" ]; then
  echo "== 2/7 fairseq-ctx-prepare-docs ($PREP)"
  rm -rf "$PREP.tmp"
  for split in train valid test; do
    fairseq-ctx-prepare-docs --src-docs "$DOCS/$split.$SRC" --tgt-docs "$DOCS/$split.$TGT" \
      --out-prefix "$PREP.tmp/$split" --src-lang $SRC --tgt-lang $TGT --doc-prefix "$split-"
  done
  mv "$PREP.tmp" "$PREP"
fi

# ---- 3. joint sentencepiece model, encode all splits (lines, hence docids, are unchanged) ------
if [ ! -d "$SPM" ]; then
  echo "== 3/7 sentencepiece: $SPM_TYPE, $SPM_VOCAB pieces, trained on train.$SRC + train.$TGT ($SPM)"
  rm -rf "$SPM.tmp" && mkdir -p "$SPM.tmp"
  "$PYTHON" - "$PREP" "$SPM.tmp" "$SRC" "$TGT" "$SPM_VOCAB" "$SPM_TYPE" <<'EOF'
import sys

import sentencepiece as spm

prep, out, src, tgt, vocab, model_type = sys.argv[1:7]
spm.SentencePieceTrainer.train(
    input=f"{prep}/train.{src},{prep}/train.{tgt}",
    model_prefix=f"{out}/spm",
    vocab_size=int(vocab),
    model_type=model_type,
    character_coverage=1.0,
    input_sentence_size=2000000,  # > 2 x 206k train lines: all of them are used
    shuffle_input_sentence=True,
    minloglevel=1,
)
sp = spm.SentencePieceProcessor(model_file=f"{out}/spm.model")
for split in ("train", "valid", "test"):
    for lang in (src, tgt):
        with open(f"{prep}/{split}.{lang}", encoding="utf-8") as fin, \
                open(f"{out}/{split}.{lang}", "w", encoding="utf-8") as fout:
            for number, line in enumerate(fin, start=1):
                pieces = sp.encode(line.rstrip("\n"), out_type=str)
                if not pieces:
                    sys.exit(f"error: {prep}/{split}.{lang}:{number} is empty after sentencepiece")
                fout.write(" ".join(pieces) + "\n")
print(f"encoded train/valid/test with {out}/spm.model")
EOF
  mv "$SPM.tmp" "$SPM"
fi

# ---- 4. binarize (joined dictionary for --share-all-embeddings), docids next to the data ------
if [ ! -d "$DATA_BIN" ]; then
  echo "== 4/7 fairseq-preprocess ($DATA_BIN)"
  rm -rf "$DATA_BIN.tmp"
  fairseq-preprocess --source-lang $SRC --target-lang $TGT \
    --trainpref "$SPM/train" --validpref "$SPM/valid" --testpref "$SPM/test" \
    --destdir "$DATA_BIN.tmp" --joined-dictionary --workers "$WORKERS" > "$WORK/preprocess.log" 2>&1 \
    || { tail -n 20 "$WORK/preprocess.log" >&2; exit 1; }
  for split in train valid test; do cp "$PREP/$split.docids" "$DATA_BIN.tmp/$split.docids"; done
  mv "$DATA_BIN.tmp" "$DATA_BIN"
fi
if [ "$STOP_AFTER" = data ]; then echo "STOP_AFTER=data: data ready in $DATA_BIN"; exit 0; fi

# ---- training settings shared by both stages ----------------------------------------------------
if [ "$NUM_GPUS" -gt 0 ]; then
  DEVICE=(--fp16 --distributed-world-size "$NUM_GPUS")
  GEN_DEVICE=(--fp16)
else
  DEVICE=(--cpu)
  GEN_DEVICE=(--cpu)
fi
# Transformer base (512, 6+6 layers, 8 heads; the transformer/hmce defaults), Adam (0.9, 0.98),
# lr 5e-4 with inverse_sqrt and 4000 warm-up updates, label smoothing 0.1, dropout 0.3 (IWSLT),
# checkpoint_best.pt selected by validation BLEU (beam 5, detokenized, sacrebleu).
TRAIN=(
  "$DATA_BIN" --user-dir "$USER_DIR" --task context_translation
  --source-lang $SRC --target-lang $TGT --share-all-embeddings
  --optimizer adam --adam-betas '(0.9,0.98)' --clip-norm 0.0 --weight-decay 0.0001
  --lr 5e-4 --lr-scheduler inverse_sqrt --warmup-updates 4000
  --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --dropout 0.3
  --max-tokens "$MAX_TOKENS" --update-freq "$UPDATE_FREQ" --skip-invalid-size-inputs-valid-test
  --eval-bleu --eval-bleu-args '{"beam": 5, "max_len_a": 1.2, "max_len_b": 10}'
  --eval-bleu-detok space --eval-bleu-remove-bpe sentencepiece
  --best-checkpoint-metric bleu --maximize-best-checkpoint-metric --patience "$PATIENCE"
  --no-epoch-checkpoints --log-format simple --log-interval 100 --seed "$SEED"
  "${DEVICE[@]}"
)

# ---- 5. stage 1: sentence-level transformer (--context-size 0) ------------------------------------
SENT=$CKPT/sentence
if [ ! -f "$SENT/train.done" ]; then
  echo "== 5/7 stage 1: sentence-level transformer (log: $SENT/train.log)"
  mkdir -p "$SENT"
  fairseq-train "${TRAIN[@]}" --context-size 0 --arch transformer \
    --max-update "$MAX_UPDATE_SENT" --save-dir "$SENT" 2>&1 | tee -a "$SENT/train.log"
  touch "$SENT/train.done"
fi

# ---- 6. stage 2: hmce initialised from the stage-1 checkpoint ---------------------------------------
# Copies every stage-1 tensor (embeddings, encoder, decoder); the context encoder parameters
# start fresh. The log line "loaded N tensors from sentence-level checkpoint" lists both.
HMCE=$CKPT/hmce
if [ ! -f "$HMCE/train.done" ]; then
  echo "== 6/7 stage 2: hmce, context size $CONTEXT_SIZE, from $SENT/checkpoint_best.pt (log: $HMCE/train.log)"
  mkdir -p "$HMCE"
  fairseq-train "${TRAIN[@]}" --context-size "$CONTEXT_SIZE" --arch hmce \
    --pretrained-sentence-checkpoint "$SENT/checkpoint_best.pt" \
    --max-update "$MAX_UPDATE_CTX" --save-dir "$HMCE" 2>&1 | tee -a "$HMCE/train.log"
  touch "$HMCE/train.done"
fi
# Alternative: hmce (or hce) from scratch, one stage; use MAX_UPDATE_SENT updates:
#   fairseq-train "${TRAIN[@]}" --context-size "$CONTEXT_SIZE" --arch hmce \
#     --max-update "$MAX_UPDATE_SENT" --save-dir "$CKPT/hmce-scratch"

# ---- 7. beam search on the test split, sacrebleu on detokenized text ------------------------------
# fairseq-generate --remove-bpe sentencepiece gives detokenized hypotheses; the reference is the
# untouched target text of the test split (prep/test.de). --required-batch-size-multiple 1:
# otherwise fairseq (0.12.3/main) silently drops a last batch whose size is not a multiple of 8.
evaluate() {  # name checkpoint-dir context-size
  local name=$1 dir=$2 context=$3
  if [ -f "$EVAL/$name.bleu" ]; then cat "$EVAL/$name.bleu"; return; fi
  mkdir -p "$EVAL"
  fairseq-generate "$DATA_BIN" --user-dir "$USER_DIR" --task context_translation \
    --source-lang $SRC --target-lang $TGT --context-size "$context" \
    --path "$dir/checkpoint_best.pt" --gen-subset test --beam 5 --max-len-a 1.2 --max-len-b 10 \
    --batch-size 128 --required-batch-size-multiple 1 --remove-bpe sentencepiece \
    "${GEN_DEVICE[@]}" > "$EVAL/$name.gen" 2> "$EVAL/$name.gen.log" \
    || { tail -n 20 "$EVAL/$name.gen.log" >&2; exit 1; }
  { grep '^H-' "$EVAL/$name.gen" || true; } | sed 's/^H-//' | sort -t$'\t' -k1,1n | cut -f3 > "$EVAL/$name.hyp"
  local n_hyp n_ref
  n_hyp=$(wc -l < "$EVAL/$name.hyp")
  n_ref=$(wc -l < "$PREP/test.$TGT")
  if [ "$n_hyp" -ne "$n_ref" ]; then
    echo "error: $n_hyp hypotheses for $n_ref test sentences (see $EVAL/$name.gen.log)" >&2
    exit 1
  fi
  sacrebleu "$PREP/test.$TGT" -i "$EVAL/$name.hyp" -m bleu > "$EVAL/$name.bleu.tmp"
  mv "$EVAL/$name.bleu.tmp" "$EVAL/$name.bleu"
  cat "$EVAL/$name.bleu"
}
echo "== 7/7 test ($TEST_SETS): beam 5, sacrebleu"
echo "-- sentence-level transformer"
evaluate sentence "$SENT" 0
echo "-- hmce (context size $CONTEXT_SIZE)"
evaluate hmce "$HMCE" "$CONTEXT_SIZE"
