"""The fairseq-hydra-train configs shipped with the package: ``<family>/configs/*.yaml``, installed
as package data, so ``--config-dir "$(fairseq-ctx-user-dir)/context/configs"`` finds them in any
installation."""
import glob
import os
from typing import List

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def config_files() -> List[str]:
    """Absolute paths of every shipped YAML config, sorted."""
    return sorted(glob.glob(os.path.join(PACKAGE_DIR, "*", "configs", "*.yaml")))
