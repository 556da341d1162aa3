"""Two stock fairseq-train processes (gloo, legacy_ddp, explicit tcp init
and ranks) train every plugin arch for a few updates. Both ranks log the same per-update loss and
hold bit-identical parameters after every update, the loss equals a single process with
``--update-freq 2`` (same batches, dropout off), and every parameter receives a gradient on every
update (checked in the single process, where legacy_ddp does not fill missing gradients with
zeros). By default only hmce runs; the other archs carry the ``full_matrix`` marker."""
import json

import pytest

from tests.helpers import TINY_MODEL, USER_DIR
from tests.production_matrix import (
    TASK_FIXTURES, arch_params, fairseq_train, finish, free_port, per_update, rank_runner, start, train_args,
)

UPDATES = 3
TOLERANCE = 2e-3  # fairseq's JSON log rounds losses to 3 decimals


def fingerprints(log: str) -> dict:
    records = [json.loads(line.split("fingerprint ", 1)[1]) for line in log.splitlines() if "fingerprint {" in line]
    return {record["num_updates"]: record for record in records}


@pytest.mark.parametrize("task,arch", arch_params(["hmce"], pytest.mark.full_matrix))
def test_two_ranks_agree_and_match_one_process_with_update_freq_2(task, arch, request, tmp_path):
    data = request.getfixturevalue(TASK_FIXTURES[task].data_fixture)
    port = free_port()
    distributed = [
        "--dropout", "0.0", "--distributed-backend", "gloo", "--distributed-world-size", "2",
        "--distributed-init-method", f"tcp://127.0.0.1:{port}", "--distributed-no-spawn", "--ddp-backend", "legacy_ddp",
    ]
    ranks = [start(rank_runner(train_args(data, task, arch, tmp_path / f"rank{rank}", UPDATES,
                                          [*distributed, "--distributed-rank", str(rank)]))) for rank in (0, 1)]
    logs = [finish(process) for process in ranks]
    single_log = finish(start(rank_runner(train_args(data, task, arch, tmp_path / "single", UPDATES,
                                                     ["--dropout", "0.0", "--update-freq", "2"]))))

    rank_losses = [per_update(log) for log in logs]
    single_losses = per_update(single_log)
    assert sorted(single_losses) == list(range(1, UPDATES + 1))
    assert rank_losses[0] == rank_losses[1] == pytest.approx(single_losses, abs=TOLERANCE)
    assert len(set(single_losses.values())) > 1, "the loss should move between updates"

    rank_prints = [fingerprints(log) for log in logs]
    assert sorted(rank_prints[0]) == sorted(rank_prints[1]) == list(range(1, UPDATES + 1))
    assert [rank_prints[0][u]["rank"] for u in rank_prints[0]] == [0] * UPDATES
    assert [rank_prints[1][u]["rank"] for u in rank_prints[1]] == [1] * UPDATES
    for update in range(1, UPDATES + 1):
        assert rank_prints[0][update]["params_sha1"] == rank_prints[1][update]["params_sha1"], update
    for update, record in fingerprints(single_log).items():
        assert record["params_without_grad"] == [], (update, record["params_without_grad"])


def test_eval_bleu_with_target_context_on_two_ranks_is_refused_before_training(tiny_data, tmp_path):
    """Validation BLEU with target context decodes each document from the model's own previous
    translations, which two processes validating alternate batches cannot do: both refuse at model
    build, before any update."""
    port = free_port()
    common = [str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation", "--arch", "hmce", *TINY_MODEL,
              "--context-size", "1", "--target-context-size", "1", "--eval-bleu", "--criterion",
              "label_smoothed_cross_entropy", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "300",
              "--max-update", "4", "--seed", "1", "--cpu", "--num-workers", "0", "--no-save", "--log-format", "simple",
              "--log-interval", "1", "--distributed-backend", "gloo", "--distributed-world-size", "2",
              "--distributed-init-method", f"tcp://127.0.0.1:{port}", "--distributed-no-spawn", "--ddp-backend",
              "legacy_ddp"]
    ranks = [start(fairseq_train([*common, "--distributed-rank", str(rank)])) for rank in (0, 1)]
    for process in ranks:
        output, _ = process.communicate(timeout=300)
        assert process.returncode != 0
        assert ("ValueError: context_translation: --eval-bleu with --target-context-size 1 decodes each validation "
                "sentence after its document's previous sentences") in output
        assert "num_updates" not in output
