"""Must-show 3 (issue 7): training interrupted after K updates and restarted from
checkpoint_last.pt with stock fairseq-train continues exactly like an uninterrupted run with the
same seed (per-update losses equal within the log's rounding). Parametrised over every plugin arch;
by default hmce, tmde and the multi-source hierarchical_attention_decoder (text + image features)
run, the rest carry the ``full_matrix`` marker (``make test-full``)."""
import shutil

import pytest

from production_matrix import TASK_FIXTURES, arch_params, fairseq_train, finish, per_update, start, train_args

K = 3
TOLERANCE = 2e-3  # fairseq's JSON log rounds losses to 3 decimals
DEFAULT_ARCHS = ["hmce", "tmde", "hierarchical_attention_decoder"]


@pytest.mark.parametrize("task,arch", arch_params(DEFAULT_ARCHS, pytest.mark.full_matrix))
def test_restart_from_checkpoint_last_continues_the_uninterrupted_run(task, arch, request, tmp_path):
    data = request.getfixturevalue(TASK_FIXTURES[task].data_fixture)
    interrupted, uninterrupted = tmp_path / "interrupted", tmp_path / "uninterrupted"
    first_part = start(fairseq_train(train_args(data, task, arch, interrupted, K)))
    whole = start(fairseq_train(train_args(data, task, arch, uninterrupted, 2 * K)))
    first_log, whole_log = finish(first_part), finish(whole)
    assert (interrupted / "checkpoint_last.pt").exists()
    shutil.copy(interrupted / "checkpoint_last.pt", tmp_path / "checkpoint_after_k.pt")
    resumed_log = finish(start(fairseq_train(train_args(data, task, arch, interrupted, 2 * K))))

    first, resumed, reference = per_update(first_log), per_update(resumed_log), per_update(whole_log)
    assert sorted(reference) == list(range(1, 2 * K + 1))
    assert sorted(first) == list(range(1, K + 1))
    assert sorted(resumed) == list(range(K + 1, 2 * K + 1)), "the restart did not continue from update K"
    assert "Loaded checkpoint" in resumed_log and f"@ {K} updates" in resumed_log
    for update, loss in {**first, **resumed}.items():
        assert loss == pytest.approx(reference[update], abs=TOLERANCE), (update, first, resumed, reference)
    assert len(set(reference.values())) > 1, "the loss should move between updates"
