"""Task ``multimodal_translation``: translation with auxiliary inputs (image features and/or
extra source languages) for the multi-source decoders of Libovický (2019) ch. 5."""
import logging
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from fairseq import utils
from fairseq.data import Dictionary, data_utils
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from fairseq_ctx.multisource.data.feature_file import (
    FeatureFile,
    FeatureInputError,
    check_row_shape,
    feature_path,
    open_features,
)
from fairseq_ctx.multisource.data.multimodal_dataset import MultimodalTranslationDataset
from fairseq_ctx.multisource.aux_input_spec import AuxInput, format_spec, parse_spec
from fairseq_ctx.core.fixes import install_fixes
from fairseq_ctx.core.hydra_model_config import complete_model_config
from fairseq_ctx.core.model_family import check_model_family
from fairseq_ctx.core.mixed_precision import MixedPrecisionTask
from fairseq_ctx.core.resumable_task import ResumableTask

logger = logging.getLogger(__name__)


@dataclass
class MultimodalTranslationConfig(TranslationConfig):
    feature_inputs: str = field(
        default="",
        metadata={"help": "comma-separated names of dense inputs; each split needs "
                  "{split}.{name}.npy (n,d) or (n,R,d) float16/32 in the data dir, optional "
                  "{split}.{name}.ids mapping sentences to rows"},
    )
    auxiliary_loss_inputs: str = field(
        default="",
        metadata={"help": "comma-separated dense inputs loaded for a training loss only (e.g. the "
                  "imagination criterion's image features); the model does not read them"},
    )
    extra_source_langs: str = field(
        default="",
        metadata={"help": "comma-separated extra source languages, binarized as "
                  "{split}.{lang}-{tgt}.{lang} by fairseq-preprocess"},
    )
    extra_source_dict: str = field(
        default="shared",
        metadata={"help": "'shared': extra sources use the source dictionary; "
                  "'own': each uses dict.{lang}.txt from the data dir"},
    )


def _names(value: str) -> List[str]:
    return [name for name in (value or "").split(",") if name]


INPUT_SETTINGS = (("feature_inputs", "--feature-inputs"), ("extra_source_langs", "--extra-source-langs"),
                  ("extra_source_dict", "--extra-source-dict"))
"""The task settings that decide which inputs a model reads (a decoding takes them from its checkpoint)."""


def _default(name: str) -> str:
    return MultimodalTranslationConfig.__dataclass_fields__[name].default


def trained_inputs(trained, given: Dict[str, Optional[str]]) -> Dict[str, str]:
    """The input settings (:data:`INPUT_SETTINGS`) of a tool: each ``given`` one that is not None,
    else the one the checkpoint was trained with (``trained``: its task config)."""
    return {name: given[name] if given.get(name) is not None else (trained.get(name) or _default(name))
            for name, _ in INPUT_SETTINGS}


@register_task("multimodal_translation", dataclass=MultimodalTranslationConfig)
class MultimodalTranslationTask(ResumableTask, MixedPrecisionTask, TranslationTask):
    """Translation whose batches carry ``net_input["aux_inputs"]`` (Libovický, 2019, ch. 5). Validates every
    auxiliary file against the text data and the model before training/decoding starts."""

    cfg: MultimodalTranslationConfig

    def __init__(self, cfg: MultimodalTranslationConfig, src_dict, tgt_dict):
        install_fixes()  # the plugin's changes to fairseq, in a process that runs one of its tasks
        super().__init__(cfg, src_dict, tgt_dict)
        self.extra_dicts = self._extra_dictionaries()
        self.loaded_inputs: Dict[str, Dict[str, Tuple[int, int]]] = {}
        self.model_inputs: List[AuxInput] = []
        self.model_arch: Optional[str] = None
        self.source_state_dim: Optional[int] = None  # size of the encoder's source states, for training losses

    def _extra_dictionaries(self) -> Dict[str, Dictionary]:
        """Each extra source's dictionary: the source dictionary, or with ``--extra-source-dict own``
        its ``dict.{lang}.txt`` of the data directory."""
        dictionaries = {}
        for lang in _names(self.cfg.extra_source_langs):
            if self.cfg.extra_source_dict == "own":
                path = os.path.join(utils.split_paths(self.cfg.data)[0], f"dict.{lang}.txt")
                if not os.path.exists(path):
                    raise FileNotFoundError(f"--extra-source-dict own needs {path} (fairseq-preprocess writes it)")
                dictionaries[lang] = Dictionary.load(path)
            else:
                dictionaries[lang] = self.source_dictionary
        return dictionaries

    def dictionaries_read(self) -> Dict[str, object]:
        """The source and target dictionaries and each own extra-source dictionary (its embedding
        rows follow it as the source's follow the source dictionary)."""
        own = {f"extra source {lang}": d for lang, d in self.extra_dicts.items() if d is not self.source_dictionary}
        return {**super().dictionaries_read(), **own}

    def adopt_checkpoint_settings(self, trained, path: str) -> None:
        """fairseq-generate / fairseq-interactive load ``--path`` into the task their command line
        built: the inputs the model was trained with (``trained``: the checkpoint's task config;
        ``--feature-inputs``, ``--extra-source-langs``, ``--extra-source-dict``) replace those left
        at their defaults, as the context task takes its context sizes. One given otherwise than
        in training is refused, naming both: the model has parameters for exactly its inputs."""
        taken = []
        for name, flag in INPUT_SETTINGS:
            value, given, default = trained.get(name), getattr(self.cfg, name), _default(name)
            if value is None or value == given:
                continue
            if given != default:
                raise FeatureInputError(
                    f"multimodal_translation: checkpoint {path} was trained with {flag} {value or repr('')} but "
                    f"{flag} {given} is given; the model has parameters for the inputs it was trained with. Leave "
                    f"{flag} out to decode with the trained value")
            setattr(self.cfg, name, value)
            taken.append(f"{flag} {value or repr('')}")
        if taken:
            logger.info(f"multimodal_translation: decoding with {' and '.join(taken)}, as checkpoint {path} was "
                        f"trained (the command line left {'it' if len(taken) == 1 else 'them'} at the default)")
            self.extra_dicts = self._extra_dictionaries()

    @classmethod
    def setup_task(cls, cfg: MultimodalTranslationConfig, **kwargs):
        """As :class:`TranslationTask`, but without -s/-t the pair is inferred from the binaries
        that are not an extra source's: an extra source is binarized on one side only
        (``{split}.fr-de.fr`` without ``{split}.fr-de.de``), and would otherwise pass for the pair
        (also when --extra-source-langs is left to the checkpoint)."""
        if cfg.source_lang is None or cfg.target_lang is None:
            extra = set(_names(cfg.extra_source_langs))
            names = os.listdir(utils.split_paths(cfg.data)[0])
            sides = {(name.split(".")[1], name.split(".")[2]) for name in names
                     if name.endswith(".idx") and name.count(".") >= 3 and name.split(".")[1].count("-") == 1}
            pairs = sorted({tuple(pair.split("-")) for pair, _ in sides})
            pairs = [(src, tgt) for src, tgt in pairs
                     if src not in extra and {(f"{src}-{tgt}", src), (f"{src}-{tgt}", tgt)} <= sides]
            if len(pairs) == 1:
                cfg.source_lang, cfg.target_lang = pairs[0]
        return super().setup_task(cfg, **kwargs)

    @property
    def data_dir(self) -> str:
        return utils.split_paths(self.cfg.data)[0]

    def aux_inputs_from_data(self) -> List[AuxInput]:
        """Inputs as found in the training files (dimension and regions from the .npy headers)."""
        inputs = []
        for name in _names(self.cfg.feature_inputs):
            array = open_features(feature_path(self.data_dir, self.cfg.train_subset, name))
            inputs.append(AuxInput(name, "feature", int(array.shape[-1]), int(array.shape[1]) if array.ndim == 3 else 1))
        inputs.extend(AuxInput(lang, "text") for lang in _names(self.cfg.extra_source_langs))
        return inputs

    def load_dataset(self, split: str, epoch: int = 1, combine: bool = False, **kwargs):
        super().load_dataset(split, epoch=epoch, combine=False, **kwargs)
        pair = self.datasets[split]
        names = _names(self.cfg.feature_inputs) + _names(self.cfg.auxiliary_loss_inputs)
        features = {name: FeatureFile(self.data_dir, split, name, len(pair)) for name in names}
        for name, feature in features.items():
            reference = feature_path(self.data_dir, self.cfg.train_subset, name)
            if split != self.cfg.train_subset and os.path.exists(reference):
                check_row_shape(feature.path, feature.array, reference, open_features(reference))
        extra = {lang: self._load_extra_source(split, lang, len(pair)) for lang in _names(self.cfg.extra_source_langs)}
        self.loaded_inputs[split] = {name: (f.dim, f.regions) for name, f in features.items()}
        if self.model_inputs:
            self._check_split_against_model(split)
        self.datasets[split] = MultimodalTranslationDataset(pair, features, extra)

    def _load_extra_source(self, split: str, lang: str, num_sentences: int):
        prefix = os.path.join(self.data_dir, f"{split}.{lang}-{self.cfg.target_lang}.{lang}")
        dataset = data_utils.load_indexed_dataset(prefix, self.extra_dicts[lang], self.cfg.dataset_impl)
        if dataset is None:
            raise FeatureInputError(
                f"extra source '{lang}': {prefix}.bin/.idx not found; binarize it with fairseq-preprocess "
                f"--source-lang {lang} --target-lang {self.cfg.target_lang} (and --srcdict of the main source for a shared dictionary)"
            )
        if len(dataset) != num_sentences:
            raise FeatureInputError(f"extra source {prefix}.bin has {len(dataset)} sentences but split '{split}' has {num_sentences}")
        return dataset

    def _check_split_against_model(self, split: str) -> None:
        for spec in self.model_inputs:
            if spec.kind != "feature":
                continue
            if spec.name not in self.loaded_inputs[split]:
                raise FeatureInputError(
                    f"the model was trained with feature input '{spec.name}' but --feature-inputs does not list it; "
                    f"pass --feature-inputs {','.join(s.name for s in self.model_inputs if s.kind == 'feature')} "
                    f"with {feature_path(self.data_dir, split, spec.name)}"
                )
            dim, regions = self.loaded_inputs[split][spec.name]
            path = feature_path(self.data_dir, split, spec.name)
            if dim != spec.dim:
                raise FeatureInputError(
                    f"feature file {path} has dimension {dim} but the model/checkpoint was trained with "
                    f"'{spec.name}' of dimension {spec.dim}; extract the features with the same network"
                )
            if regions != spec.regions:
                raise FeatureInputError(
                    f"feature file {path} has {regions} regions per row but the model/checkpoint was trained with "
                    f"{spec.regions}; extract the features of every split the same way"
                )

    def build_model(self, cfg, from_checkpoint: bool = False):
        complete_model_config(cfg)
        check_model_family(cfg, "multimodal_translation")
        if from_checkpoint or getattr(cfg, "aux_input_spec", None):
            self.model_inputs = parse_spec(getattr(cfg, "aux_input_spec", "") or "")
            expected = sorted(s.name for s in self.model_inputs)
            given = sorted(_names(self.cfg.feature_inputs) + _names(self.cfg.extra_source_langs))
            if expected != given:
                raise FeatureInputError(
                    f"the model/checkpoint expects auxiliary inputs {expected} but the task was given {given}; "
                    f"set --feature-inputs / --extra-source-langs accordingly"
                )
        else:
            self.model_inputs = self.aux_inputs_from_data()
            if self.model_inputs and not hasattr(cfg, "aux_input_spec"):
                raise FeatureInputError(
                    f"--arch {getattr(cfg, 'arch', None) or getattr(cfg, '_name', '?')} reads no auxiliary inputs; use "
                    f"hierarchical_attention_decoder or multisource_rnn with --feature-inputs / --extra-source-langs"
                )
            if hasattr(cfg, "aux_input_spec"):
                cfg.aux_input_spec = format_spec(self.model_inputs)
        for split in self.loaded_inputs:
            self._check_split_against_model(split)
        model = super().build_model(cfg, from_checkpoint)
        self.model_arch = getattr(cfg, "arch", None) or getattr(cfg, "_name", "?")
        self.source_state_dim = getattr(model.encoder, "source_state_dim", None)
        return model

    def feature_dim(self, name: str) -> int:
        """Dimension of a dense input, from the training split's file header."""
        return int(open_features(feature_path(self.data_dir, self.cfg.train_subset, name)).shape[-1])
