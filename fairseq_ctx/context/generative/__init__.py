"""Generative context evaluation: translate each example with its context, then check the form the
context decides in the translation (Wicks & Post, 2023, ctxpro; Post & Junczys-Dowmunt, 2023, GenPro)."""
