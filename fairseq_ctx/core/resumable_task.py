"""What our tasks add to fairseq's so a checkpoint resumes exactly and loads from anywhere.

Exact resume at every epoch. fairseq builds the training batches once, when the first
``EpochBatchIterator`` is made (``FairseqTask.get_batch_iterator``: the dataset order comes from
``ordered_indices()`` under ``numpy_seed(seed + epoch)``), and reuses them in later epochs, only
shuffling their order with ``seed + epoch``. An uninterrupted run therefore trains every epoch
on the batches of epoch 1; a run resumed in epoch e > 1 (also from the end-of-epoch checkpoint
of epoch e - 1, which stores epoch e) made them with ``seed + e``: other windows / examples per
batch, other losses. Our datasets draw a random permutation in ``ordered_indices`` (document
windows, LanguagePairDataset, the multilingual pairs), so the same holds for them. A resumed run
here builds its reusable iterator with the batches of epoch 1, exactly as the uninterrupted run
did. Iterators that fairseq rebuilds every epoch (``has_sharded_data``, e.g. multilingual pair
re-sampling) are made with their own epoch in both runs and need nothing.

Data directory and dictionaries. fairseq stores ``--data`` as given; a relative one breaks every
tool run from another directory (or, worse, names another directory there), and fairseq records
no working directory. The task records, through fairseq's task hook ``get_checkpoint_dict``, in
``extra_state[<task class name>]``: ``data``, the absolute data directory (resolved when
training starts), ``dictionaries``, a fingerprint of the source and target dictionaries the
model's embedding rows follow (``checkpoint_loading.dictionary_fingerprint``), and ``dictionary_symbols``, their
symbols in order (so that a mismatch names its first differing entry); ``core.checkpoint_loading``
uses the one to find the dictionaries and the others to check that they are the ones the model
was trained with, for the package's tools, for stock fairseq-generate / -interactive / -validate
(``--path``, through ``fixes.checkpoint_hooks``) and for a resumed fairseq-train
(:meth:`ResumableTask.set_checkpoint_dict`).

Sharded decoding. ``fairseq-generate --num-shards N --shard-id K`` is documented to decode one
of N shards of the split, but fairseq-generate passes the number of processes (and the rank) to
``get_batch_iterator`` instead, so every shard decoded the whole split. The tasks read the two
options from fairseq's configuration and shard the batches of a run that decodes or evaluates a
checkpoint (``--path`` given) accordingly.

Decoder sizes. ``build_generator`` refuses a beam, n-best list or length limit that cannot
decode (``core.generation_options``) before fairseq-generate, fairseq-interactive or the hub
decodes anything.
"""
import inspect
import logging
import os
from typing import Dict, Optional, Tuple

from fairseq.file_io import PathManager
from fairseq.tasks import FairseqTask
from omegaconf import OmegaConf

from fairseq_ctx.core.checkpoint_loading import check_recorded_dictionaries, dictionary_fingerprint
from fairseq_ctx.core.generation_options import check_generation_options

logger = logging.getLogger(__name__)
_BATCH_ITERATOR_SIGNATURE = inspect.signature(FairseqTask.get_batch_iterator)


def absolute_data_path(data: str) -> str:
    """Each local directory of a ``os.pathsep``-separated ``--data`` made absolute."""
    return os.pathsep.join(
        part if not part or os.path.isabs(part) or PathManager.path_requires_pathmanager(part) else os.path.abspath(part)
        for part in data.split(os.pathsep)
    )


class ResumableTask:
    """Mixin of our tasks, placed before fairseq's task class: ``class MyTask(ResumableTask,
    TranslationTask)``."""

    DATA_SETTINGS: Tuple[str, ...] = ()
    """Task options that shape the examples a model trains on (a resumed run with other values is
    stated loudly: its batches change from the resumed update on)."""

    def __init__(self, cfg, *args, **kwargs):
        super().__init__(cfg, *args, **kwargs)
        self.absolute_data = absolute_data_path(cfg.data) if getattr(cfg, "data", None) else None

    def get_checkpoint_dict(self) -> Dict[str, Dict[str, object]]:
        read = self.dictionaries_read()
        dictionaries = {side: dictionary_fingerprint(dictionary) for side, dictionary in read.items()}
        symbols = {side: list(dictionary.symbols) for side, dictionary in read.items()}
        return {type(self).__name__: {"data": self.absolute_data, "dictionaries": dictionaries,
                                      "dictionary_symbols": symbols, "data_settings": self.data_settings()}}

    def data_settings(self) -> Dict[str, object]:
        return {name: getattr(self.cfg, name, None) for name in self.DATA_SETTINGS}

    def set_checkpoint_dict(self, recorded: Dict[str, object]) -> None:
        """fairseq-train's resume hands back what :meth:`get_checkpoint_dict` recorded, after the
        model's weights are loaded and before any update: the dictionaries read from ``--data``
        must be the ones the checkpoint's embedding rows follow, and settings that shape the data
        other than the checkpoint's are stated."""
        check_recorded_dictionaries(recorded, "the resumed checkpoint", "fairseq-train (resume)",
                                    self.dictionaries_read(), self.cfg.data)
        trained = recorded.get("data_settings") or {}
        changed = [f"--{name.replace('_', '-')} {trained[name]} until now, {value} from here on"
                   for name, value in self.data_settings().items() if name in trained and trained[name] != value]
        if changed:
            logger.warning("=" * 80)
            logger.warning(f"RESUMING WITH OTHER DATA SETTINGS than the checkpoint was trained with: {'; '.join(changed)}. "
                           f"The batches change from the resumed update on; give the checkpoint's values to continue "
                           f"the same training.")
            logger.warning("=" * 80)

    def dictionaries_read(self) -> Dict[str, object]:
        """The dictionaries the model's embedding rows follow, as the checkpoint records them (by
        name; here the source and target dictionaries, a task with more adds them)."""
        return {"source": self.source_dictionary, "target": self.target_dictionary}

    def build_generator(self, models, args, *rest, **kwargs):
        """fairseq's generator, once its sizes are checked (:func:`check_generation_options`)."""
        check_generation_options(args)
        return super().build_generator(models, args, *rest, **kwargs)

    def decoding_shards(self) -> Tuple[int, int]:
        """(--num-shards, --shard-id) of a run that decodes or evaluates a checkpoint (--path
        given, as for fairseq-generate), else (1, 0). Read from the configuration the task
        options belong to (fairseq keeps it as their parent)."""
        root = self.cfg._get_parent() if OmegaConf.is_config(self.cfg) else None
        if root is None or not OmegaConf.select(root, "common_eval.path", default=None):
            return 1, 0
        shards = OmegaConf.select(root, "dataset.num_shards", default=1) or 1
        shard = OmegaConf.select(root, "dataset.shard_id", default=0) or 0
        if shards < 1 or not 0 <= shard < shards:
            raise ValueError(f"--shard-id {shard} must be one of 0..{shards - 1} (--num-shards {shards})")
        return shards, shard

    def get_batch_iterator(self, dataset, *args, **kwargs):
        call = _BATCH_ITERATOR_SIGNATURE.bind(self, dataset, *args, **kwargs)
        call.apply_defaults()
        options = {name: value for name, value in call.arguments.items() if name != "self"}
        shards, shard = self.decoding_shards()
        if shards > 1:
            options["shard_id"] = shard * options["num_shards"] + options["shard_id"]
            options["num_shards"] *= shards
            logger.info(f"--num-shards {shards} --shard-id {shard}: decoding batches {options['shard_id']}, "
                        f"{options['shard_id'] + options['num_shards']}, ... of the split")
        epoch = options["epoch"]
        reusable = (not options["disable_iterator_cache"] and not options["update_epoch_batch_itr"]
                    and self.can_reuse_epoch_itr(dataset))
        if epoch <= 1 or not reusable or dataset in self.dataset_to_epoch_iter:
            return super().get_batch_iterator(**options)
        iterator = super().get_batch_iterator(**{**options, "epoch": 1})
        iterator.epoch = epoch
        dataset.set_epoch(epoch)
        return iterator
