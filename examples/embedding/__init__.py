"""Multilingual document-embedding recipes: ``python -m examples.embedding.<recipe>``."""
