"""The Graph tab in a real headless Chromium, on the real app: a real run's graph, which grows while
the run streams, and where a click on a node marks its samples in the columns, rings the node and
offers to branch from there; a run written by hand (opened in the History tab), whose clicked node's
list shows, names the node and comes into view, and whose labels and title the browser draws
whole and apart; a saved run of n=256 x 128 tokens (no engine), whose graph draws folded and marks
its samples in the token wall; and Compare's two graphs side by side."""

from __future__ import annotations

import pytest

from playground import analysis as A
from playground.analysis.graph_figure import MAX_DRAWN
from tests.test_browser import ARTIFACTS, browser, fill_form, open_page  # noqa: F401  (browser: the fixture)
from tests.test_browser_panels import open_file, open_saved_run

NODES = """() => {
  const gd = document.querySelector('#graph-chart .js-plotly-plot');
  const out = [];
  gd._fullData.forEach((trace) => (trace.customdata || []).forEach((cd, k) => {
    if (typeof cd === 'string' && cd.includes('|')) out.push([cd, trace.x[k]]);
  }));
  return out;
}"""
WHERE = """(cd) => {
  const gd = document.querySelector('#graph-chart .js-plotly-plot');
  const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
  for (const trace of gd._fullData) {
    const k = (trace.customdata || []).indexOf(cd);
    if (k >= 0) return [box.left + xa._offset + xa.l2p(trace.x[k]), box.top + ya._offset + ya.l2p(trace.y[k])];
  }
  return null;
}"""
# The boxes of the labels a chart draws that overlap another's by more than 2 px each way (the
# tester's measure): the nodes' words, the branches' shares, the title.
OVERLAPS = """(sel) => {
  const texts = Array.from(document.querySelectorAll(`${sel} svg text`)).filter((t) => t.textContent.trim()
    && !t.closest('.hoverlayer') && !t.closest('.colorbar') && !t.closest('.legend') && !t.closest('.modebar'));
  const boxes = texts.map((t) => [t.textContent, t.getBoundingClientRect()]).filter(([, r]) => r.width > 0);
  const pairs = [];
  boxes.forEach(([a, r], i) => boxes.slice(i + 1).forEach(([b, q]) => {
    if (Math.min(r.right, q.right) - Math.max(r.left, q.left) > 2
        && Math.min(r.bottom, q.bottom) - Math.max(r.top, q.top) > 2) pairs.push([a, b]);
  }));
  return [boxes.length, pairs];
}"""
INSIDE = """(sel) => {  // whether the chart's title is drawn whole inside its chart
  const chart = document.querySelector(`${sel} .js-plotly-plot`).getBoundingClientRect();
  const title = document.querySelector(`${sel} .gtitle`).getBoundingClientRect();
  return title.left >= chart.left && title.right <= chart.right && title.top >= chart.top;
}"""


def open_graph(page) -> list[tuple[str, float]]:
    """Open the Graph tab, wait for its figure, and return its nodes' customdata and column."""
    page.get_by_role("tab", name="Graph").click()
    page.locator("#graph-chart .js-plotly-plot").wait_for(timeout=60_000)
    page.wait_for_function(f"() => ({NODES})().length > 1", timeout=30_000)
    return page.evaluate(NODES)


def click_node(page, customdata: str) -> list[int]:
    """Point at the node until its hover shows, then click it as a person does; its samples."""
    page.locator("#graph-chart").scroll_into_view_if_needed()
    x, y = page.evaluate(WHERE, customdata)
    page.mouse.move(x, y)
    page.locator("#graph-chart .hoverlayer").get_by_text("click: mark these samples").wait_for(timeout=10_000)
    page.mouse.down()
    page.mouse.up()
    return [int(i) for i in customdata.split("|")[1].split(",")]


@pytest.mark.slow
def test_a_click_on_a_node_of_a_real_run_marks_its_samples_and_branches_from_there(browser, app_url):  # noqa: F811
    page = open_page(browser, app_url)
    try:
        fill_form(page, "Once upon a time, in a village at the edge of the sea,", n=4, seed=11, max_tokens=48,
                  ignore_eos=True)
        page.get_by_role("tab", name="Graph").click()
        page.locator("#run").click()
        # the graph grows while the run streams: drawn before the run has finished
        page.wait_for_function("() => document.querySelector('#graph-chart .gtitle') !== null && "
                               "document.querySelector('#run-summary').innerText.includes('running')", timeout=120_000)
        page.locator("#run-summary").get_by_text("finished").wait_for(timeout=120_000)
        # The run's end is shown in two steps, the summary first, then the panel on screen, whose last
        # drawing of the graph clears the note: a node is clicked once the end has been shown whole
        # (the summary's progress, shown while the end is drawn, hidden again).
        page.wait_for_function("() => document.querySelector('#run-summary .wrap').classList.contains('hide')",
                               timeout=60_000)
        nodes = open_graph(page)
        assert "4 samples" in page.locator("#graph-summary").inner_text()
        words = [(cd, x) for cd, x in nodes if not cd.startswith(("start", "more:"))]
        # a node some but not all samples passed, within the columns in view
        cd = min(words, key=lambda node: (len(node[0].split("|")[1].split(",")) in (4,), node[1]))[0]
        want = click_node(page, cd)
        page.wait_for_function("(n) => document.querySelectorAll('#samples-area .sa-card.mk').length === n",
                               arg=len(want), timeout=10_000)
        marked = page.eval_on_selector_all("#samples-area .sa-card.mk", "cards => cards.map(c => Number(c.dataset.i))")
        assert sorted(marked) == want
        assert page.locator("#graph-chart .graph-picked-node").count() == 1  # the node clicked, ringed
        note = page.locator("#graph-note")
        note.locator(".graph-sample").first.wait_for(timeout=30_000)
        assert f"{len(want)} sample{'s' if len(want) > 1 else ''} at “" in note.locator("p").first.inner_text()
        assert sorted(int(s) for s in note.locator(".graph-sample").evaluate_all(
            "rows => rows.map(r => r.dataset.sample)")) == want
        note.locator("details").first.click()  # the raw text, the node's words marked
        assert note.locator("mark").first.inner_text().strip()
        page.screenshot(path=ARTIFACTS / "graph.png", full_page=True)
        button = note.locator("button.graph-branch").first
        sample, token = button.get_attribute("data-branch").split(",")
        button.click()
        page.locator("#branch-context").get_by_text(f"at token {token}").wait_for(timeout=30_000)
        assert f"Sample #{sample}" in page.locator("#branch-context").inner_text()
        # Another run: its graph is not the note's run's, and the note is hidden beside it.
        page.get_by_role("tab", name="Graph").click()
        page.locator("#run").click()
        page.wait_for_function("""() => {
          const gd = document.querySelector('#graph-chart .js-plotly-plot');
          const body = document.querySelector('#graph-note .graph-note-body');
          return gd && gd.layout.meta && body && gd.layout.meta.run !== body.dataset.run && body.hidden;
        }""", timeout=120_000)
    finally:
        page.close()


def test_a_click_on_a_node_of_a_run_written_by_hand_lists_its_samples_in_view(browser, app_url, tmp_path):  # noqa: F811
    """A run written by hand (its figures marked with its origin, as a replay's are) opened in the
    History tab: a click on a node marks it, and its list shows (it stayed hidden when the origin
    took the chart's ``meta`` from the run's id), names the node and comes into view. The browser
    draws no label over another, in the tab and in Compare's half-width graphs, and the titles whole."""
    import json

    from tests.test_graph import MOONS, run_of

    path = tmp_path / "moons.jsonl"  # two runs, for Compare; the last is on screen
    path.write_text("".join(json.dumps({"prompt": "Describe the moon in one sentence.", "samples": samples}) + "\n"
                            for samples in (MOONS[8:] + MOONS[:8], MOONS)), encoding="utf-8")
    page = open_page(browser, app_url)
    try:
        open_file(page, path)
        page.locator("#upload-note").get_by_text("moons.jsonl").wait_for(timeout=30_000)
        nodes = open_graph(page)
        assert "written by hand" in page.locator("#graph-chart .gtitle").text_content()
        count, pairs = page.evaluate(OVERLAPS, "#graph-chart")
        assert count > 20 and pairs == [] and page.evaluate(INSIDE, "#graph-chart")
        cd = next(cd for cd, x in nodes if not cd.startswith(("start", "more:")) and x <= 3
                  and 1 < len(cd.split("|")[1].split(",")) < len(MOONS))
        want = click_node(page, cd)
        body = page.locator("#graph-note .graph-note-body")
        body.locator(".graph-sample").first.wait_for(state="visible", timeout=30_000)
        graph = A.sample_graph(run_of(MOONS))  # the same texts: the same graph
        words = " ".join(graph.nodes[int(m)].text for m in cd.split("|")[0].split(","))
        heading = body.locator("p").first.inner_text()
        assert heading.startswith(f"{len(want)} samples at “{A.truncate(words, 80)}”"), (heading, words)
        assert page.locator("#graph-chart .graph-picked-node").count() == 1
        page.wait_for_function("() => document.querySelector('#graph-note .graph-sample')"
                               ".getBoundingClientRect().bottom <= window.innerHeight", timeout=10_000)
        # The keyboard's way: the chart takes focus, and an arrow moves to the next node in reading
        # order, marking its samples as a click does; the arrow back returns to the node clicked.
        page.locator("#graph-chart .js-plotly-plot").focus()
        page.keyboard.press("ArrowRight")
        page.wait_for_function("(h) => { const p = document.querySelector('#graph-note .graph-note-body p'); "
                               "return p && !p.innerText.startsWith(h); }", arg=heading[:60], timeout=30_000)
        moved = body.locator("p").first.inner_text()
        assert page.evaluate("() => document.querySelector('#samples-area .sa').dataset.marked") == \
            moved.split()[0]  # "N samples at …": those N are marked
        assert page.locator("#graph-chart .graph-picked-node").count() == 1
        page.keyboard.press("ArrowLeft")
        page.wait_for_function("(h) => document.querySelector('#graph-note .graph-note-body p')?.innerText"
                               ".startsWith(h)", arg=heading[:60], timeout=30_000)
        page.get_by_role("tab", name="Compare").click()
        page.wait_for_function("() => ['a', 'b'].every((x) => document.querySelector(`#compare-${x} input`)"
                               "?.value.includes('hand-'))", timeout=30_000)
        page.locator("#compare-graphs").click()
        for name in "ab":
            page.locator(f"#compare-graph-{name} .gtitle").wait_for(timeout=30_000)
            count, pairs = page.evaluate(OVERLAPS, f"#compare-graph-{name}")
            assert count > 10 and pairs == [] and page.evaluate(INSIDE, f"#compare-graph-{name}"), name
    finally:
        page.close()


def test_a_saved_run_of_256_samples_draws_folded_and_a_click_marks_its_rows_in_the_wall(
        browser, app_url, tmp_path):  # noqa: F811
    from playground.backends.synthetic import synthetic_run

    run = synthetic_run(256, 128, seed=2, logprobs=None)  # the bundle at half the size: the real run has them
    for s in run.samples:
        s.text = "".join(s.token_texts)
    page = open_saved_run(browser, app_url, run, tmp_path / "n256.json")
    try:
        nodes = open_graph(page)
        assert len(nodes) <= MAX_DRAWN + 1 and any(cd.startswith("more:") for cd, _ in nodes)
        assert "256 samples" in page.locator("#graph-summary").inner_text()
        title = page.locator("#graph-chart .gtitle").text_content()
        assert f"{len(A.sample_graph(run).nodes)} nodes" in title and "folded" in title
        cd = next(cd for cd, x in nodes if not cd.startswith(("start", "more:")) and x <= 6
                  and 1 < len(cd.split("|")[1].split(",")) < 256)
        want = click_node(page, cd)
        page.wait_for_function("(n) => document.querySelector('#samples-area .sa').dataset.marked === String(n)",
                               arg=len(want), timeout=10_000)
        rows = page.eval_on_selector_all("#samples-area .sa-row.mk", "rows => rows.map(r => Number(r.dataset.i))")
        assert rows and set(rows) <= set(want)  # the wall draws the rows in view: those marked are the node's
        page.locator("#graph-note .graph-sample").first.wait_for(timeout=30_000)
        assert page.locator("#graph-note button.graph-branch").count() == min(len(want), 64)
        page.screenshot(path=ARTIFACTS / "graph-n256.png", full_page=True)
    finally:
        page.close()


def test_compare_draws_two_runs_graphs_side_by_side(browser, app_url, tmp_path):  # noqa: F811
    """A file of two runs opened in the History tab: Compare starts with them as A and B, and
    draws each one's sample graph beside the other's."""
    from tests.test_graph import run_of

    a = run_of(["The cat sat on the mat.", "A cat sat on the mat."], "run-cats")
    b = run_of(["The dog sat on the mat.", "The dog ran away.", "A dog sat down."], "run-dogs")
    path = tmp_path / "two.jsonl"
    path.write_text(a.to_json() + "\n" + b.to_json() + "\n", encoding="utf-8")
    page = open_page(browser, app_url)
    try:
        open_file(page, path)
        page.locator("#upload-note").get_by_text("two.jsonl").wait_for(timeout=30_000)
        page.get_by_role("tab", name="Compare").click()
        page.wait_for_function("() => document.querySelector('#compare-b input')?.value.includes('run-dogs')",
                               timeout=30_000)
        page.locator("#compare-graphs").click()
        for name, run in (("a", a), ("b", b)):
            chart = f"#compare-graph-{name}"
            page.locator(f"{chart} .gtitle").wait_for(timeout=30_000)
            title = page.locator(f"{chart} .gtitle").text_content()
            graph = A.sample_graph(run)
            assert run.request["request_id"] in title and f"{len(graph.nodes)} nodes" in title, title
        boxes = [page.locator(f"#compare-graph-{name}").bounding_box() for name in "ab"]
        assert boxes[0]["x"] + boxes[0]["width"] <= boxes[1]["x"] + 1  # side by side
    finally:
        page.close()
