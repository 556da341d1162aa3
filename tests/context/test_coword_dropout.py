"""--coword-dropout (Fernandes et al., 2021): in training, the current source sentence loses tokens
at the given rate to <unk>, the context sentences stay whole (HCE/HMCE encode them from the
context entries, not from the masked source rows), and validation reads the sentence unchanged."""
import pytest
import torch

from tests.helpers import batch_of, build
from fairseq_ctx.context.data.coword_dropout import coword_dropout

RATE = 0.3


@pytest.fixture(scope="module")
def hmce(tiny_data):
    task, model, cfg = build(tiny_data, "hmce", ["--dropout", "0", "--attention-dropout", "0",
                                                 "--coword-dropout", str(RATE)])
    task.load_dataset("train")
    return task, model, cfg


def special(task) -> tuple:
    return task.src_dict.pad(), task.src_dict.eos(), task.src_dict.bos()


def test_about_the_rate_of_the_sentence_tokens_become_unk_and_nothing_else_changes(hmce):
    task, _, _ = hmce
    unk = task.src_dict.unk()
    sample = batch_of(task, "train", list(range(len(task.datasets["train"]))))
    torch.manual_seed(1)
    masked = coword_dropout(sample, RATE, unk, special(task))
    before, after = sample["net_input"]["src_tokens"], masked["net_input"]["src_tokens"]
    maskable = torch.ones_like(before, dtype=torch.bool)
    for index in (*special(task), unk):
        maskable &= before.ne(index)
    changed = before.ne(after)
    assert (changed & ~maskable).sum() == 0 and after[changed].eq(unk).all()
    count = int(maskable.sum())
    assert count > 1000
    assert abs(int(changed.sum()) / count - RATE) < 4 * (RATE * (1 - RATE) / count) ** 0.5
    for name in ("context_tokens", "context_index", "src_lengths"):
        assert torch.equal(masked["net_input"][name], sample["net_input"][name]), name
    assert torch.equal(masked["target"], sample["target"])
    assert sample["net_input"]["context_source_row"].ge(0).any()
    assert masked["net_input"]["context_source_row"].eq(-1).all()
    assert coword_dropout(sample, 0.0, unk, special(task)) is sample


def test_hmce_reads_the_context_sentences_whole_while_their_source_rows_are_masked(hmce):
    task, model, cfg = hmce
    criterion = task.build_criterion(cfg.criterion)
    sample = batch_of(task, "train", list(range(5, 17)))
    torch.manual_seed(2)
    masked = coword_dropout(sample, 0.5, task.src_dict.unk(), special(task))
    # the same masked sentences, but the source rows still standing for the context sentences
    reusing_masked_rows = {**masked, "net_input": {**masked["net_input"],
                                                   "context_source_row": sample["net_input"]["context_source_row"]}}
    model.train()
    losses = {}
    with torch.no_grad():
        model.encoder.set_context_cache(False)  # every context slot encoded from context_tokens
        losses["reference"] = criterion(model, masked)[0]
        model.encoder.set_context_cache(True)
        losses["masked"] = criterion(model, masked)[0]
        losses["reusing masked rows"] = criterion(model, reusing_masked_rows)[0]
    torch.testing.assert_close(losses["masked"], losses["reference"], atol=1e-4, rtol=1e-5)
    assert abs(losses["reusing masked rows"] - losses["reference"]) > 1e-2, losses


class RecordingCriterion(torch.nn.Module):
    """Records the source tokens each step reads; a zero loss that still reaches every parameter."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, model, sample, reduce=True):
        self.seen.append(sample["net_input"]["src_tokens"].clone())
        return sum(p.sum() for p in model.parameters()) * 0, 1, {}


class BackwardOnly:
    def backward(self, loss):
        loss.backward()


def test_the_training_step_masks_and_validation_reads_the_sentence_unchanged(hmce):
    task, model, _ = hmce
    sample = batch_of(task, "train", list(range(40)))
    criterion = RecordingCriterion()
    torch.manual_seed(3)
    task.train_step(sample, model, criterion, BackwardOnly(), update_num=0)
    task.valid_step(sample, model, criterion)
    trained, validated = criterion.seen
    original = sample["net_input"]["src_tokens"]
    assert trained.ne(original).any() and trained[trained.ne(original)].eq(task.src_dict.unk()).all()
    assert torch.equal(validated, original)


@pytest.mark.parametrize("rate", ["-0.1", "1.0"])
def test_a_rate_outside_zero_to_one_is_refused(tiny_data, rate):
    with pytest.raises(ValueError, match=rf"--coword-dropout must be in \[0, 1\) \(0 = off\), got {rate}"):
        build(tiny_data, "hmce", ["--coword-dropout", rate])
