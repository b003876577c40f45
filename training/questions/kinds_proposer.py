"""The proposer's example kinds: 1-hop and 2-hop questions about a target that never name it. A mixin
of :class:`training.questions.synth.Synthesizer`, whose parsed facts and ``_build`` builder these methods
use."""

from __future__ import annotations

from graphs.propose import proposer_messages
from sesa_graph.corpus.articles import Article
from sesa_graph.corpus.facts import clip_words, mentions, question_word
from sesa_graph.rollout.proposal_checks import static_checks
from training.questions.examples import Miss, WarmupExample


class ProposerKinds:
    """One method per proposer kind of ``DEFAULT_MIX``: an article (the target) in, a grounded example
    (or None) out."""

    # ---- proposer kinds -----------------------------------------------------------------------------
    def _proposer(
        self,
        kind: str,
        hops: int,
        a: Article,
        steps: list[tuple[str, str, str | Miss]],
        final_think: str,
        question: str,
    ) -> WarmupExample | None:
        if mentions(question, a.name) or mentions(question, a.title):
            return None
        ex = self._build(
            "proposer",
            kind,
            hops,
            proposer_messages(a.name, hops),
            steps,
            final_think,
            "question",
            question,
            a.name,
        )
        if ex is None:
            return None
        state = {
            "status": "answered",
            "final": question,
            "target": a.name,
            "hops": hops,
            "searches": ex.searches,
        }
        return ex if static_checks(state, self.proposer_checks) is None else None

    def propose_1(self, a: Article) -> WarmupExample | None:
        c = self.clauses[a.title]
        question = f"{question_word(a)} {c.verb} {c.phrase()}?"
        return self._proposer(
            "propose_1",
            1,
            a,
            [
                (f"I should read about {a.name} first.", a.name, a.title),
            ],
            f"Doc {{rank}} says {a.name} {c.verb} {c.phrase()}. I can ask for that without naming it.",
            question,
        )

    def propose_2(self, a: Article) -> WarmupExample | None:
        c, b = self.clauses[a.title], self.bridge(a)
        if b is None:
            return None
        hidden = self.hide(a, b)
        if hidden is None:
            return None
        inner, pred = hidden
        cb = self.clauses[b.title]
        question = f"{question_word(a)} {c.verb} {c.det} {pred}?"
        if mentions(question, b.name):
            return None
        hops = self.rng.choice([2, 2, 3])
        return self._proposer(
            "propose_2",
            hops,
            a,
            [
                (f"I should read about {a.name} first.", a.name, a.title),
                (
                    (
                        f"Doc {{prev}} says {a.name} {c.verb} {clip_words(c.phrase(), 10)}. It mentions {b.name}; "
                        f"I will look it up to hide it behind a clue."
                    ),
                    b.name,
                    b.title,
                ),
            ],
            f"Doc {{rank}} says {b.name} {cb.verb} {inner}. I replace {b.name} with that clue.",
            question,
        )
