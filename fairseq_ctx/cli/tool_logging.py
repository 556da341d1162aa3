"""Logging of the command-line tools: their own lines at INFO on stderr, the import-time noise of
the libraries (fairseq configures the root logger at INFO while importing its speech tasks and
says "Please install tensorboardX") at WARNING. Called in a tool's ``main`` after argument
parsing and before fairseq is imported, so that fairseq's ``logging.basicConfig`` finds the
root logger configured and does nothing."""
import logging
import os
import sys

QUIET_LIBRARIES = ("fairseq", "fairseq_cli", "hydra", "matplotlib", "PIL")


def configure_tool_logging(tool: str) -> logging.Logger:
    """Configure logging for the tool named ``tool`` and return its logger (``fairseq_ctx.<tool>``).
    The level of the tool's own lines follows ``LOGLEVEL`` like fairseq's tools (default INFO)."""
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
                        datefmt="%Y-%m-%d %H:%M:%S", level=os.environ.get("LOGLEVEL", "INFO").upper(),
                        stream=sys.stderr)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)
    return logging.getLogger(f"fairseq_ctx.{tool}")
