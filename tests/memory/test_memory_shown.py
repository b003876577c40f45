"""Only the skills the solver prompt shows are credited: ``SkillMemory.shown`` is what the render keeps."""


def test_shown_is_what_the_render_budget_keeps(make_memory):
    mem = make_memory(mode="static", render_max_chars=400)
    (hits,) = mem.retrieve_scored(["When was the company founded?"])
    skills = [s for s, _ in hits]
    assert len(skills) == 3 and all(isinstance(sim, float) for _, sim in hits)
    shown = mem.shown(skills)
    assert 0 < len(shown) < 3  # 400 characters hold one or two seed skills, not three
    assert mem.render(shown) == mem.render(skills)
    assert all(s.description[:30] in mem.render(shown) for s in shown)
    assert skills[len(shown)].description[:30] not in mem.render(skills)
    assert mem.shown([]) == []
