"""Helpers of the tests, benchmarks and example recipes, not of the installed package: the
production-training matrix of every registered arch, the machine facts results files state, and
readers of fairseq-train logs. Importable from the repository root (pytest.ini puts it on the
path; the scripts of benchmarks/ and examples/ add it themselves)."""
