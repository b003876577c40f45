"""The embedded corpus as the core knows it, in one place: its articles (:mod:`.articles`), the facts parsed
from an article (:mod:`.facts`), the held-out split the probe set keeps for itself (:mod:`.heldout`), and the
target pools self-play draws from (:mod:`.targets`, :mod:`.target_build`). The warm-up, the self-play
bootstrap and the probe generator all read it from here; search over the corpus is ``tools`` (``tools.corpus``)."""
