"""The test suite; its subpackages mirror fairseq_ctx's parts (core, context, multisource, embedding,
analysis, cli) and the recipes."""
