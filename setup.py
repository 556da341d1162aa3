"""Installable fairseq plugin: context-aware, multi-source MT and document embeddings."""
import re
from pathlib import Path

from setuptools import find_packages, setup

VERSION = re.search(r'__version__ = "([^"]+)"', Path("fairseq_ctx/version.py").read_text(encoding="utf-8")).group(1)

setup(
    name="fairseq-ctx",
    version=VERSION,
    description="fairseq plugin: context-aware MT (HCE/HMCE), multi-source MT, multilingual "
    "document embedding (T-MDE) and CKA tools",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    author="the fairseq-ctx developers",
    license="MIT",
    license_files=["LICENSE"],
    classifiers=[
        "Development Status :: 3 - Alpha",
        "Intended Audience :: Science/Research",
        "License :: OSI Approved :: MIT License",
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.11",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
    python_requires=">=3.11",
    packages=find_packages(include=["fairseq_ctx", "fairseq_ctx.*"]),
    package_data={"fairseq_ctx": ["*/configs/*.yaml"]},  # the fairseq-hydra-train configs
    install_requires=[
        "fairseq-fixed==0.12.3.1",
        "torch>=1.13",
        "sentencepiece",
        "sacrebleu>=2",
        "numpy",
    ],
    extras_require={"dev": ["pytest>=7", "pytest-xdist>=3.8", "matplotlib", "scikit-learn", "faiss-cpu", "ctxpro==0.0.5",
                            "sacremoses"],
                    "plots": ["matplotlib", "scikit-learn"], "faiss": ["faiss-cpu"], "comet": ["unbabel-comet"],
                    "ctxpro": ["ctxpro==0.0.5"], "genpro": ["sacremoses"]},
    entry_points={
        "console_scripts": [
            "fairseq-ctx-user-dir=fairseq_ctx.cli.user_dir:main",
            "fairseq-ctx-options=fairseq_ctx.cli.options:main",
            "fairseq-ctx-prepare-docs=fairseq_ctx.cli.prepare_docs:main",
            "fairseq-ctx-make-corpus=fairseq_ctx.cli.make_corpus:main",
            "fairseq-ctx-score=fairseq_ctx.cli.score:main",
            "fairseq-ctx-make-multilingual-corpus=fairseq_ctx.cli.make_multilingual_corpus:main",
            "fairseq-ctx-embed=fairseq_ctx.cli.embed:main",
            "fairseq-ctx-xsim=fairseq_ctx.cli.xsim:main",
            "fairseq-ctx-doc-classify=fairseq_ctx.cli.doc_classify:main",
            "fairseq-ctx-plot-embeddings=fairseq_ctx.cli.plot_embeddings:main",
            "fairseq-ctx-analyze-heads=fairseq_ctx.cli.analyze_heads:main",
            "fairseq-ctx-contrastive=fairseq_ctx.cli.contrastive:main",
            "fairseq-ctx-cxmi=fairseq_ctx.cli.cxmi:main",
            "fairseq-ctx-subset-bleu=fairseq_ctx.cli.subset_bleu:main",
            "fairseq-ctx-translate-doc=fairseq_ctx.cli.translate_doc:main",
            "fairseq-ctx-make-contrastive=fairseq_ctx.cli.make_contrastive:main",
            "fairseq-ctx-make-multimodal-corpus=fairseq_ctx.cli.make_multimodal_corpus:main",
            "fairseq-ctx-adversarial=fairseq_ctx.cli.adversarial:main",
            "fairseq-ctx-attention-plot=fairseq_ctx.cli.attention_plot:main",
            "fairseq-ctx-supporting-attention=fairseq_ctx.cli.supporting_attention:main",
            "fairseq-ctx-generative=fairseq_ctx.cli.generative:main",
        ]
    },
)
