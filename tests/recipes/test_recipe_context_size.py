"""examples/context_mt/context_size.py: the tables it writes (one column per context size, one row
per model, empty cells for runs not done yet) and the options it gives focused concatenation."""
import argparse

from devtools.arch_matrix import context_arch_options
from examples.context_mt.context_size import write_results


def test_tables_have_a_column_per_size_and_leave_missing_runs_empty(tmp_path):
    rows = [{"arch": "transformer", "context_size": 0, "bleu": 80.0, "context_accuracy": 0.33, "train_words_per_s": 9000,
             "minutes": 1.0}]
    rows += [{"arch": arch, "context_size": n, "bleu": 90.0 + n, "context_accuracy": n / 10, "train_words_per_s": 5000,
              "minutes": 1.0} for arch, n in (("ctx_concat", 1), ("ctx_concat", 8), ("hmce", 1))]
    args = argparse.Namespace(archs=["ctx_concat", "hmce"], setting="hard", updates=300, batch_size=64, train_docs=400)
    destination = tmp_path / "context_size_hard.md"
    write_results(rows, args, destination, minutes=4.0)
    text = destination.read_text()
    assert "Sentence-level transformer: BLEU 80.00, context accuracy 0.330" in text
    assert "| model | N=1 | N=8 |" in text
    assert "| ctx_concat | 0.100 | 0.800 |" in text and "| hmce | 0.100 |  |" in text
    assert "| ctx_concat | 91.00 | 98.00 |" in text
    assert "summed over the runs: 4" in text


def test_focused_concatenation_reads_as_many_target_sentences_and_discounts_their_loss():
    assert context_arch_options("focused_concat", 3) == (["--target-context-size", "3"],
                                                 ["--criterion", "context_discounted_cross_entropy"])
    assert context_arch_options("caching_tokens", 3) == ([], [])
