"""Speed and precision benchmarks, run from the repository root: ``python -m benchmarks.<benchmark> ...``."""
