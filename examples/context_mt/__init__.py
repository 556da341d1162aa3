"""Context-aware MT recipes (SCAT, ctxpro, the model comparison): ``python -m examples.context_mt.<recipe>``."""
