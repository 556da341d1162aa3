"""The models of ``context_translation``, one file each: HCE/HMCE (``hmce``) and the baselines of
Yun (2022) §3.2.1, TwC (``concat``), DAT, HAN and DCT, all subclasses of
:class:`~fairseq_ctx.context.models.context_transformer.ContextTransformerModel` reading the
task's context batch. Importing this package imports every module in it, as fairseq's own
``fairseq/models`` does, so a model added as a new file here registers its architectures."""
import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
