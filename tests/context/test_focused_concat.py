"""focused_concat (Lupo et al., 2022): segment-shifted positions over the concatenation, and the
criterion context_discounted_cross_entropy (L_current + CD · L_context over the decoder's
target-context prefix)."""
import pytest
import torch
from fairseq.criterions.label_smoothed_cross_entropy import LabelSmoothedCrossEntropyCriterion
from fairseq.modules import SinusoidalPositionalEmbedding

from fairseq_ctx.context.context_discounted_loss import ContextDiscountedCrossEntropy
from fairseq_ctx.core.decoder_output import decoder_output
from tests.helpers import batch_of, build

TARGET_CONTEXT = ["--context-size", "2", "--target-context-size", "1"]


def encoder_out(model, net_input):
    return model.encoder(net_input["src_tokens"], net_input["src_lengths"], context_tokens=net_input["context_tokens"],
                         context_index=net_input["context_index"])["encoder_out"][0]


def test_position_shift_zero_is_ctx_concat_and_the_shift_moves_only_the_context_segments(tiny_data):
    task, concat, _ = build(tiny_data, "ctx_concat", ["--context-size", "2"])
    _, unshifted, _ = build(tiny_data, "focused_concat", ["--context-size", "2", "--position-shift", "0"])
    _, focused, _ = build(tiny_data, "focused_concat", ["--context-size", "2"])
    assert focused.encoder.position_shift == 21 and concat.encoder.position_shift == 0
    task.load_dataset("train")
    net_input = batch_of(task, "train", list(range(10)))["net_input"]
    has_context = net_input["context_index"].ge(0).any(dim=1)
    for model in (concat, unshifted, focused):
        model.eval()
    with torch.no_grad():
        reference = encoder_out(concat, net_input)
        assert torch.equal(encoder_out(unshifted, net_input), reference)
        difference = (encoder_out(focused, net_input) - reference).abs().amax(dim=(0, 2))
    assert (difference[has_context] > 1e-4).all() and (difference[~has_context] == 0).all()


def test_shift_term_turns_position_p_of_segment_s_into_p_plus_s_times_shift(tiny_data):
    _, model, _ = build(tiny_data, "focused_concat", ["--context-size", "2", "--position-shift", "5"])
    pad = model.encoder.padding_idx
    tokens = torch.tensor([[7, 8, 9, 10, pad], [7, 8, pad, pad, pad]])
    segments = torch.tensor([[0, 0, 1, 2, 0], [0, 1, 0, 0, 0]])
    term = model.encoder.position_shift_term(tokens, segments)
    table = SinusoidalPositionalEmbedding.get_embedding(40, term.size(-1), pad)
    first = pad + 1  # fairseq's first position
    expected = [[first, first + 1, first + 2 + 5, first + 3 + 10], [first, first + 1 + 5]]
    for row, positions in enumerate(expected):
        for column, shifted in enumerate(positions):
            torch.testing.assert_close(term[row, column] + table[first + column], table[shifted], atol=1e-6, rtol=0)
    assert torch.equal(term[0, 4], torch.zeros_like(term[0, 4])) and torch.equal(term[1, 2:], torch.zeros_like(term[1, 2:]))


def test_learned_positions_are_refused_with_a_shift(tiny_data):
    with pytest.raises(ValueError, match="--position-shift needs fairseq's sinusoidal positions"):
        build(tiny_data, "focused_concat", ["--context-size", "2", "--encoder-learned-pos"])


@pytest.fixture(scope="module")
def with_prefix(tiny_data):
    task, model, _ = build(tiny_data, "focused_concat", TARGET_CONTEXT)
    task.load_dataset("train")
    model.eval()
    sample = batch_of(task, "train", list(range(12)))
    assert sample["net_input"]["target_context_index"].ge(0).any()
    return task, model, sample


def test_no_discount_is_fairseqs_label_smoothed_loss_and_the_discount_adds_the_prefix_loss(with_prefix):
    task, model, sample = with_prefix
    smoothed, _, _ = LabelSmoothedCrossEntropyCriterion(task, False, 0.1)(model, sample)
    undiscounted, size, log = ContextDiscountedCrossEntropy(task, False, 0.1, context_discount=0.0)(model, sample)
    assert torch.equal(undiscounted, smoothed) and size == sample["ntokens"]
    discounted, _, log = ContextDiscountedCrossEntropy(task, False, 0.1, context_discount=0.25)(model, sample)
    torch.testing.assert_close(discounted, smoothed + 0.25 * log["context_loss"])
    # every prefix token after the first of its row is predicted: (real prefix length - 1) per row
    prefix = model.encoder(**{k: v for k, v in sample["net_input"].items() if k != "prev_output_tokens"})["target_prefix"][0]
    real = prefix.ne(task.tgt_dict.pad()).sum(dim=1)
    assert int(log["context_ntokens"]) == int((real - 1).clamp(min=0).sum()) > 0


def test_context_loss_is_the_prefix_predicted_token_by_token(with_prefix):
    """Each prefix token but the first is a target, predicted from the decoder's states over the
    tokens before it; padding and the first token of a row carry no loss."""
    task, model, sample = with_prefix
    criterion = ContextDiscountedCrossEntropy(task, False, 0.0, context_discount=1.0)
    with torch.no_grad():
        net_output = model(**sample["net_input"])
    per_token, _ = criterion.context_loss(model, net_output, reduce=False)
    prefix = net_output[1]["prefix_tokens"][0]
    per_token = per_token.view(prefix.shape)
    targets = torch.cat([prefix[:, 1:], torch.full_like(prefix[:, :1], task.tgt_dict.pad())], dim=1)
    assert torch.equal(per_token.ne(0), targets.ne(task.tgt_dict.pad()))
    features, _ = decoder_output(model.decoder, net_output[1]["prefix_states"][0], None, None)
    lprobs = model.get_normalized_probs((model.decoder.output_layer(features), None), log_probs=True)
    expected = -lprobs.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1).masked_fill(targets.eq(task.tgt_dict.pad()), 0)
    torch.testing.assert_close(per_token, expected, atol=1e-5, rtol=0)


def test_the_criterion_refuses_a_model_without_a_target_prefix(tiny_data):
    task, model, _ = build(tiny_data, "focused_concat", ["--context-size", "2"])
    task.load_dataset("train")
    with pytest.raises(ValueError, match="gave no target-context prefix.*--target-context-size > 0"):
        ContextDiscountedCrossEntropy(task, False, 0.1)(model, batch_of(task, "train", [0, 1]))
