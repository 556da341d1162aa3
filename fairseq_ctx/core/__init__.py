"""Mechanisms shared by two or more families: gated sum, attentive pooling, factored attention,
length chunks, the language-pair wrapper, logged term metrics, checkpoint loading and safety,
the model-family check of the tasks, and the machine facts results files state."""
