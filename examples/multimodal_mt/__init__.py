"""Multi30k multi-source and multimodal MT recipes: ``python -m examples.multimodal_mt.<recipe>``."""
