"""The generated multimodal demo corpus (ambiguous words resolved by image features) and its binarization."""
