"""Curves, batch sizes, training time and machines read back from fairseq-train logs (devtools.train_log)."""
import pytest

from devtools.train_log import (NOT_RECORDED, sentences_per_update, training_machines, training_seconds,
                                validation_curve)

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


# a recipe's log of one training stopped by the end of a session (its last line 40 s after its start)
# and resumed an hour later (90.5 s), with a multi-line message between
RESUMED = """\
2026-11-27 16:03:49,234 | INFO | devtools.recipe_tools | $ fairseq-train data-bin --arch transformer
2026-11-27 16:04:19,000 | INFO | train_inner | epoch 001:    50 / 454 loss=9.1, num_updates=50
2026-11-27 16:04:29,234 | INFO | train_inner | epoch 001:   100 / 454 loss=8.7, num_updates=100
2026-11-27 17:10:32,000 | INFO | devtools.recipe_tools | $ fairseq-train data-bin --arch transformer
2026-11-27 17:10:40,000 | INFO | fairseq_cli.train | {'common': {'log_interval': 50,
  'log_format': 'simple'}}
2026-11-27 17:12:02,500 | INFO | fairseq_cli.train | done training in 82.0 seconds
"""


def test_training_time_adds_every_stretch_of_a_resumed_run_and_not_the_time_between():
    assert training_seconds(RESUMED) == pytest.approx(40.0 + 90.5)
    first_stretch = "".join(RESUMED.splitlines(keepends=True)[:3])
    assert training_seconds(first_stretch) == pytest.approx(40.0)
    assert training_seconds(first_stretch.split("\n", 1)[1]) == pytest.approx(10.234)  # no start line: one stretch
    assert training_seconds(LOG) == 0.0  # fairseq's own lines without logging prefixes: no time to read


def test_training_machines_name_each_stretch_s_machine_once_and_stretches_without_one():
    def stretch(machine):
        start = "2026-11-27 16:03:49,234 | INFO | devtools.recipe_tools | $ fairseq-train data-bin --arch transformer\n"
        line = f"2026-11-27 16:03:49,240 | INFO | devtools.recipe_tools | machine: {machine}\n" if machine else ""
        return start + line + "2026-11-27 16:04:19,000 | INFO | train_inner | epoch 001:    50 / 454 num_updates=50\n"

    two_cores, gpu = "2 CPU cores (AMD EPYC), 1 torch thread(s); GPU: none", "16 CPU cores (x); GPU: H200"
    assert training_machines(stretch(two_cores) * 2) == [two_cores]
    assert training_machines(stretch(two_cores) + stretch(gpu) + stretch(two_cores)) == [two_cores, gpu]
    assert training_machines(RESUMED) == [NOT_RECORDED]  # logged before machines were recorded
    assert training_machines(RESUMED + stretch(gpu)) == [NOT_RECORDED, gpu]
    assert training_machines(RESUMED.split("\n", 1)[1]) == [NOT_RECORDED]  # no start line: one stretch
    assert training_machines("") == [] and training_machines(LOG) == []
