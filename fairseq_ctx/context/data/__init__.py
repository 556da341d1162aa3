"""Document ids, the context dataset, contrastive sets and the generated demo corpus."""
