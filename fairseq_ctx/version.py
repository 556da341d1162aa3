"""The package version: semantic versioning, released as git tags ``vMAJOR.MINOR.PATCH``."""
__version__ = "0.2.0.dev0"
