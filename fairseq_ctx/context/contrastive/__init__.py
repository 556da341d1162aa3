"""Contrastive evaluation on the field's own test sets: one importer per published layout
(plain parallel files, ContraPro, DiscEvalMT, SCAT, Voita et al. 2019) producing
:class:`~fairseq_ctx.context.contrastive.example.ContrastiveExample`, and the scoring / report
module that scores them through the hub (:mod:`fairseq_ctx.context.contrastive.evaluation`)."""
