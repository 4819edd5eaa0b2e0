"""Two runs side by side, from hand-built runs (no engine): sample i of A against sample i of B,
the settings and figures that differ, the one statement of the seeds they share (the Compare tab's
and its report's), pairing the samples by seed, and the runs the Compare tab lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from playground import analysis as A
from playground.analysis.comparison import conditions_statement, seed_statement
from playground.run import Run
from tests.test_report import make_run, sample

# --- two runs side by side ----------------------------------------------------------------------

def test_two_runs_side_by_side_per_index_first_divergence_and_measures():
    a = make_run([[1, 2, 3, 4], [1, 2, 3], [1, 7]], "run-a")
    b = make_run([[1, 2, 3, 4], [1, 2, 5], [1, 7], [1]], "run-b", temperature=1.3)
    pairs = A.pair_frame(a, b)
    assert pairs["verdict"].tolist() == ["identical", "diverged at token 2", "identical", "only in run B"]
    assert pairs["first_divergence"].fillna(-1).tolist()[:3] == [-1, 2, -1]
    assert (pairs.loc[1, "token_a"], pairs.loc[1, "token_b"]) == ("·is", "·wild")
    assert A.settings_diff(a, b).to_dict("records") == [{"setting": "n", "A": 3, "B": 4},
                                                       {"setting": "temperature", "A": 1.0, "B": 1.3}]
    branch = make_run([[1]], "run-c", seed=946402953, prefix_token_ids=[10539])  # a branch beside its parent
    parent = make_run([[1]], "run-p", seed=3)
    said = {r["setting"]: (r["A"], r["B"]) for r in A.settings_diff(parent, branch).to_dict("records")}
    assert said["seed"] == (3, 946402953) and said["prefix_token_ids"] == ("none", [10539])  # not 3.0, not nan
    measures = A.measures_side_by_side(a, b, measures=lambda run: {"answers": run.n - 1}).set_index("figure")
    assert measures.loc["distinct samples"].tolist() == [3, 4, 1]
    assert measures.loc["answers", "B - A"] == 1
    html = A.comparison_html(a, b)
    said = "2 of 3 sample pairs identical (1 of run B&#x27;s samples have no partner of the same index)"
    assert said in html and "id='compare-sample-1'" in html  # of the pairs, not of B's n
    assert A.identical_pairs(A.pair_frame(a, a)) == "3 of 3 samples identical"
    assert "tok-replace" in html  # B's sample 1 token by token against A's, its strip named B's
    assert html.count("B against A, token by token:") == 3  # the pairs where both have a sample
    assert "No pair shares its seed" not in (seed_statement(a, b) or "")  # both from seed 10
    said = seed_statement(a, Run(request=b.request, samples=[sample(i, [1], seed=100 + i) for i in range(3)]))
    assert said.startswith("No pair shares its seed (A's sample 0 has seed 10, B's 100)"), said
    assert said in A.comparison_report(a, Run(request=b.request, samples=[sample(0, [1], seed=100)])).replace(
        "&#x27;", "'")


# --- seeds the runs share: one statement, and pairing by seed ------------------------------------

EIGHT = [[1, 2, 3, 4], [1, 2, 5, 7], [1, 6, 3, 4], [5, 5], [1, 7], [2, 3], [4], [6, 6]]  # one per child seed


def seeded(base: int | None, request_id: str, n: int = 8, mode: str = "wrapper", seeds: list | None = None) -> Run:
    """A run of ``n`` samples seeded as the sampler seeds them (sample i: base + i; same-seed mode:
    base for all), or with ``seeds`` as given; each seed's sample has the same tokens in every run,
    as a seeded draw of one prompt with the same settings does."""
    seeds = seeds or [None if base is None else base if mode == "same-seed" else base + i for i in range(n)]
    run = make_run([EIGHT[(seed or 0) % len(EIGHT)] for seed in seeds], request_id, seed=base, mode=mode)
    for s, seed in zip(run.samples, seeds):
        s.seed = seed
    return run


def said_once(page: str, sentence: str) -> bool:
    """The sentence is in the report, once (as the page escapes it)."""
    import html

    return page.count(f"<p>{html.escape(sentence)}</p>") == 1


INDEPENDENT, SHARED = "each pair is two independent draws", "child seeds: their samples are not independent"


@pytest.mark.parametrize(("base_b", "says", "never"), [
    (2, ["⚠️ A and B share 7 child seeds: their samples are not independent. At different indices, A#1 and B#0 "
         "share seed 2, A#2 and B#1 seed 3, A#3 and B#2 seed 4, … (7 pairs); compared by index, no pair below "
         "shares its seed (A#0 has seed 1, B#0 seed 2)", "Pair the samples by seed"], [INDEPENDENT, "No pair shares"]),
    (1, ["ℹ️ Every pair below shares its seed (A and B share 8 child seeds): where a pair parts is what the "
         "difference between the runs changed"],
     ["⚠️", INDEPENDENT, "No pair shares", "At different indices", "Pair the samples by seed"]),
    (100, ["No pair shares its seed (A's sample 0 has seed 1, B's 100): each pair is two independent draws"],
     ["⚠️", SHARED, "A#"]),
])
def test_the_seeds_are_said_in_one_statement_the_compare_tab_and_the_report_alike(base_b, says, never):
    """Seed 1 against seed 2 (n = 8) used to say "No pair shares its seed … independent draws" and,
    right under it, "A and B share 7 child seeds": now one statement says which samples share a
    seed; the same seed and far-apart seeds say what they said. The report says the same sentence."""
    from playground.analysis.comparison import seed_statement
    from playground.ui.compare_tab import comparison

    a, b = seeded(1, "run-1"), seeded(base_b, "run-2")
    statement = seed_statement(a, b)
    headline = comparison(a, b)[0]
    assert headline.endswith(f"\n\n{statement}"), headline
    assert all(part in statement for part in says), statement
    assert not any(part in headline for part in never), headline
    assert not (INDEPENDENT in headline and SHARED in headline), headline  # never both
    page = A.comparison_report(a, b)
    assert said_once(page, statement)
    for phrase in (INDEPENDENT, SHARED):  # nothing else in the report says the contrary
        assert (phrase in page) == (phrase in statement), phrase


def test_the_seed_statement_when_seeds_are_shared_at_the_same_index_and_at_others_or_unknown_or_replayed():
    from playground.analysis.comparison import seed_pairs, seed_statement

    a, b = seeded(1, "run-1", n=4), seeded(None, "run-2", seeds=[1, 3, 9, 10])  # B#0 = A#0, B#1 = A#2
    assert seed_pairs(a, b) == [(0, 0), (2, 1)]
    assert seed_statement(a, b) == (
        "⚠️ A and B share 2 child seeds: their samples are not independent. 1 of the 4 pairs below shares its seed; "
        "at different indices, A#2 and B#1 share seed 3. Pair the samples by seed to set those that share one side "
        "by side.")
    assert "No pair shares its seed" not in seed_statement(a, b)  # two samples do
    same_seed = seeded(5, "run-s", n=4, mode="same-seed")  # every sample seed 5: one of them pairs with B#0
    assert seed_pairs(same_seed, seeded(5, "run-w", n=4)) == [(0, 0)]
    assert "1 of the 4 pairs below shares its seed, so" in seed_statement(same_seed, seeded(5, "run-w", n=4))
    unknown = seeded(None, "run-u", n=4)
    assert seed_statement(a, unknown) is None and A.pair_frame(a, unknown, "seed")["verdict"].tolist() == (
        ["only in run A"] * 4 + ["only in run B"] * 4)
    assert "no recorded seed" in seed_statement(a, unknown, "seed")
    replay = seeded(1, "run-r", n=4)
    replay.request["replay"] = {"of": "run-1", "pace": "x1"}
    assert seed_statement(a, replay) is None  # one sampling shown twice, as seed_overlaps has it
    with pytest.raises(ValueError, match="paired by index or seed, not 'token'"):
        A.pair_frame(a, b, "token")


def named(text: str) -> tuple[str, str]:
    """Where a listed run is from, and its id: a run the session holds is named as History names
    it (its id first), a saved run as the saved runs' list does (its id last)."""
    parts = text.split(" · ")
    return parts[0], parts[1] if parts[0] == "history" else parts[-1]


def test_compare_lists_this_browsers_saved_runs_so_a_reload_leaves_runs_to_compare(tmp_path):
    """After a reload the session holds no run, and the store holds this browser's: Compare lists
    them after the session's own (read from the store only when picked), and compares them."""
    import gradio as gr

    from playground.store import RunStore
    from playground.ui import compare_tab
    from playground.ui.keeping import Keeper, save_run
    from playground.ui.samples_area import SamplesSession

    with RunStore(tmp_path / "runs.sqlite3") as store:
        a, b, other = seeded(1, "run-1"), seeded(9, "run-2"), seeded(3, "run-3")
        save_run(store, "browser-a", a), save_run(store, "browser-a", b), save_run(store, "browser-b", other)
        with gr.Blocks():
            tab = compare_tab.declare(tmp_path)
        session = SamplesSession()
        tab.keeper = Keeper(store, gr.State())
        tab.keeper.register(session, "browser-a")
        listed, _ = compare_tab.refresh_lists(tab, [], [], None, None, None, None, session)
        keys = {named(text)[1]: key for text, key in listed["choices"]}
        assert [named(text) for text, _ in listed["choices"]] == [("saved", "run-2"), ("saved", "run-1")]
        assert all(key.startswith("saved:") for key in keys.values()), "another browser's runs are never listed"
        held, _ = compare_tab.refresh_lists(tab, [a], [], None, None, None, None, session)
        assert [named(text) for text, _ in held["choices"]] == [("history", "run-1"), ("saved", "run-2")]
        headline = compare_tab.compare(tab, keys["run-1"], keys["run-2"], [], [], None)[0]
        assert "`run-1`" in headline and "`run-2`" in headline, headline
        store.delete("browser-a", keys["run-2"].removeprefix("saved:"))  # gone meanwhile: asked to pick again
        with pytest.warns(UserWarning, match="Pick two runs first"):
            assert compare_tab.compare(tab, keys["run-1"], keys["run-2"], [], [], None) == gr.skip()


def test_pairing_by_seed_sets_the_samples_that_share_one_side_by_side_and_lists_the_others_alone(tmp_path):
    """Seed 1 against seed 2: by index A#0 and B#0 part at token 1, while A#1 and B#0 (seed 2) were
    never side by side; by seed they are, identical, and A#0 and B#7 are listed alone. The tab's
    choice re-pairs the comparison at once and its report pairs the same way."""
    import warnings

    import gradio as gr

    from playground.analysis.comparison import seed_statement
    from playground.ui import compare_tab

    a, b = seeded(1, "run-1"), seeded(2, "run-2")
    by_index = A.pair_frame(a, b)
    assert by_index.loc[0, "verdict"] == "diverged at token 1" and by_index["verdict"].eq("identical").sum() == 0
    pairs = A.pair_frame(a, b, "seed")
    assert list(zip(pairs["sample_a"], pairs["sample_b"], pairs["seed_a"], pairs["seed_b"]))[0] == (1, 0, 2, 2)
    assert pairs["verdict"].tolist() == ["identical"] * 7 + ["only in run A", "only in run B"]
    assert (pairs.loc[7, "sample_a"], pairs.loc[8, "sample_b"]) == (0, 7)
    assert pairs.loc[7, ["sample_b", "seed_b"]].isna().all() and pairs.loc[8, ["sample_a", "seed_a"]].isna().all()
    said = "7 of 7 same-seed pairs identical (run A's #0 and run B's #7 have no partner of the same seed)"
    assert A.identical_pairs(pairs, "seed") == said
    same_seed = A.pair_frame(seeded(2, "run-w", n=2), seeded(2, "run-s", n=3, mode="same-seed"), "seed")
    assert A.identical_pairs(same_seed, "seed") == (  # seed 2 is A's too, its one sample paired already
        "1 of 1 same-seed pairs identical (run A's #1 and run B's #1, #2 have no partner of the same seed left (a "
        "sample pairs with one of the other run, once))")
    columns = A.comparison_html(a, b, by="seed")
    assert said.replace("'", "&#x27;") in columns and "against A's sample that shares its seed" in columns
    assert all(f"id='{anchor}'" in columns for anchor in ("compare-pair-a1-b0", "compare-pair-a0", "compare-pair-b7"))
    assert "<b>A#1 · B#0</b> · identical" in columns

    with gr.Blocks():
        tab = compare_tab.declare(tmp_path)
    history = [a, b]
    headline, table, *_, report = compare_tab.compare(tab, "history:run-1", "history:run-2", history, [], None,
                                                      by="seed")
    statement = seed_statement(a, b, "seed")
    assert statement.startswith("⚠️ A and B share 7 child seeds: their samples are not independent. Paired by seed: "
                                "A#1 and B#0 share seed 2, A#2 and B#1 seed 3") and headline.endswith(statement)
    assert said in headline and table["label"] == "The samples of A and B that share a seed"
    assert table["value"][["A's sample", "B's sample"]].values.tolist()[0] == [1, 0]  # headed in words
    page = Path(report["value"]).read_text(encoding="utf-8")
    assert said_once(page, statement) and "<h2>The samples of A and B that share a seed</h2>" in page
    again = compare_tab.pair_again(tab, "history:run-1", "history:run-2", history, [], None, None, None, "index")
    assert again[1]["label"] == "Sample i of A against sample i of B" and "At different indices" in again[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "Pick two runs first" toast for a choice made before the runs
        assert compare_tab.pair_again(tab, None, "history:run-2", history, [], None, None, None, "seed") == gr.skip()


def test_a_runs_name_says_the_sampler_settings_it_changed_so_two_runs_of_one_seed_are_told_apart():
    """Seed 42 at temperature 0.3 and at 1.3: History, the saved runs' and Compare's lists, and the
    summary name what decides the tokens when it is not the default; a sweep's value once."""
    from playground.ui import views

    cold, hot = seeded(42, "run-1"), seeded(42, "run-2")
    cold.request.update(temperature=0.3, max_tokens=32, stop=["\n"])
    hot.request.update(temperature=1.3, top_p=1.0, ignore_eos=True)
    assert views.settings_marks(cold) == ("wrapper · CUMULATIVE · seed 42 · temperature 0.3 · max_tokens 32 · "
                                          "stop ['\\n']")
    assert views.settings_marks(hot) == "wrapper · CUMULATIVE · seed 42 · temperature 1.3 · ignore_eos on"
    assert "· wrapper · CUMULATIVE · temperature 1.3 · ignore_eos on ·" in views.run_summary(hot)
    hot.request["sweep"] = {"param": "temperature", "value": 1.3, "position": 0}
    assert views.history_label(hot).count("1.3") == 1  # "⇶ sweep temperature=1.3" says it


def test_the_compare_lists_say_which_runs_are_replays(tmp_path):
    """A replay in Run A / Run B's lists is named one, and of which run at what pace, as History
    says it, whether the session holds it or this browser's saved runs do; a sampling is not."""
    import gradio as gr

    from playground.store import RunStore
    from playground.ui import compare_tab
    from playground.ui.keeping import Keeper, save_run
    from playground.ui.samples_area import SamplesSession

    played, replay, kept = seeded(1, "run-1"), seeded(1, "run-2"), seeded(1, "run-3")
    for run in (replay, kept):
        run.request["replay"] = {"of": "run-1", "pace": "x4"}
    listed = [text for text, _ in compare_tab.pool([played, replay], [], None).values()]
    assert listed[0] == "history · run-1 · n=8 · wrapper · CUMULATIVE · seed 1 · finished · “Tell me about the sea”"
    assert listed[1] == ("history · run-2 · n=8 · wrapper · CUMULATIVE · seed 1 · finished · ⟲ replay of run-1 at x4 "
                         "· “Tell me about the sea”")
    with RunStore(tmp_path / "runs.sqlite3") as store:
        save_run(store, "browser-a", kept)
        with gr.Blocks():
            tab = compare_tab.declare(tmp_path)
        session = SamplesSession()
        tab.keeper = Keeper(store, gr.State())
        tab.keeper.register(session, "browser-a")
        saved, _ = compare_tab.refresh_lists(tab, [played], [], None, None, None, None, session)
        (history, _), (saved, _) = saved["choices"]
        assert history.startswith("history · run-1 · n=8") and "replay" not in history
        assert saved.startswith("saved · ") and saved.endswith(" · run-3") and " · ⟲ replay of run-1 at x4 · " in saved


def test_same_seeds_and_settings_that_part_are_explained_by_the_conditions_the_records_name(tmp_path):
    """Two runs that asked for the same tokens with the same seeds, whose samples still part: the
    headline and the report name what the records say differed (here the engine's dtype), so a
    demo does not read it as seeded sampling failing to repeat; a setting that differs, or pairs
    that all agree, need no such sentence."""
    import gradio as gr

    from playground.analysis.comparison import conditions_statement
    from playground.ui import compare_tab

    a, b = seeded(1, "run-1"), seeded(1, "run-2")
    assert conditions_statement(a, b) is None  # every pair the same
    b.samples[3].token_ids = [*b.samples[3].token_ids[:-1], 999]
    a.engine["conditions"], b.engine["conditions"] = {"dtype": "float32"}, {"dtype": "bfloat16"}
    said = conditions_statement(a, b)
    assert said.startswith("⚠️ 1 of the 8 pairs of samples that share a seed parted, though A and B asked for the same "
                           "tokens: seeded sampling repeats only under the same conditions, and these differed: the "
                           "engine differed: dtype: 'float32' vs 'bfloat16'"), said
    with gr.Blocks():
        tab = compare_tab.declare(tmp_path)
    headline, *_, report = compare_tab.compare(tab, "history:run-1", "history:run-2", [a, b], [], None)
    assert said in headline and "No setting differs" in headline
    assert said_once(Path(report["value"]).read_text(encoding="utf-8"), said)
    b.request["temperature"] = 0.5  # a setting differs: the settings' table names the cause
    assert conditions_statement(a, b) is None


def test_a_starts_as_the_run_a_demo_repeats_and_a_new_pair_clears_the_result_before(tmp_path):
    """Beside the run on screen, A is the newest other run of its prompt and n (not a one-sample
    rerun made in between), else the newest other run, else (after a reload) the newest saved run;
    when opening the tab picks another pair, the pair before's result goes."""
    import gradio as gr

    from playground.ui import compare_tab

    first, rerun, again = seeded(1, "run-1"), seeded(1, "run-2", n=1), seeded(1, "run-3")
    a, b = compare_tab.refresh([first, rerun, again], [], None, again)
    assert (a["value"], b["value"]) == ("history:run-1", "history:run-3")
    other = make_run([[1, 2]], "run-4", prompt="Name a colour")
    assert compare_tab.refresh([first, rerun, other], [], None, other)[0]["value"] == "history:run-2"
    saved = [("saved · … · run-0", "saved:key-0")]
    assert compare_tab.refresh([again], [], None, again, saved=saved)[0]["value"] == "saved:key-0"

    with gr.Blocks():
        tab = compare_tab.declare(tmp_path)
    kept = compare_tab.lists_opened(tab, [first, rerun, again], [], None, again, "history:run-1", "history:run-3")
    assert set(kept) == {tab.a, tab.b}  # the same pair: its result stays
    moved = compare_tab.lists_opened(tab, [first, rerun, again], [], None, again, "history:run-1", "history:run-2")
    assert moved[tab.b]["value"] == "history:run-3"
    assert set(moved) == {tab.a, tab.b, *tab.result()}  # every part of the result before goes
    assert moved[tab.headline] == "" and moved[tab.pairs]["visible"] is False
    assert moved[tab.report]["interactive"] is False


def test_the_history_note_names_the_runs_that_share_the_most_seeds_first():
    """Runs that drew with the very same seeds (a sweep's values, one request again) are said once,
    together, as paired; of the other pairs, those that share the most lead (a one-sample rerun
    shares one seed with each run of its base seed), and the rest are counted."""
    from playground.ui.showing import overlap_note

    runs = [seeded(1, "run-1"), seeded(3, "run-2", n=1), seeded(1, "run-3"), seeded(2, "run-4"), seeded(5, "run-5"),
            seeded(1, "run-6")]
    paired, warned = overlap_note(runs).split("\n\n")
    assert paired == ("ℹ️ `run-1`, `run-3` and `run-6` drew with the same child seeds (1–8), sample for sample: "
                      "their samples are paired, not independent."), paired
    named = [sentence.split(" share ")[0] for sentence in warned.removeprefix("⚠️ ").split("; ")[:3]]
    assert named == ["`run-4` and `run-6`", "`run-3` and `run-4`", "`run-1` and `run-4`"], warned  # 7 seeds each
    assert "`run-2`" not in warned and warned.endswith("; and 8 more pairs."), warned


def test_a_run_that_ends_with_the_compare_tab_on_screen_brings_its_lists_up_to_date(tmp_path):
    """The tab's part of every streamed run's end (``page.after_run``): on screen, the new run
    becomes B beside the newest other of its prompt, and the pair before's result goes; elsewhere,
    nothing (it is brought up to date when opened)."""
    import asyncio
    from types import SimpleNamespace

    import gradio as gr

    from playground.ui import compare_tab

    with gr.Blocks():
        tab = compare_tab.declare(tmp_path)
        page = SimpleNamespace(selected=gr.State("Diff"), history=gr.State([]), current=gr.State(None),
                               samples=SimpleNamespace(session=gr.State(None)))
        refreshed, inputs, outputs = compare_tab.after_run(tab, page, gr.State([]))
    assert outputs[:2] == [tab.a, tab.b] and inputs[0] is page.selected
    first, second, new = seeded(1, "run-1"), seeded(1, "run-2"), seeded(1, "run-3")
    history = [first, second, new]
    lists = (history, [], None, new, "history:run-1", "history:run-2")
    assert all(update == gr.skip() for update in asyncio.run(refreshed("Diff", *lists)).values())
    shown = asyncio.run(refreshed("Compare", *lists))
    assert set(shown) <= set(outputs)
    assert (shown[tab.a]["value"], shown[tab.b]["value"]) == ("history:run-2", "history:run-3")
    assert shown[tab.headline] == ""


def test_a_run_shown_says_when_an_earlier_run_of_its_prompt_drew_with_its_seeds():
    """Seed 2 after seed 1 at n=8: seven of the eight samples are no new draws, and a person who
    changed the seed for fresh samples is told; the same seed again is the reproducibility check,
    said with its outcome, and comes first; runs that repeat seeds on purpose, another prompt, a
    run started later, or seeds n apart say nothing."""
    def at(run: Run, t: float) -> Run:
        run.started_at = t
        return run

    one, again, two = at(seeded(1, "run-1"), 1), at(seeded(1, "run-1b"), 5), at(seeded(2, "run-2"), 2)
    said = A.seed_reuse_sentence(two, [one])
    assert said == ("⚠️ 7 of this run's 8 child seeds were `run-1`'s too (child i gets seed + i; it drew with seeds "
                    "1–8): #0–#6 here have the seeds of #1–#7 there, so they are not new draws. A base seed from 9 "
                    "up gives fresh ones."), said
    assert A.seed_reuse_sentence(again, [one, two]) == (  # the same seeds first, however the list is ordered
        "ℹ️ The same child seeds as `run-1`, sample for sample, and all 8 samples came out identical to theirs: the "
        "same seeds gave the same samples.")
    assert A.seed_reuse_sentence(again, [two, one]) == A.seed_reuse_sentence(again, [one, two])
    again.samples[3].token_ids = [9, 9]
    assert A.seed_reuse_sentence(again, [one]).startswith("ℹ️ The same child seeds as `run-1`, sample for sample: 7 "
                                                          "of 8 samples came out identical to theirs;")
    assert A.seed_reuse_sentence(one, [two, again]) == ""  # both started after it
    stopped = at(seeded(1, "run-1s"), 0.5)  # stopped early: each sample a beginning of run-1b's
    for s in stopped.samples:
        s.token_ids, s.finish_reason = s.token_ids[:1], "abort"
    assert A.seed_reuse_sentence(at(seeded(1, "run-1c"), 6), [stopped]).endswith(
        "and all 8 samples came out identical to theirs as far as the stopped samples went: the same seeds gave the "
        "same samples."), "a stopped run's beginnings are no difference"
    alone, before = at(seeded(4, "run-4", n=1), 8), at(seeded(4, "run-4a", n=1), 7)
    assert A.seed_reuse_sentence(alone, [before]).endswith(", and the sample came out identical to theirs: the same "
                                                           "seeds gave the same samples.")  # not "all 1 samples"
    twelve = at(seeded(12, "run-12"), 6)
    assert ", or 2 and below," in A.seed_reuse_sentence(twelve, [at(seeded(10, "run-10"), 3)])
    assert A.seed_reuse_sentence(at(seeded(10, "run-far"), 7), [one, two]) == ""
    other_prompt = at(seeded(2, "run-x"), 8)
    other_prompt.request["prompt"] = "Something else"
    assert A.seed_reuse_sentence(other_prompt, [one]) == ""
    same_seed = at(seeded(3, "run-s", mode="same-seed"), 9)  # eight samples of seed 3, on purpose
    assert A.seed_reuse_sentence(same_seed, [one]) == "" and A.seed_reuse_sentence(at(seeded(3, "run-3"), 10),
                                                                                   [same_seed]) == ""
    alone = at(seeded(None, "run-alone", seeds=[5]), 11)  # the Reproducibility tab's rerun of sample 4 alone
    alone.request["rerun"] = {"of": "run-1", "sample": 4}
    assert A.seed_reuse_sentence(alone, [one]) == "" and A.seed_reuse_sentence(at(seeded(5, "run-5"), 12),
                                                                               [alone]) == ""
    replay = at(seeded(1, "run-r"), 13)
    replay.request["replay"] = {"of": "run-1", "pace": "x1"}
    assert A.seed_reuse_sentence(replay, [one]) == ""  # one sampling shown twice


def test_a_same_seed_run_says_what_it_demonstrates_under_its_summary():
    from playground.ui.views import run_summary

    same = seeded(3, "run-s", mode="same-seed")  # eight samples of seed 3: one draw eight times
    said = run_summary(same)
    assert "every sample seed 3 (same-seed mode)" in said
    assert "ℹ️ Same-seed mode: every child drew with seed 3, so all 8 samples came out identical. This was vLLM's V0 " \
           "bug" in said
    same.samples[0].token_ids = [1]
    assert "so 7 of the 8 samples came out identical" in run_summary(same)
    assert "Same-seed mode" not in run_summary(seeded(3, "run-w"))


def test_a_stopped_replay_is_alike_as_far_as_it_went_and_says_nothing_of_seeds_it_did_not_draw():
    """A replay stopped part way has the tokens of its run as far as it went: Compare counts its
    pairs identical as far as that, names no condition that differed (nothing parted), and no
    view takes its seeds for a new draw that repeated (a replay samples nothing)."""
    a = make_run([[1, 2, 3, 4], [1, 2, 5], [1, 7]], "run-a")
    b = make_run([[1, 2], [1, 2, 5], [1]], "run-b", replay={"of": "run-a", "pace": "x4"})
    b.status, b.started_at = "aborted", a.started_at + 1
    for s in (b.samples[0], b.samples[2]):
        s.finish_reason = "abort"
    pairs = A.pair_frame(a, b)
    assert pairs["verdict"].tolist() == ["identical as far as B went (stopped)", "identical",
                                         "identical as far as B went (stopped)"]
    assert pairs["first_divergence"].isna().all()
    assert A.identical_pairs(pairs) == "3 of 3 samples identical (2 as far as the stopped run went)"
    assert conditions_statement(a, b) is None
    assert A.seed_reuse_sentence(b, [a]) == ""
    b.samples[1].finish_reason = "abort"
    b.samples[1].token_ids = b.samples[1].token_ids[:1]
    assert A.identical_pairs(A.pair_frame(a, b)) == "3 of 3 samples identical as far as the stopped run went"
    b.samples[0].token_ids = [1, 7]  # went another way before it was stopped: that is a parting
    assert A.pair_frame(a, b)["verdict"][0] == "diverged at token 1"


def test_a_replay_apps_runs_are_listed_in_compare_and_a_replay_is_set_beside_the_run_it_plays(tmp_path):
    """The runs an app replays (``--replay``) are in every session's lists, and a replay on screen
    gets the run it plays as A."""
    import gradio as gr

    from playground.ui import compare_tab

    played = make_run([[1, 2, 3]], "run-played")
    other = make_run([[1, 2]], "run-other")
    replay = make_run([[1, 2, 3]], "run-replay", replay={"of": "run-played", "pace": "x4"})
    with gr.Blocks():
        tab = compare_tab.declare(tmp_path, files=[other, played])
    a, b = compare_tab.refresh_lists(tab, [replay], [], None, replay)
    keys = [key for _, key in a["choices"]]
    assert keys == ["history:run-replay", "file:run-other", "file:run-played"]
    assert (a["value"], b["value"]) == ("file:run-played", "history:run-replay")
    said = compare_tab.compare(tab, "file:run-played", "history:run-replay", [replay], [], None)
    assert "1 of 1 samples identical" in said[0]
