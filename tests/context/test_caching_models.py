"""caching_tokens / caching_sentence (Mąka et al., 2024): the cache is each context sentence's own
encoding, the source encoding and sentences without context are sentence-level, the context
reaches the decoder, incremental decoding equals the full pass, the context cache changes no
output, and the trained models go through fairseq-generate/-interactive, the hub and CXMI."""
import pytest
import torch

from devtools.in_process_tools import call_tool
from fairseq_ctx.context import hub
from fairseq_ctx.context.contrastive.evaluation import evaluate
from fairseq_ctx.context.contrastive.plain import read_contrastive_set
from fairseq_ctx.context.cxmi import cxmi
from tests.helpers import USER_DIR, batch_of, build

ARCHS = ["caching_tokens", "caching_sentence"]
SHORTENING_ARCHS = ["shortening_grouping", "shortening_selecting", "shortening_pooling"]
# the shortening variants chosen by options: linear pooling, sparsemax weights
SHORTENING_VARIANTS = [("shortening_pooling", ("--shortening", "linear_pooling")),
                       ("shortening_grouping", ("--shortening-sparsemax",)),
                       ("shortening_selecting", ("--shortening-sparsemax",))]


@pytest.fixture(scope="module", params=[(arch, ()) for arch in ARCHS + SHORTENING_ARCHS] + SHORTENING_VARIANTS,
                ids=lambda param: " ".join((param[0], *param[1])))
def caching(request, tiny_data):
    arch, extra = request.param
    task, model, cfg = build(tiny_data, arch, extra)
    task.load_dataset("train")
    model.eval()
    return arch, task, model


def encode(model, net_input):
    return model.encoder(net_input["src_tokens"], net_input["src_lengths"],
                         context_tokens=net_input.get("context_tokens"), context_index=net_input.get("context_index"))


def alone(model, tokens, pad):
    """(L, C) final encoder states of one sentence encoded as a source on its own."""
    tokens = tokens[tokens.ne(pad)].unsqueeze(0)
    return model.encoder(tokens, torch.tensor([tokens.size(1)]))["encoder_out"][0][:, 0]


def sentence_position(model, slot):
    return model.encoder.sentence_positions.weight[slot + 1]


def without_context_entries(net_input):
    return {k: v for k, v in net_input.items() if not k.startswith("context")}


def test_source_encoding_ignores_context_and_sentences_without_context_get_sentence_level_output(caching):
    _, task, model = caching
    net_input = batch_of(task, "train", list(range(10)))["net_input"]
    has_context = net_input["context_index"].ge(0).any(dim=1)
    assert has_context.any() and not has_context.all()
    bare = without_context_entries(net_input)
    assert torch.equal(encode(model, net_input)["encoder_out"][0], encode(model, bare)["encoder_out"][0])
    with torch.no_grad():
        with_context, without = model(**net_input)[0], model(**bare)[0]
    assert torch.equal(with_context[~has_context], without[~has_context])
    assert ((with_context - without).abs().amax(dim=(1, 2))[has_context] > 1e-4).all()


def test_cache_of_each_context_slot_is_that_sentence_encoded_alone(caching):
    arch, task, model = caching
    net_input = batch_of(task, "train", list(range(10)))["net_input"]
    out = encode(model, net_input)
    cache, padding = out["context_out"][0], out["context_padding_mask"][0]
    tokens, index, pad = net_input["context_tokens"], net_input["context_index"], task.src_dict.pad()
    for row in range(index.size(0)):
        expected = []
        for slot, sentence in enumerate(index[row].tolist()):
            if sentence < 0:
                continue
            states = alone(model, tokens[sentence], pad)
            if arch == "caching_sentence":  # one vector per context sentence: the mean of its token states
                states = states.mean(dim=0, keepdim=True)
            if arch in SHORTENING_ARCHS:  # the shortened states of that sentence
                shortened, shortened_padding = model.encoder.shortening(states.unsqueeze(0),
                                                                        torch.zeros(1, len(states), dtype=torch.bool))
                states = shortened[0][~shortened_padding[0]]
            expected.append(states + sentence_position(model, slot))
        kept = cache[~padding[row], row]
        if not expected:
            assert kept.numel() == 0
            continue
        torch.testing.assert_close(kept, torch.cat(expected), atol=1e-5, rtol=0)
    if arch == "caching_sentence":
        assert torch.equal((~padding).sum(dim=1), index.ge(0).sum(dim=1))


def test_changing_the_context_changes_only_the_sentences_that_have_it(caching):
    _, task, model = caching
    net_input = batch_of(task, "train", list(range(10)))["net_input"]
    has_context = net_input["context_index"].ge(0).any(dim=1)
    tokens = net_input["context_tokens"]
    shuffled = {**net_input, "context_tokens": tokens.roll(1, dims=0)}
    with torch.no_grad():
        reference, changed = model(**net_input)[0], model(**shuffled)[0]
    difference = (reference - changed).abs().amax(dim=(1, 2))
    assert (difference[has_context] > 1e-4).all() and (difference[~has_context] == 0).all()


def test_cache_is_detached_unless_asked(tiny_data):
    for extra, needs_grad in (((), False), (("--context-encoder-gradient",), True)):
        task, model, _ = build(tiny_data, "caching_tokens", extra)
        task.load_dataset("train")
        model.train()
        states, _ = model.encoder.sentence_states(batch_of(task, "train", [3])["net_input"]["context_tokens"])
        assert states.requires_grad is needs_grad


def test_incremental_decoding_and_reordering_match_the_full_pass(caching):
    _, task, model = caching
    sample = batch_of(task, "train", list(range(6)))
    net_input = sample["net_input"]
    prev = net_input["prev_output_tokens"]
    with torch.no_grad():
        full = model(**net_input)[0]
        encoder_out = encode(model, net_input)
        order = torch.arange(prev.size(0)).flip(0)
        encoder_out = model.encoder.reorder_encoder_out(encoder_out, order)
        state = {}
        for step in range(prev.size(1)):
            logits = model.decoder(prev[order, : step + 1], encoder_out=encoder_out, incremental_state=state)[0]
            real = prev[order, step].ne(task.tgt_dict.pad())
            torch.testing.assert_close(logits[real, -1], full[order][real, step], atol=1e-4, rtol=0)


def test_context_cache_reads_back_the_states_it_would_compute(caching):
    _, task, model = caching
    net_input = batch_of(task, "train", list(range(10)))["net_input"]
    distinct = {tuple(t for t in row if t != task.src_dict.pad())
                for row in net_input["context_tokens"][net_input["context_index"][net_input["context_index"].ge(0)]].tolist()}
    try:
        model.encoder.set_context_cache(False)
        with torch.no_grad():
            reference = encode(model, net_input)
        model.encoder.set_context_cache(True)
        with torch.no_grad():
            computed = encode(model, net_input)
            assert len(model.encoder.context_cache) >= len(distinct) > 3
            read_back = encode(model, net_input)
        for out in (computed, read_back):
            assert torch.equal(out["context_padding_mask"][0], reference["context_padding_mask"][0])
            keep = ~reference["context_padding_mask"][0].t()
            torch.testing.assert_close(out["context_out"][0][keep], reference["context_out"][0][keep], atol=1e-5, rtol=0)
        model.train()
        assert len(model.encoder.context_cache) == 0, "the cache must not outlive the weights it was computed with"
    finally:
        model.encoder.set_context_cache(True)
        model.eval()


def hypotheses(generate_output: str) -> list:
    return sorted(tuple(line.split("\t")[::2]) for line in generate_output.splitlines() if line.startswith("H-"))


@pytest.mark.parametrize("arch", ARCHS)
def test_generate_with_and_without_the_context_cache_is_identical(trained_baselines, tiny_data, arch, tmp_path):
    save_dir, cached = trained_baselines[arch]
    call_tool("fairseq-generate", [
        str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation", "--context-size", "2", "--cpu",
        "--path", str(save_dir / "checkpoint_last.pt"), "--gen-subset", "test", "--beam", "2", "--batch-size", "16",
        "--required-batch-size-multiple", "1", "--results-path", str(tmp_path), "--no-context-cache"])
    uncached = (tmp_path / "generate-test.txt").read_text()
    assert len(hypotheses(cached)) > 30 and hypotheses(uncached) == hypotheses(cached)


@pytest.mark.parametrize("arch", ARCHS)
def test_interactive_translate_doc_and_cxmi(trained_baselines, tiny_data, arch, tmp_path, capsys):
    checkpoint = trained_baselines[arch][0] / "checkpoint_last.pt"
    documents = [["the old cat sleeps .", "it is quiet .", "then we sang ."], ["the dog waits here .", "it moves ."]]
    (tmp_path / "docs.en").write_text("\n\n".join("\n".join(d) for d in documents) + "\n", encoding="utf-8")
    translator = hub.load(str(checkpoint), data=str(tiny_data), beam=2)
    expected = [translator.translate_document(d) for d in documents]
    capsys.readouterr()
    call_tool("fairseq-interactive", [
        str(tiny_data), "--user-dir", USER_DIR, "--task", "context_translation", "--context-size", "2",
        "--path", str(checkpoint), "--beam", "2", "--buffer-size", "2", "--batch-size", "2",
        "--input", str(tmp_path / "docs.en"), "--cpu"])
    interactive = {int(line.split("\t")[0][2:]): line.split("\t")[2]
                   for line in capsys.readouterr().out.splitlines() if line.startswith("H-")}
    assert [interactive[i] for i in (0, 1, 2, 4, 5)] == [*expected[0], *expected[1]]
    result = cxmi(hub.load(str(checkpoint), data=str(tiny_data)), "test")
    first = [row for row in result["per_sentence"] if row[0] == 0][0]
    assert first[1] == pytest.approx(0.0, abs=1e-4), "a document-initial sentence has no context to mask"
    assert result["sentences"] > 30 and result["cxmi"] != 0.0


@pytest.mark.parametrize("arch", ARCHS + ["shortening_grouping"])
def test_contrastive_scoring_prefers_the_models_own_translation(trained_baselines, tiny_data, arch, tmp_path):
    """The greedy translation in context outscores it with a word appended (greedy chose </s>
    there), so contrastive accuracy is 1.0, and 0.0 with the roles swapped."""
    translator = hub.load(str(trained_baselines[arch][0] / "checkpoint_last.pt"), data=str(tiny_data), beam=1,
                          max_len_a=0, max_len_b=20)
    sentences = ["the old cat sleeps .", "it is quiet .", "then we sang .", "it moves again ."]
    greedy = translator.translate_document(sentences)
    keep = [i for i, g in enumerate(greedy) if 0 < len(g.split()) < 19]
    assert len(keep) >= 2, greedy

    def write(name, lines):
        (tmp_path / name).write_text("".join(f"{line}\n" for line in lines))
        return str(tmp_path / name)

    context = [[([""] * distance + sentences)[i] for i in keep] for distance in (1, 2)]  # as the document gave them
    files = dict(source=write("src", [sentences[i] for i in keep]), reference=write("ref", [greedy[i] for i in keep]),
                 contrastive=[write("c0", [greedy[i] + " und" for i in keep])],
                 context=[write("ctx0", context[0]), write("ctx1", context[1])])
    assert evaluate(translator, read_contrastive_set(**files))["accuracy"] == 1.0
    swapped = {**files, "reference": files["contrastive"][0], "contrastive": [files["reference"]]}
    assert evaluate(translator, read_contrastive_set(**swapped))["accuracy"] == 0.0
