"""The word lists of the generated demo corpora: English source words with a German-like target
word, nouns by grammatical gender (m, f, n). The document-level corpus (context family) and the
multimodal corpus (multi-source family) both draw their sentences from them."""
from typing import Dict, List, Tuple

NOUNS: Dict[str, List[Tuple[str, str]]] = {
    "m": [("dog", "hund"), ("tree", "baum"), ("man", "mann"), ("car", "wagen"), ("table", "tisch"),
          ("chair", "stuhl"), ("garden", "garten"), ("river", "fluss"), ("mountain", "berg"),
          ("king", "koenig"), ("teacher", "lehrer"), ("key", "schluessel")],
    "f": [("cat", "katze"), ("woman", "frau"), ("door", "tuer"), ("lamp", "lampe"), ("street", "strasse"),
          ("flower", "blume"), ("city", "stadt"), ("bottle", "flasche"), ("queen", "koenigin"),
          ("school", "schule"), ("bridge", "bruecke"), ("clock", "uhr")],
    "n": [("house", "haus"), ("child", "kind"), ("book", "buch"), ("window", "fenster"), ("horse", "pferd"),
          ("boat", "boot"), ("bed", "bett"), ("picture", "bild"), ("village", "dorf"), ("glass", "glas"),
          ("girl", "maedchen"), ("water", "wasser")],
}
ADJECTIVES = [("big", "gross"), ("old", "alt"), ("new", "neu"), ("small", "klein"), ("red", "rot"),
              ("quiet", "leise"), ("beautiful", "schoen"), ("dark", "dunkel")]
VERBS = [("sleeps", "schlaeft"), ("waits", "wartet"), ("stands", "steht"), ("falls", "faellt"),
         ("shines", "glaenzt"), ("moves", "bewegt"), ("turns", "dreht")]
ADVERBS = [("here", "hier"), ("there", "dort"), ("today", "heute"), ("again", "wieder"), ("slowly", "langsam")]
