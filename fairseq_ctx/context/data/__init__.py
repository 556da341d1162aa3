"""What the task reads at run time: document ids, the context of a batch (its type and
collation), the context dataset, sentences with explicitly given context, decoding with the
model's own translations, and the preparation of plain-text documents."""
