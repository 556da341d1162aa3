"""Multi-input attention (Transformer and Bahdanau forms) and the feature projection."""
