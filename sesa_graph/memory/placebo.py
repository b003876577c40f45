"""Placebo skills: as many skills as real retrieval returns, each about as long, with unrelated content.

The ablation answers "do gains come from what the skills say, or from a longer prompt?". For every real
skill retrieved for a question, the solver gets a skill-shaped entry about something that has nothing to
do with search (gardening, bread, bicycles, ...) whose rendered text is within a few characters of the
real one's. The choice is deterministic per question.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from sesa_graph.memory.skill import Skill

# (description, trigger, avoid, query templates)
PLACEBO_POOL: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    (
        "Water seedlings from below so the soil stays loose and the stems stay dry.",
        "Young plants sit in small pots on a windowsill.",
        "Pouring water over the leaves in full sun.",
        ("[plant] watering schedule",),
    ),
    (
        "Let bread dough rise until it has doubled, then press it gently to release the gas.",
        "A loaf is being baked with fresh yeast.",
        "Adding more flour to a sticky dough too early.",
        ("[flour type] hydration",),
    ),
    (
        "Tighten bicycle wheel nuts in a crossing pattern and check the brakes after every adjustment.",
        "A bicycle wheel has just been refitted.",
        "Riding before the quick release is fully closed.",
        ("[bicycle part] torque",),
    ),
    (
        "Sand wood along the grain, moving from coarse to fine paper between coats of finish.",
        "A wooden shelf is being refinished.",
        "Skipping grits, which leaves visible scratches.",
        ("[wood] sanding grit",),
    ),
    (
        "Rinse rice until the water runs clear and rest it covered for ten minutes after cooking.",
        "Rice is cooked in a pot on the stove.",
        "Lifting the lid while the rice steams.",
        ("[rice variety] water ratio",),
    ),
    (
        "Knit a small swatch first and measure stitches per inch before casting on a garment.",
        "A sweater pattern gives a gauge.",
        "Trusting the needle size printed on the yarn label alone.",
        ("[yarn weight] gauge",),
    ),
    (
        "Keep a houseplant near bright indirect light and rotate the pot a quarter turn each week.",
        "Leaves lean toward the window.",
        "Moving the plant to direct afternoon sun.",
        ("[houseplant] light needs",),
    ),
    (
        "Sharpen a kitchen knife at a steady angle, using the same number of strokes on each side.",
        "A blade no longer slices tomatoes cleanly.",
        "Pressing hard on a coarse stone.",
        ("[knife steel] sharpening angle",),
    ),
    (
        "Mulch garden beds after a rain so the moisture stays in the soil through warm days.",
        "Summer vegetables grow in raised beds.",
        "Piling mulch against the stems.",
        ("[mulch] depth",),
    ),
    (
        "Paint walls from the top down and keep a wet edge so the roller marks blend together.",
        "A room is being repainted in one colour.",
        "Letting one section dry before rolling the next.",
        ("[paint finish] roller nap",),
    ),
    (
        "Brew tea with water just off the boil for black leaves and cooler water for green ones.",
        "A pot of loose-leaf tea is being made.",
        "Steeping green tea in boiling water for long.",
        ("[tea] steeping time",),
    ),
    (
        "Check tyre pressure when the tyres are cold and inflate them to the value on the door frame.",
        "A car is prepared for a long drive.",
        "Reading pressure right after highway driving.",
        ("[tyre size] pressure",),
    ),
    (
        "Fold egg whites into batter with a spatula in slow strokes so the air bubbles survive.",
        "A sponge cake recipe uses whipped whites.",
        "Stirring the batter briskly.",
        ("[cake] folding method",),
    ),
    (
        "Store potatoes in a cool dark place away from onions so they keep for weeks.",
        "A sack of potatoes was bought for the winter.",
        "Keeping them in the refrigerator.",
        ("[vegetable] storage",),
    ),
    (
        "Prune fruit trees in late winter, cutting just above an outward-facing bud.",
        "An apple tree has crowded branches.",
        "Leaving stubs that invite rot.",
        ("[fruit tree] pruning time",),
    ),
    (
        "Clean a paintbrush while the paint is still wet, then hang it bristles down to dry.",
        "A painting session is over for the day.",
        "Leaving brushes standing in a jar overnight.",
        ("[paint type] brush cleaning",),
    ),
)


def _fit(text: str, target: int, filler: str) -> str:
    """``text`` lengthened with filler or cut at a word boundary to about ``target`` chars ('' for 0)."""
    if target <= 0:
        return ""
    while len(text) < target:
        text = f"{text} {filler}"
    cut = text[: target + 1].rsplit(" ", 1)[0].rstrip(" ,;")
    return cut if len(cut) >= target - 12 else text[:target]


def placebo_for(question: str, real: Sequence[Skill]) -> list[Skill]:
    """One unrelated skill per real retrieved skill, each field about as long as the real one's."""
    start = int(hashlib.sha1(question.encode()).hexdigest()[:8], 16)
    pool = len(PLACEBO_POOL)
    out = []
    for i, skill in enumerate(real):
        j = (start + i) % pool
        desc, trigger, avoid, _ = PLACEBO_POOL[j]
        nxt = PLACEBO_POOL[(j + 1) % pool]
        queries = [PLACEBO_POOL[(j + n) % pool][3][0] for n in range(len(skill.queries))]
        queries = [_fit(q, len(rq), q) for q, rq in zip(queries, skill.queries)]
        out.append(
            Skill(
                id=f"placebo-{j}",
                category="other",
                source="seed",
                description=_fit(desc, len(skill.description), nxt[0]) or desc,
                trigger=_fit(trigger, len(skill.trigger), nxt[1]) or trigger,
                avoid=_fit(avoid, len(skill.avoid), nxt[2]),
                queries=[q for q in queries if q],
            )
        )
    return out
