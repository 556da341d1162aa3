"""Training interrupted and restarted from checkpoint_last.pt with
stock fairseq-train continues exactly like an uninterrupted run with the same seed (per-update
losses equal within the log's rounding, and the same batches: equal words per batch), whether
the interruption is in the middle of an epoch or at its end, and also in later epochs.
Parametrised over every plugin arch; by default hmce, tmde and the multi-source
hierarchical_attention_decoder (text + image features) run, the rest carry the ``full_matrix``
marker (``make test-full``)."""
import pytest

from tests.production_matrix import TASK_FIXTURES, arch_params, fairseq_train, finish, per_update, start, train_args

pytestmark = pytest.mark.heavy  # handed out first under xdist (conftest.py)

K = 2
TOLERANCE = 2e-3  # fairseq's JSON log rounds losses to 3 decimals
DEFAULT_ARCHS = ["hmce", "tmde", "hierarchical_attention_decoder"]


@pytest.mark.parametrize("task,arch", arch_params(DEFAULT_ARCHS, pytest.mark.full_matrix))
def test_restart_from_checkpoint_last_continues_the_uninterrupted_run(task, arch, request, tmp_path):
    """Stops: at the end of epoch 1 (fairseq stores epoch 2, update 0 of it), then K updates into
    epoch 2; the runs resume from those two checkpoints and finish epoch 2."""
    data = request.getfixturevalue(TASK_FIXTURES[task].data_fixture)
    interrupted, uninterrupted = tmp_path / "interrupted", tmp_path / "uninterrupted"

    def run(save_dir, *limit):
        return start(fairseq_train(train_args(data, task, arch, save_dir, 10 ** 6, limit)))

    whole = run(uninterrupted, "--max-epoch", "2")
    epoch_1 = per_update(finish(run(interrupted, "--max-epoch", "1")))
    epoch_length = len(epoch_1)
    assert sorted(epoch_1) == list(range(1, epoch_length + 1)) and epoch_length > K
    after_end_of_epoch_log = finish(run(interrupted, "--max-update", str(epoch_length + K)))
    mid_epoch_log = finish(run(interrupted, "--max-epoch", "2"))
    reference_log = finish(whole)

    after_end_of_epoch, mid_epoch = per_update(after_end_of_epoch_log), per_update(mid_epoch_log)
    reference, reference_words = per_update(reference_log), per_update(reference_log, "wpb")
    assert sorted(reference) == list(range(1, 2 * epoch_length + 1))
    assert sorted(after_end_of_epoch) == list(range(epoch_length + 1, epoch_length + K + 1))
    assert sorted(mid_epoch) == list(range(epoch_length + K + 1, 2 * epoch_length + 1))
    assert f"(epoch 2 @ {epoch_length} updates)" in after_end_of_epoch_log
    assert f"(epoch 2 @ {epoch_length + K} updates)" in mid_epoch_log
    words = {**per_update(after_end_of_epoch_log, "wpb"), **per_update(mid_epoch_log, "wpb")}
    for update, loss in {**epoch_1, **after_end_of_epoch, **mid_epoch}.items():
        assert loss == pytest.approx(reference[update], abs=TOLERANCE), (update, after_end_of_epoch, mid_epoch, reference)
    for update, count in words.items():
        assert count == reference_words[update], (update, words, reference_words)
    assert len(set(reference.values())) > 1, "the loss should move between updates"
