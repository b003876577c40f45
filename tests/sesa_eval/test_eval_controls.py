"""Answerability, the closed/oracle controls and the power figure, with scripted policies."""

import json

import pytest
from eval_fakes import ListSearch, ScriptedSolver

from sesa_eval.answerability import ensure_answerability, reach_rows
from sesa_eval.compare import compare_reports, render_comparison
from sesa_eval.datasets import EvalQuestion
from sesa_eval.harness import EvalSettings, evaluate
from sesa_eval.mcnemar import mde_exact
from sesa_eval.paired import min_detectable, paired_intervals
from sesa_eval.report_markdown import render_markdown
from sesa_graph.config import SolverConfig
from sesa_graph.policy.base import GenerationResult
from sesa_graph.rollout.judge import Judge
from sesa_runs.eval_dir import Eval
from sesa_runs.eval_tables import eval_tables_html
from tools.corpus import Doc


class QuerySearch:
    """Docs by query: a query holding 'Jupiter' finds the planet's article; anything else a filler."""

    def __init__(self):
        self.queries = []

    def search(self, queries, k=3):
        self.queries += queries
        planet = Doc("p", "Jupiter", "Jupiter is the largest planet. " + "x" * 50 + " Saturn is second.")
        filler = Doc("f", "Filler", "Nothing here.")
        return [[planet, filler][:k] if "Jupiter" in q else [filler][:k] for q in queries]


def q(qid, question, golds):
    return EvalQuestion(dataset="alpha", id=qid, question=question, golds=golds)


def test_reach_question_oracle_and_the_doc_as_the_solver_sees_it():
    qs = [
        q("1", "What is the largest planet, Jupiter?", ["Jupiter"]),
        q("2", "Largest planet?", ["Jupiter", "jupiter", "Jove"]),
        q("3", "Second planet by size?", ["Saturn"]),
    ]
    search = QuerySearch()
    rows = {r["id"]: r for r in reach_rows(qs, search, k=3, doc_chars=40)}
    assert (rows["1"]["reach_question"], rows["1"]["reach_oracle"]) == (True, True)
    assert rows["1"]["doc"]["via"] == "question"
    assert (rows["2"]["reach_question"], rows["2"]["reach_oracle"], rows["2"]["answerable"]) == (
        False,
        True,
        True,
    )
    assert rows["2"]["doc"] == {
        "id": "p",
        "title": "Jupiter",
        "text": "Jupiter is the largest planet. xxxxxxxxx",
        "via": "oracle",
    }
    # Saturn is in the article, but past the 40 characters the solver is shown: not reachable
    assert not rows["3"]["answerable"] and rows["3"]["doc"] is None
    # oracle queries: the question followed by each distinct gold (case duplicates kept: normalization is the judge's)
    assert "Largest planet? Jove" in search.queries and "Second planet by size? Saturn" in search.queries


async def test_answerability_is_cached_and_a_failed_search_is_unknown(tmp_path):
    qs = [q("1", "Largest planet?", ["Jupiter"])]
    assert await ensure_answerability(qs, ListSearch(fail=True), 3, 400, tmp_path) == {}
    search = QuerySearch()
    rows = await ensure_answerability(qs, search, 3, 400, tmp_path)
    assert rows["alpha/1"]["answerable"] and search.queries
    again = QuerySearch()
    assert await ensure_answerability(qs, again, 3, 400, tmp_path) == rows and again.queries == []


class AlwaysSearches(ScriptedSolver):
    """Searches on every turn it is free to; records the environment's injected text."""

    def __init__(self):
        super().__init__()
        self.injected = []

    def encode_text(self, text):
        self.injected.append(text)
        return [0]

    async def generate(self, requests):
        out = []
        for r in requests:
            forced = self.injected and self.injected[-1].endswith("<answer>")
            text = "Paris</answer>" if forced else "<search>capital</search>"
            out.append(GenerationResult(text, [1], [0.0], list(r.prompt_ids), "stop"))
        return out


def settings(tmp_path, data_dir, **kw):
    # one rollout at a time: AlwaysSearches reads the last injected text as its own rollout's
    return EvalSettings(
        name=kw.pop("name", "t"), out_root=tmp_path / "evals", data_dir=data_dir, concurrency=1, **kw
    )


async def test_closed_book_cannot_search(tmp_path, data_dir):
    search = ListSearch()
    s = settings(
        tmp_path,
        data_dir,
        datasets=["alpha"],
        bank_modes=["closed"],
        solver=SolverConfig(force_final_answer=True),
    )
    out = await evaluate(s, policy=AlwaysSearches(), search=search, judge=Judge(None))
    recs = [json.loads(x) for x in (out.out_dir / "records.jsonl").read_text().splitlines()]
    assert {r["mode"] for r in recs} == {"closed"} and len(recs) == 4
    assert all(r["searches"] == 0 and r["turns"] == 1 and r["status"] == "answered" for r in recs)
    assert {r["prediction"] for r in recs} == {"Paris"}
    assert search.calls == 1  # the answerability search only: no rollout reached the search node
    # without a forced final action the search it writes ends the rollout instead
    s = settings(
        tmp_path,
        data_dir,
        datasets=["alpha"],
        bank_modes=["closed"],
        name="nf",
        solver=SolverConfig(force_final_answer=False),
    )
    out = await evaluate(s, policy=AlwaysSearches(), search=search, judge=Judge(None))
    assert out.report["diagnostics"]["closed"]["status"] == {"max_turns": 4} and search.calls == 2


async def test_oracle_gives_the_answer_bearing_doc_first_and_counts_the_rest(tmp_path, data_dir):
    policy = AlwaysSearches()
    s = settings(tmp_path, data_dir, bank_modes=["off", "oracle"], solver=SolverConfig(max_turns=2))
    out = await evaluate(s, policy=policy, search=ListSearch(), judge=Judge(None))
    recs = {r["key"]: r for r in map(json.loads, (out.out_dir / "records.jsonl").read_text().splitlines())}
    # only a1 (gold Paris) has its answer in the one doc ListSearch returns
    assert [k for k in recs if "/oracle/" in k] == ["alpha/a1/oracle/greedy"]
    assert recs["alpha/a1/oracle/greedy"]["oracle_doc"]["title"] == "Paris"
    (first,) = [t for t in policy.injected if t.startswith("<search>")]  # the oracle's opening, once
    assert first.startswith(
        "<search>Capital of France? answer: Paris</search>\n<information>Doc 1 (Title: Paris)"
    )
    rep = out.report
    assert rep["no_oracle_doc"] == {"alpha": 3, "bamboogle": 3} and rep["complete"]
    assert rep["answerability"]["all"] == {
        "n": 7,
        "known": 7,
        "reach_question": 1,
        "reach_oracle": 1,
        "answerable": 1,
    }
    assert rep["answerable"]["metrics"]["em"]["off"]["alpha"]["n"] == 1
    assert rep["metrics"]["em"]["off"]["alpha"]["n"] == 4
    assert rep["answerable"]["vs_off"]["em"]["oracle"]["alpha"]["n"] == 1
    md = render_markdown(rep)
    assert "## Answerability" in md and "| All | 7 | 14.3 (1) | 14.3 (1) | 14.3 (1) | 6 |" in md
    assert "| off, answerable |" in md and "oracle - off, exact match, answerable" in md
    all_, ans = compare_reports(f"{out.out_dir}:off", f"{out.out_dir}:oracle", metric="em")
    assert (all_.subset, ans.subset) == ("all", "answerable")
    alpha = {r.dataset: r for r in ans.rows}["alpha"]
    # one pair: no exact test can detect any difference
    assert alpha.n_paired == 1 and alpha.mde is None and "mde (n)" in render_comparison(ans)
    assert "| none (1) |" in render_comparison(ans)
    ev = Eval(out.out_dir)  # what sesa report and the notebooks read
    assert ev.answerability().set_index("id").loc["a1", "doc_title"] == "Paris"
    page = eval_tables_html(ev.report)
    assert "<h2>Answerability</h2>" in page and "oracle - off, judge score, answerable" in page


def test_mde_and_mcnemar_from_the_discordant_pairs():
    # 100 questions, 10 discordant (6 for B, 4 for A): exact McNemar p = 2 * P(Bin(10, .5) <= 4) = 0.754
    a = [{"dataset": "d", "id": str(i), "mode": "off", "em": 1.0 if i < 4 else 0.0} for i in range(100)]
    b = [{"dataset": "d", "id": str(i), "mode": "on", "em": 1.0 if 4 <= i < 10 else 0.0} for i in range(100)]
    p = paired_intervals(a, b, "off", "on", "em", ["d"])
    assert (p["d"]["b"], p["d"]["c"]) == (6, 4) and p["d"]["p"] == pytest.approx(0.7539, abs=1e-4)
    # with ample discordance the exact test's mde is near the normal approximation's 2.80 * sqrt(0.1 / 100)
    assert p["d"]["psi"] == pytest.approx(0.1) and p["d"]["mde"] == pytest.approx(mde_exact(100, 0.1))
    assert p["d"]["mde"] == pytest.approx(8.86, abs=0.5)
    # the mean of several datasets keeps the normal approximation (no single test covers it)
    assert p["mean"]["mde"] == pytest.approx(8.86, abs=0.01)
    assert min_detectable(0.0, 100) == pytest.approx(2.80, abs=0.01)
    # the answerable subset: only the kept questions are paired
    assert paired_intervals(a, b, "off", "on", "em", ["d"], keep={"d/4", "d/5"})["d"]["n"] == 2


async def test_subset_answerable_runs_only_the_reachable_questions_and_counts_the_rest(tmp_path, data_dir):
    s = settings(tmp_path, data_dir, subset="answerable", solver=SolverConfig(max_turns=2))
    out = await evaluate(s, policy=AlwaysSearches(), search=ListSearch(), judge=Judge(None))
    recs = [json.loads(x) for x in (out.out_dir / "records.jsonl").read_text().splitlines()]
    assert [r["key"] for r in recs] == ["alpha/a1/off/greedy"]  # a1 alone has its gold in the search's reach
    rep = out.report
    assert rep["answerability"]["all"]["n"] == 7 and rep["complete"]  # every question is still counted
    assert rep["metrics"]["em"]["off"]["alpha"]["n"] == 1 and rep["subset"] == "answerable"
    assert "answerable questions only (--subset answerable)" in render_markdown(rep)
    # the same eval over all questions reuses the answerable one's record
    s = settings(tmp_path, data_dir, solver=SolverConfig(max_turns=2))
    out = await evaluate(s, policy=AlwaysSearches(), search=ListSearch(), judge=Judge(None))
    assert out.run.cached and out.report["metrics"]["em"]["off"]["alpha"]["n"] == 4
