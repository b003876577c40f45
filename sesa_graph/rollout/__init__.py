"""Rollouts: the search loop (``loop``), the answer judge (``judge``) and the checks on a proposed question
(``proposal_checks``). The LangGraph graphs that wire them are in ``graphs/``."""
