"""Building blocks of the context encoders: the hierarchical context encoder, context gathering
and attention, the sentence-vector cache, the document vector, attentive pooling and the gated sum."""
