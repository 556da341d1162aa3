"""What two or more families share, and the package's own plumbing: registration with fairseq,
checkpoint loading, safety and atomic writes, the model-family check and the options
declaration of the tasks and models, the language-pair wrapper and complete batches, length
chunks, logged term metrics, decoder output, scoring of generate output, and the input, output
and progress conventions of the tools. Nothing here imports a family."""
