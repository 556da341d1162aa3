"""Dense feature files, the multi-input dataset and the generated multimodal corpus."""
