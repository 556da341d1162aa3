"""Per target token, how much attention goes to each input (like Libovický 2019, Fig.
5.2/5.3/5.6), for ``hierarchical_attention_decoder`` and ``multisource_rnn`` models, as records
and a PNG heatmap.

The model is run with teacher forcing on the reference translation of each chosen sentence.
Quantity per (target token, input), read from one decoder layer: hierarchical: the second-level
weights β (head average); flat: attention mass on each input's states (head average);
serial/parallel: each input's share of the context-vector norms. multisource_rnn: β
(hierarchical) or the attention mass per input (flat), with the sentinel's share as an extra
column when trained with --sentinel.
"""
from typing import Dict, List, Sequence, Tuple

import torch

from fairseq_ctx.core.plots import pyplot, save_figure

QUANTITY = {"hierarchical": "beta (attention over inputs)", "flat": "attention mass per input",
            "serial": "context-vector norm share", "parallel": "context-vector norm share",
            "concat": "uniform (context vectors concatenated)"}


def input_attention(model, sample: Dict, layer: int) -> torch.Tensor:
    """(B, T, n) input weights of decoder layer ``layer`` under teacher forcing, from the decoder's
    ``extra["input_weights"]`` (the RNN decoder has one attention, read whatever ``layer``)."""
    from fairseq_ctx.multisource.rnn import MultiSourceRNNDecoder
    from fairseq_ctx.multisource.transformer_layers import MultiSourceTransformerDecoder

    if isinstance(model.decoder, MultiSourceTransformerDecoder):
        layers = model.decoder.num_layers
        if not -layers <= layer < layers:
            raise ValueError(f"--layer {layer}: the decoder has {layers} layer(s), 0..{layers - 1} (or -1..-{layers} "
                             f"from the end)")
        alignment = {"alignment_layer": layer % layers}
    elif isinstance(model.decoder, MultiSourceRNNDecoder):
        alignment = {}
    else:
        raise SystemExit("fairseq-ctx-attention-plot: the checkpoint is not a hierarchical_attention_decoder / multisource_rnn model")
    with torch.no_grad():
        _, extra = model(**sample["net_input"], **alignment)
    return extra["input_weights"][0]


def plot(records: List[Dict], inputs: List[str], title: str, path: str, quantity: str) -> None:
    """One heatmap per sentence (target tokens × inputs), titled with its source sentence; the colour
    bar is labelled with the ``quantity`` shown."""
    import textwrap

    plt = pyplot()
    label_width = 0.09 * max(len(token) for r in records for token in r["target"])
    height = 0.35 * max(len(r["target"]) for r in records) + 2.5
    panel_width = 0.7 * len(inputs) + label_width + 1.4
    fig, axes = plt.subplots(1, len(records), figsize=(len(records) * panel_width + 1.5, height),
                             squeeze=False, gridspec_kw={"wspace": label_width + 0.4})
    for ax, record in zip(axes[0], records):
        image = ax.imshow(record["weights"], vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(inputs)), inputs, rotation=45)
        ax.set_yticks(range(len(record["target"])), record["target"])
        source = textwrap.shorten(record["source"], width=90, placeholder=" …")
        ax.set_title(f"sentence {record['id']}:\n" + "\n".join(textwrap.wrap(source, width=30)), fontsize=8)
    bar = fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8)
    bar.set_label(quantity, fontsize=9)
    fig.suptitle(title, fontsize=10)
    save_figure(fig, path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def attention_records(model, task, split: str, sentence_ids: Sequence[int], layer: int = -1) -> Tuple[str, List[str], List[Dict]]:
    """``(combination, input names, records)``: per chosen sentence of ``split`` its id, source,
    target tokens and the (target length, inputs) weights of decoder layer ``layer``."""
    task.load_dataset(split)
    dataset = task.datasets[split]
    sample = dataset.collater([dataset[i] for i in sentence_ids])
    weights = input_attention(model, sample, layer)
    rnn_attention = getattr(model.decoder, "attention", None)
    attention = rnn_attention if rnn_attention is not None else model.decoder.layers[0].cross_attention
    combination = str(attention.combination)  # a command-line choice of multisource_rnn is an enum member
    inputs = ["source"] + [spec.name for spec in model.encoder.aux_inputs]
    if rnn_attention is not None and rnn_attention.sentinel:
        inputs.append("sentinel")
    records = []
    for row, sentence_id in enumerate(sample["id"].tolist()):
        target = sample["target"][row]
        length = int(target.ne(task.target_dictionary.pad()).sum())
        tokens = [task.target_dictionary[t] for t in target[:length].tolist()]
        records.append({
            "id": sentence_id,
            "source": task.source_dictionary.string(sample["net_input"]["src_tokens"][row],
                                                    extra_symbols_to_ignore={task.source_dictionary.pad()}),
            "target": tokens,
            "weights": weights[row, :length].tolist(),
        })
    records.sort(key=lambda r: r["id"])
    return combination, inputs, records
