"""The generated multimodal corpus: one image per sentence holding the intended sense, and the
harder setting with several images of which only one shows it."""
import numpy as np
import pytest

from fairseq_ctx.cli import make_multimodal_corpus
from fairseq_ctx.multisource.demo.multimodal_corpus import (
    AMBIGUOUS, SENSES, MultimodalCorpusSizes, image_names, write_multimodal_corpus,
)

SIZES = dict(train=40, valid=4, test=4, regions=3, feature_dim=16, noise=0.1)


def senses_shown(features: np.ndarray, prototypes: np.ndarray) -> np.ndarray:
    """(n,) the sense whose prototype is in some region of each image (the region nearest to a prototype)."""
    distances = ((features[:, :, None, :] - prototypes[None, None]) ** 2).sum(-1)  # (n, R, senses)
    return distances.min(axis=1).argmin(axis=1)


def intended_senses(directory) -> list:
    """The sense of each training sentence's ambiguous word, None when it has none."""
    senses = []
    for line in (directory / "train.de").read_text().splitlines():
        words = line.split()
        match = [i for i, (word, sense) in enumerate(SENSES) if AMBIGUOUS[word][sense][0] in words]
        senses.append(match[0] if match else None)
    return senses


def test_several_images_show_the_intended_sense_once_and_other_words_elsewhere(tmp_path):
    one, three = tmp_path / "one", tmp_path / "three"
    write_multimodal_corpus(str(one), MultimodalCorpusSizes(**SIZES))
    write_multimodal_corpus(str(three), MultimodalCorpusSizes(**SIZES, images=3))
    assert image_names(1) == ["img"] and image_names(3) == ["img1", "img2", "img3"]
    assert (one / "train.img.npy").exists() and not (three / "train.img.npy").exists()
    assert (one / "train.en").read_text() == (three / "train.en").read_text()  # same sentences

    prototypes = np.random.default_rng(1).standard_normal((len(SENSES), 16)).astype(np.float32)
    senses = intended_senses(one)
    single = senses_shown(np.load(one / "train.img.npy").astype(np.float32), prototypes)
    shown = np.stack([senses_shown(np.load(three / f"train.{name}.npy").astype(np.float32), prototypes)
                      for name in image_names(3)], axis=1)
    ambiguous = [row for row, sense in enumerate(senses) if sense is not None]
    assert len(ambiguous) > 10
    for row in ambiguous:
        assert single[row] == senses[row]
        assert list(shown[row]).count(senses[row]) == 1
        word = SENSES[senses[row]][0]
        assert all(SENSES[s][0] != word for s in shown[row] if s != senses[row])


def test_make_multimodal_corpus_refuses_fewer_than_one_image(tmp_path, capsys):
    with pytest.raises(SystemExit):
        make_multimodal_corpus.main([str(tmp_path / "c"), "--images", "0"])
    assert "--images must be at least 1, got 0" in capsys.readouterr().err
