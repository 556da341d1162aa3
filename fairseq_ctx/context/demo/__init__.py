"""The generated document-level demo corpus (the ``standard``, ``hard`` and ``target`` settings),
its contrastive test sets and its binarization, for the demo, the tests and benchmarks."""
