"""2-D scatter plots of embeddings (t-SNE or PCA), coloured by group or by label, as in the
t-SNE figures of Li (2021) ch. 4."""
import logging
from typing import List, Optional

import numpy as np

from fairseq_ctx.core.plots import PLOTS_INSTALL, pyplot, save_figure

logger = logging.getLogger(__name__)

MARKERS = "os^vD<>P*X"


def project(points: np.ndarray, method: str, seed: int) -> np.ndarray:
    """(n, d) → (n, 2) by t-SNE (scikit-learn, the ``plots`` extra) or PCA (numpy SVD); t-SNE
    falls back to PCA, with a warning, when scikit-learn is missing."""
    if method == "tsne":
        try:
            from sklearn.manifold import TSNE
        except ImportError:
            logger.warning("t-SNE needs scikit-learn (%s); drawing PCA instead", PLOTS_INSTALL)
            method = "pca"
        else:
            perplexity = float(min(30, max(2, (len(points) - 1) // 3)))
            return TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed).fit_transform(points)
    centred = points - points.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ vt[:2].T


def plot(groups: List[str], arrays: List[np.ndarray], output: str, labels: Optional[List[str]] = None,
         method: str = "tsne", seed: int = 1, title: str = "") -> None:
    plt = pyplot()
    xy = project(np.concatenate(arrays).astype(np.float32), method, seed)
    fig, ax = plt.subplots(figsize=(7, 6))
    start = 0
    label_names = sorted(set(labels)) if labels else []
    colours = plt.get_cmap("tab10")
    for g, (name, array) in enumerate(zip(groups, arrays)):
        part = xy[start:start + len(array)]
        start += len(array)
        if labels:
            for c, label in enumerate(label_names):
                chosen = np.array([l == label for l in labels[: len(array)]])
                ax.scatter(part[chosen, 0], part[chosen, 1], s=14, color=colours(c), marker=MARKERS[g % len(MARKERS)],
                           label=f"{name}/{label}" if g == 0 or c == 0 else None, alpha=0.75)
        else:
            ax.scatter(part[:, 0], part[:, 1], s=14, color=colours(g), label=name, alpha=0.75)
    ax.legend(fontsize=7, markerscale=1.2, loc="best")
    ax.set_title(title or f"{method.upper()} of {', '.join(groups)}")
    fig.tight_layout()
    save_figure(fig, output, dpi=110)
    plt.close(fig)
