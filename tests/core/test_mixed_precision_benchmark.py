"""benchmarks/cpu_mixed_precision.py divides each context model's speeds by the transformer's of
the same dims measured in the same run, and judges hmce against its target in both precisions."""
from benchmarks.cpu_mixed_precision import Row, against_transformer, against_transformer_markdown


def test_context_models_are_divided_by_the_transformer_of_their_dims():
    rows = [Row("transformer", 256, False, 1000.0, 500.0, 200.0, 100.0),
            Row("hmce", 256, False, 950.0, 440.0, 180.0, 90.0),
            Row("transformer", 512, False, 400.0, 200.0),
            Row("hmce", 512, False, 380.0, 190.0),
            Row("ctx_concat", 512, False, 200.0, 120.0),
            Row("tmde", 512, False, 900.0, 450.0)]
    ratios = against_transformer(rows)
    assert [(r["model"], r["dims"]) for r in ratios] == [("hmce", 256), ("hmce", 512), ("ctx_concat", 512)]
    assert ratios[0] == {"model": "hmce", "dims": 256, "train_fp32": 0.95, "train_amp": 0.88, "gen_fp32": 0.9,
                         "gen_amp": 0.9}
    assert ratios[1]["gen_fp32"] is None and ratios[1]["train_amp"] == 0.95
    table = against_transformer_markdown(ratios)
    assert table[-3].endswith("| 0.95 | 0.88 | 0.90 | 0.90 | FAIL |")  # --amp below 0.9
    assert table[-2].endswith("| 0.95 | 0.95 | — | — | PASS |")
    assert table[-1].endswith("| 0.50 | 0.60 | — | — | — |")  # no target for ctx_concat


def test_no_transformer_row_means_no_comparison():
    assert against_transformer([Row("hmce", 256, False, 1.0, 1.0)]) == []
    assert against_transformer_markdown([]) == []
