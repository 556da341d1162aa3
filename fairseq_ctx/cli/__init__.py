"""Console scripts (see setup.py). Importing a tool changes nothing in the process; its ``main``
sets up what the running tool needs (e.g. :mod:`fairseq_ctx.cli.broken_pipe`)."""
