"""Curves and batch sizes read back from fairseq-train logs (devtools.train_log)."""
import pytest

from devtools.train_log import sentences_per_update, validation_curve

# a run of 400 updates stopped in epoch 2 and resumed to 444 (the end of epoch 2), as fairseq logs it
LOG = """\
epoch 001:    100 / 222 loss=10.6, nll_loss=10.2, bsz=190, num_updates=100
epoch 001 | valid on 'valid' subset | loss 6.408 | nll_loss 5.331 | bsz 126.8 | num_updates 222
epoch 001 | loss 7.9 | nll_loss 7.1 | wpb 3300 | bsz 180 | num_updates 222 | lr 0.001
epoch 002 | valid on 'valid' subset | loss 4.971 | nll_loss 3.6 | bsz 126.8 | num_updates 400
epoch 002 | loss 5.5 | nll_loss 4.4 | wpb 3300 | bsz 190 | num_updates 400 | lr 0.001
epoch 002 | loss 5.5 | nll_loss 4.4 | wpb 3300 | bsz 190 | num_updates 400 | lr 0.001
epoch 002 | valid on 'valid' subset | loss 4.769 | nll_loss 3.5 | bsz 126.8 | num_updates 444
epoch 002 | loss 5.0 | nll_loss 4.0 | wpb 3300 | bsz 170 | num_updates 444 | lr 0.001
"""


def test_sentences_per_update_weights_each_epoch_summary_by_its_updates():
    assert sentences_per_update(LOG) == pytest.approx((180 * 222 + 190 * 178 + 170 * 44) / 444)
    assert sentences_per_update("epoch 001:    100 / 222 loss=10.6, bsz=190, num_updates=100") is None
    prefixed = "2026-11-23 22:29:04,226 | INFO | train | epoch 002 | loss 6.4 | bsz 63.9 | num_updates 908 | lr 0.001"
    assert sentences_per_update(prefixed) == pytest.approx(63.9)  # a recipe's captured log has logging prefixes


def test_validation_curve_reads_one_metric_not_its_suffixed_relatives():
    assert validation_curve(LOG, "loss") == [[222, 6.408], [400, 4.971], [444, 4.769]]
    assert validation_curve(LOG, "nll_loss") == [[222, 5.331], [400, 3.6], [444, 3.5]]
    assert validation_curve(LOG, "bleu") == []
