"""fairseq-ctx-analyze-heads on a checkpoint trained for one update with stock fairseq-train."""
import csv
import json

from tests.helpers import TINY_MODEL, USER_DIR, run_tool
from fairseq_ctx.analysis.attention_heads import module_kind


def test_analyze_heads_tables_pictures_and_self_comparison(tiny_data, tmp_path):
    save = tmp_path / "ckpt"
    run_tool(["fairseq-train", str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation",
              "--context-size", "2", "--arch", "hce", *TINY_MODEL, "--criterion", "head_diversity",
              "--drophead", "0.1", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "500", "--max-update", "1",
              "--cpu", "--seed", "1", "--save-dir", str(save), "--no-epoch-checkpoints", "--disable-validation"])
    out = tmp_path / "heads"
    result = run_tool(["fairseq-ctx-analyze-heads", str(save), "--checkpoint-file", "checkpoint_last.pt",
                       "--data", str(tiny_data),
                       "--compare-path", str(save / "checkpoint_last.pt"), "--split", "valid",
                       "--max-positions", "120", "--output-dir", str(out), "--tag", "a", "--compare-tag", "b"])
    assert "mean inter-head CKA" in result.stdout
    rows = list(csv.DictReader(open(out / "heads.csv")))
    kinds = {r["kind"] for r in rows if r["model"] == "a"}
    assert {"encoder_self", "decoder_self", "encoder_decoder", "other"} <= kinds
    for row in rows:
        assert 0.0 <= float(row["mean_cka"]) <= 1.0 and 0.0 <= float(row["mean_svcca"]) <= 1.0
        assert int(row["heads"]) == 4
    report = json.load(open(out / "heads.json"))
    matrix = report["a"]["encoder.layers.0.self_attn"]["cka"]
    assert all(abs(matrix[i][i] - 1.0) < 1e-9 for i in range(4))
    layers = json.load(open(out / "layers.json"))
    encoder = layers["encoder_self"]["cka"]
    assert len(encoder) == 2 and all(abs(encoder[i][i] - 1.0) < 1e-9 for i in range(2))  # same model → 1 on the diagonal
    assert (out / "heads_a.png").stat().st_size > 0 and (out / "layers_encoder_self.png").stat().st_size > 0


def test_module_kinds_of_the_multi_source_transformer():
    """Its text encoder and its decoder's attention over the source sentence are the encoder
    self-attention and the encoder-decoder attention; its attentions over other inputs are other."""
    names = {"encoder.text_encoder.layers.2.self_attn": "encoder_self", "encoder.layers.0.self_attn": "encoder_self",
             "decoder.layers.0.cross_attention.attentions.0": "encoder_decoder",
             "decoder.layers.1.encoder_attn": "encoder_decoder", "decoder.layers.0.self_attn": "decoder_self",
             "decoder.layers.0.cross_attention.attentions.1": "other",
             "decoder.layers.0.cross_attention.input_attention": "other",
             "encoder.context_encoder.layers.0.self_attn": "other"}
    assert {name: module_kind(name) for name in names} == names
