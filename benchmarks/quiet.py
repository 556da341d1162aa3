"""The benchmarks print tables, not fairseq's log: :func:`quiet_libraries` raises the libraries'
log level and ignores their deprecation notices. Called in a benchmark's ``main`` only, so that
importing a benchmark (the tests import their measuring functions) changes no logging setup."""
import logging
import warnings

BENCHMARK_QUIET_LIBRARIES = ("fairseq", "fairseq_cli", "fairseq_ctx", "hydra")


def quiet_libraries(level: int = logging.WARNING) -> None:
    """Log only ``level`` and above from fairseq, fairseq-ctx and hydra; ignore warnings."""
    for name in BENCHMARK_QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(level)
    warnings.filterwarnings("ignore")
