"""Multilingual corpora: binarization with a shared dictionary, the pair dataset, the generated corpus."""
