"""Which fix spoke: the switch that turns fixes off, and the end of every message a fix adds."""

OFF_ENV = "FAIRSEQ_CTX_FIXES_OFF"


def spoken_by(name: str) -> str:
    """The end of a message that the fix ``name`` adds to fairseq: the fix and how to switch it off."""
    return f" [fairseq-ctx fix {name}; {OFF_ENV}={name} switches it off]"
