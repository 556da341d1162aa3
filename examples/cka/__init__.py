"""CKA and head-diversity recipes: ``python -m examples.cka.<recipe>``."""
