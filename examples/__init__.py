"""The recipes, run from the repository root as modules: ``python -m examples.<family>.<recipe> ...``."""
