"""Translating generative evaluation examples with their preceding sentences as context: the step
that ctxpro sets (Wicks & Post, 2023) and GenPro (Post & Junczys-Dowmunt, 2023) share."""
from typing import List, Protocol, Sequence


class InContextExample(Protocol):
    """An example to translate: ``sentence`` and its ``preceding`` source sentences, oldest first."""

    sentence: str
    preceding: List[str]


def translate_examples(translator, examples: Sequence[InContextExample], batch_size: int = 32,
                       source: str = "the evaluation set") -> List[str]:
    """The translation of each example's sentence given its preceding sentences: one batch of
    sentences with their source context for a model without target context; for one with target
    context, each example is a document translated sentence after sentence (its own translations
    of the preceding sentences become the context of the next). ``source`` names the set in
    messages."""
    if translator.target_context_size > 0:
        lines: List[str] = []
        for example in examples:
            lines += [*example.preceding, example.sentence, ""]
        outputs = list(translator.translate_stream(lines, batch_size=batch_size, source=source))
        last_of_each, position = [], 0
        for example in examples:
            position += len(example.preceding) + 1
            last_of_each.append(outputs[position - 1])
            position += 1
        return last_of_each
    from fairseq_ctx.context.data.context_examples import Example
    from fairseq_ctx.core.unknown_tokens import UnknownTokenCheck

    history = translator.collate.history_size
    translator.log_context_use()
    translator.unknown = UnknownTokenCheck(translator.src_dict, source, translator.unknown_tokens_fix())
    translations: List[str] = []
    for start in range(0, len(examples), batch_size):
        batch = []
        for example in examples[start:start + batch_size]:
            context = list(reversed(example.preceding[-history:])) if history else []
            batch.append(Example(translator.encode_source(example.sentence),
                                 [translator.encode_source(sentence) for sentence in context]))
        translator.unknown.check()
        translations += [translator.decode(tokens) for tokens in translator.translate_examples(batch)]
    return translations
