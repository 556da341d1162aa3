"""The plots say what they show: every colour bar is labelled with its quantity, the attention
plot names the decoder layer it read and each panel's source sentence, the head heatmaps have
readable fonts."""
import numpy as np
import pytest

pytest.importorskip("matplotlib")


def captured(monkeypatch, module):
    figures = []
    monkeypatch.setattr(module, "save_figure", lambda figure, path, **options: figures.append(figure))
    monkeypatch.setattr(module.pyplot(), "close", lambda figure: None)
    return figures


def test_attention_plot_labels_its_colour_bar_and_titles_each_panel_with_its_source(monkeypatch, tmp_path):
    from fairseq_ctx.multisource import attention_plot

    figures = captured(monkeypatch, attention_plot)
    records = [{"id": 3, "source": "a man rides a horse on the beach .", "target": ["ein", "mann", "</s>"],
                "weights": [[0.6, 0.4], [0.5, 0.5], [0.9, 0.1]]}]
    attention_plot.plot(records, ["source", "img"], "hierarchical: beta", str(tmp_path / "a.png"), "beta (input weight)")
    figure = figures[0]
    panel, bar = figure.axes
    assert bar.get_ylabel() == "beta (input weight)"
    assert panel.get_title() == "sentence 3:\na man rides a horse on the\nbeach ."


def test_head_heatmaps_label_each_colour_bar_with_its_measure_in_readable_fonts(monkeypatch, tmp_path):
    from fairseq_ctx.analysis import head_analysis

    figures = captured(monkeypatch, head_analysis)
    head_analysis.heatmaps({"CKA": np.eye(3), "SVCCA": np.eye(3)}, "encoder: a × b", str(tmp_path / "h.png"),
                           "layer (b)", "layer (a)", {"CKA": "linear CKA", "SVCCA": "SVCCA (99% variance)"})
    axes = figures[0].axes
    bars = [ax for ax in axes if ax.get_ylabel() in ("linear CKA", "SVCCA (99% variance)")]
    assert [bar.get_ylabel() for bar in bars] == ["linear CKA", "SVCCA (99% variance)"]
    panels = [ax for ax in axes if ax.get_title()]
    assert min(ax.title.get_fontsize() for ax in panels) >= 10 and min(ax.xaxis.label.get_fontsize() for ax in panels) >= 9
