"""Helpers of the tests, benchmarks and example recipes, not of the installed package: the
production-training matrix of every registered arch, the machine facts results files state,
readers of fairseq-train logs, and what the real-data recipes share (run options and jobs, the
plateau rule, statistics over seeds and verdicts, the results header, tools run in-process).
Importable from the repository root (pytest.ini puts it on the path; the scripts of benchmarks/
and examples/ add it themselves)."""
