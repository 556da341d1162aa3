"""Datasets and data-file readers."""
from fairseq_ctx.data.context_dataset import ContextTranslationDataset
from fairseq_ctx.data.docids import DocumentIdError, read_docids

__all__ = ["ContextTranslationDataset", "DocumentIdError", "read_docids"]
