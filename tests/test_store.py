"""The run store on real SQLite files: what it keeps and for whom, its limits, the files it refuses,
and the failures it survives: a writer killed mid-write (SIGKILL), eight writers at once, a full
database (SQLite's max_page_count, which makes SQLite itself answer SQLITE_FULL)."""

from __future__ import annotations

import hashlib
import json
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import zlib
from pathlib import Path

import pytest

from playground.store import RunStore, StoreError, StoreFull, StoreLimits, StoreRefused, default_path

ROOT = Path(__file__).resolve().parents[1]

# A writer in a process of its own: saves runs whose bundle follows from their request id (so a
# reader can tell a whole one from a torn one), and prints each request id once it is committed.
# With a fifth argument k, its k-th save stops inside its transaction, once its row is inserted
# and before it commits (SQLite's progress handler), says "mid-write" and waits there to be killed.
WRITER = """
import hashlib, json, sys
from playground.store import RunStore
path, name, count, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
stop_at = int(sys.argv[5]) if len(sys.argv) > 5 else None

def bundle(request_id):
    payload = "".join(hashlib.sha256(f"{request_id}/{k}".encode()).hexdigest() for k in range(size // 64 + 1))
    return json.dumps({"request_id": request_id, "payload": payload[:size]})

def halt():
    if store._db.in_transaction and store._db.total_changes > inserted:
        print("mid-write", flush=True)
        sys.stdin.readline()  # until killed
    return 0

with RunStore(path) as store:
    for i in range(count):
        if i == stop_at:
            inserted = store._db.total_changes
            store._db.set_progress_handler(halt, 1)
        request_id = f"{name}-{i}"
        store.save(name, request_id, f"prompt {i} of {name}", "finished", 1, bundle(request_id))
        print(request_id, flush=True)
"""


def bundle(request_id: str, size: int) -> str:
    """What WRITER saves for ``request_id``: hex digits that compress to about half."""
    payload = "".join(hashlib.sha256(f"{request_id}/{k}".encode()).hexdigest() for k in range(size // 64 + 1))
    return json.dumps({"request_id": request_id, "payload": payload[:size]})


def writer(path: Path, name: str, count: int, size: int, *stop_at: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path), name, str(count), str(size), *map(str, stop_at)],
                            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def every_run_whole(path: Path) -> dict[str, int]:
    """Each stored run's request id -> its bundle's size, once each bundle is checked against what
    its writer made of that id."""
    found = {}
    with RunStore(path) as store:
        owners = {row[0] for row in store._db.execute("SELECT DISTINCT owner FROM runs")}
        for owner in owners:
            for entry in store.entries(owner, limit=10_000):
                text = store.load(entry.key)
                size = len(json.loads(text)["payload"])
                assert text == bundle(entry.request_id, size), f"{entry.request_id} is not whole"
                found[entry.request_id] = size
    return found


def test_a_run_is_kept_for_its_owner_found_by_its_prompt_and_opened_by_its_key(tmp_path):
    path = tmp_path / "runs.sqlite3"
    with RunStore(path) as store:
        first = store.save("alice", "run-1", "Once upon a time", "finished", 4, '{"a": 1}')
        store.save("alice", "run-2", "What is 17 * 23?", "aborted", 2, '{"a": 2}')
        store.save("bob", "run-3", "Once more", "error", 1, '{"b": 3}')
        again = store.save("alice", "run-1", "Once upon a time", "finished", 4, '{"a": 1}')
        assert first.new and not again.new and again.key == first.key, "a run is kept once per owner"
        assert [e.request_id for e in store.entries("alice")] == ["run-2", "run-1"], "newest first"
        assert [e.request_id for e in store.entries("alice", "ONCE")] == ["run-1"]
        store.save("alice", "run-4", "Где находится Café Straße？", "finished", 1, '{"a": 4}')
        for search in ("где", "CAFÉ", "cafe\u0301", "STRASSE", "straße?"):  # any case and form, in any script
            assert [e.request_id for e in store.entries("alice", search)] == ["run-4"], search
        store.delete("alice", store.key_of("alice", "run-4"))
        assert [e.request_id for e in store.entries("bob")] == ["run-3"] and store.entries("carol") == []
        assert store.load(first.key) == '{"a": 1}' and store.load("no-such-key") is None
        keys = {first.key, store.key_of("alice", "run-2"), store.key_of("bob", "run-3")}
        assert len(first.key) >= 22 and len(keys) == 3
        assert not store.delete("bob", first.key), "only its owner deletes a run"
        removed = store.delete("alice", first.key)
        assert removed and store.load(first.key) is None
        store.restore(removed)  # Undo: the same key (its links work again), the same place in the list
        assert store.load(first.key) == '{"a": 1}'
        assert [e.request_id for e in store.entries("alice")] == ["run-2", "run-1"]
        assert store.delete("alice", first.key)
    with RunStore(path) as store:  # a restart: everything as it was
        assert [e.request_id for e in store.entries("alice")] == ["run-2"]
        assert store.totals()[0] == 2


def test_a_store_of_version_1_opens_and_its_runs_list_with_no_origin_beside_new_ones_with_theirs(tmp_path):
    """Version 2 adds each run's origin (a replay, a branch) for the list, version 3 its settings; a
    store a playground of version 1 made keeps its runs, which say none."""
    path = tmp_path / "runs.sqlite3"
    old = sqlite3.connect(path)
    old.executescript(f"""
        PRAGMA application_id = {0x76706C67}; PRAGMA user_version = 1; PRAGMA journal_mode = WAL;
        CREATE TABLE runs (key TEXT PRIMARY KEY, owner TEXT NOT NULL, request_id TEXT NOT NULL,
            saved_at REAL NOT NULL, prompt TEXT NOT NULL, status TEXT NOT NULL, n INTEGER NOT NULL,
            bytes INTEGER NOT NULL, bundle BLOB NOT NULL, UNIQUE (owner, request_id));
        CREATE INDEX runs_by_owner ON runs (owner, saved_at);""")
    old.execute("INSERT INTO runs VALUES ('k1', 'me', 'run-old', 1.0, 'p', 'finished', 2, 10, ?)",
                (zlib.compress(b'{"old": 1}'),))
    old.commit()
    old.close()
    with RunStore(path) as store:
        store.save("me", "run-new", "p", "finished", 2, "{}", origin="⟲ replay of run-old at x4",
                   settings="native · DELTA · seed 3")
        assert [(e.request_id, e.origin, e.settings) for e in store.entries("me")] == [
            ("run-new", "⟲ replay of run-old at x4", "native · DELTA · seed 3"), ("run-old", "", "")]
        assert store.load("k1") == '{"old": 1}'
    with RunStore(path) as store:  # opened again: version 3 now
        assert store._db.execute("PRAGMA user_version").fetchone()[0] == 3 and len(store.entries("me")) == 2


def test_the_oldest_runs_go_when_the_store_passes_its_limits(tmp_path):
    with RunStore(tmp_path / "runs.sqlite3", StoreLimits(max_runs=3, max_bytes=10**6)) as store:
        saved = [store.save("me", f"run-{i}", "p", "finished", 1, f'{{"i": {i}}}') for i in range(5)]
        assert [s.pruned for s in saved] == [0, 0, 0, 1, 1]
        assert [e.request_id for e in store.entries("me")] == ["run-4", "run-3", "run-2"]
    with RunStore(tmp_path / "bytes.sqlite3", StoreLimits(max_runs=100, max_bytes=100_000)) as store:
        big = [store.save("me", f"run-{i}", "p", "finished", 1, bundle(f"run-{i}", 80_000)) for i in range(4)]
        assert [s.pruned for s in big] == [0, 0, 1, 1] and store.totals()[1] <= 100_000
        assert [e.request_id for e in store.entries("me")] == ["run-3", "run-2"]
        with pytest.raises(StoreError, match="more than the 0.0953674 MB the run store may hold: it was not saved"):
            store.save("me", "run-huge", "p", "finished", 1, bundle("run-huge", 400_000))


def test_a_run_another_browser_keeps_is_not_written_again_so_viewers_of_its_link_prune_nothing(tmp_path):
    """A run opened by its link is its owner's: each viewer's page shows it, none writes a copy,
    so five viewers of a full store's link push out neither the link's run nor anyone's."""
    from playground.ui.keeping import save_run
    from tests.test_report import make_run

    run = make_run([[1, 2]], "run-shared")
    with RunStore(tmp_path / "runs.sqlite3", StoreLimits(max_runs=2, max_bytes=10**6)) as store:
        store.save("other", "run-other", "p", "finished", 1, "{}")
        assert save_run(store, "owner", run) is not None and store.holds("run-shared")
        assert [save_run(store, f"viewer-{i}", run) for i in range(5)] == [None] * 5
        assert store.totals()[0] == 2 and store.key_of("owner", "run-shared") is not None
        assert [e.request_id for e in store.entries("other")] == ["run-other"]


def test_the_default_file_is_in_the_users_data_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_path() == tmp_path / "vllm-playground" / "runs.sqlite3"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert default_path() == Path.home() / ".local" / "share" / "vllm-playground" / "runs.sqlite3"


def damaged_store(path: Path) -> Path:
    with RunStore(path) as store:
        for i in range(40):
            store.save("me", f"run-{i}", "p", "finished", 1, bundle(f"run-{i}", 3000))
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2: len(raw) // 2 + 4096] = b"\xff" * 4096  # a page in the middle overwritten
    path.write_bytes(bytes(raw))
    return path


def test_a_store_path_under_a_file_is_refused_naming_the_file(tmp_path):
    weights = tmp_path / "weights.bin"
    weights.write_bytes(b"\0" * 16)
    with pytest.raises(StoreRefused, match=re.escape(f"{weights} is a file, not a folder to keep runs.sqlite3 in")):
        RunStore(weights / "sub" / "runs.sqlite3")
    assert weights.read_bytes() == b"\0" * 16


@pytest.mark.parametrize("make, message", [
    (lambda p: p.write_text("these are my notes\n" * 100), "is not a run store: it is not a SQLite database"),
    (lambda p: sqlite3.connect(p).executescript("CREATE TABLE photos (id, data);"),
     "is a SQLite database of another program (tables: photos)"),
    (lambda p: sqlite3.connect(p).executescript(f"PRAGMA application_id = {0x76706C67}; PRAGMA user_version = 9;"),
     "was made by a newer playground (store version 9"),
    (damaged_store, "is damaged"),
    (lambda p: p.mkdir(), "is a folder, not a run store file"),
])
def test_a_file_that_is_not_a_run_store_is_refused_by_name_and_left_as_it_was(tmp_path, make, message):
    path = tmp_path / "runs.sqlite3"
    make(path)
    before = path.read_bytes() if path.is_file() else None
    with pytest.raises(StoreRefused, match=re.escape(message)) as refused:
        RunStore(path)
    assert str(path) in str(refused.value)
    assert (path.read_bytes() if path.is_file() else None) == before


def test_a_store_that_cannot_be_written_is_refused_at_open_and_a_device_is_never_opened(tmp_path):
    """SQLite opens a file it may not write for reading without a word: the store writes once as it
    opens, so the app refuses it at start, not at its first run's save. (As root only the immutable
    flag makes a file read-only, hence chattr.)"""
    import shutil
    import subprocess

    path = tmp_path / "runs.sqlite3"
    RunStore(path).close()
    if not shutil.which("chattr") or subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
        pytest.skip("this filesystem has no immutable flag")
    try:
        with pytest.raises(StoreRefused, match=re.escape(f"{path} cannot be written (attempt to write a readonly "
                                                         "database): the file, or its folder, is read-only")):
            RunStore(path)
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)
    with pytest.raises(StoreRefused, match="^/dev/null is not a regular file, so it cannot be a run store$"):
        RunStore(Path("/dev/null"))
    assert not Path("/dev/null-journal").exists() and not Path("/dev/null-wal").exists()


def test_a_writer_killed_mid_write_leaves_every_committed_run_whole(tmp_path):
    path = tmp_path / "runs.sqlite3"
    RunStore(path).close()
    process = writer(path, "killed", 10, 2**20, 3)  # its 4th save of a megabyte stops inside its transaction
    lines = []
    try:
        while not lines or lines[-1] != "mid-write":
            line = process.stdout.readline()
            assert line, process.stderr.read()
            lines.append(line.strip())
        process.send_signal(signal.SIGKILL)
        process.wait()
    finally:
        process.kill()
    assert process.returncode == -signal.SIGKILL
    committed = lines[:-1]
    assert committed == ["killed-0", "killed-1", "killed-2"]
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert set(every_run_whole(path)) == set(committed), "the run being written is absent, the others whole"
    with RunStore(path) as store:  # and the store goes on
        assert store.save("after", "run-after", "p", "finished", 1, "{}").new


def test_eight_writers_at_once_all_find_their_runs(tmp_path):
    path = tmp_path / "runs.sqlite3"  # made by whichever writer comes first
    processes = [writer(path, f"client{k}", 4, 20_000) for k in range(8)]
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        assert len(out.split()) == 4
    found = every_run_whole(path)
    assert sorted(found) == sorted(f"client{k}-{i}" for k in range(8) for i in range(4))
    with RunStore(path) as store:
        assert all(store.count(f"client{k}") == 4 for k in range(8))


def test_eight_connections_making_one_new_store_at_once_all_open_it(tmp_path):
    """The first open of a new file races the others: each must read the file as it was before or
    after the store was made, never half-way (its tables made but not yet marked as ours). Threads
    meet at a barrier so the opens overlap; rounds, as the overlap is a matter of luck."""
    refusals = []
    for round_ in range(20):
        path = tmp_path / f"runs-{round_}.sqlite3"
        barrier = threading.Barrier(8)

        def open_it(path=path, barrier=barrier):
            barrier.wait()
            try:
                with RunStore(path):
                    pass
            except StoreError as e:
                refusals.append(str(e))

        threads = [threading.Thread(target=open_it) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert refusals == []


def test_a_full_database_refuses_the_run_with_a_sentence_and_keeps_the_others(tmp_path):
    path = tmp_path / "runs.sqlite3"
    with RunStore(path) as store:
        kept = store.save("me", "run-1", "p", "finished", 1, bundle("run-1", 1000))
        pages = store._db.execute("PRAGMA page_count").fetchone()[0]
        store._db.execute(f"PRAGMA max_page_count = {pages + 2}")  # SQLite answers SQLITE_FULL past it
        with pytest.raises(StoreFull, match=f"the run store is full \\({path}: database or disk is full\\): this run "
                                            "was not saved"):
            store.save("me", "run-2", "p", "finished", 1, bundle("run-2", 200_000))
        assert [e.request_id for e in store.entries("me")] == ["run-1"] and store.load(kept.key)
        store._db.execute("PRAGMA max_page_count = 1073741823")  # space again: saving works again
        assert store.save("me", "run-2", "p", "finished", 1, bundle("run-2", 200_000)).new


def test_the_saved_runs_list_says_a_replay_and_a_branch_as_the_sessions_history_does(tmp_path):
    from playground.backends.synthetic import synthetic_run
    from playground.ui.keeping import save_run
    from playground.ui.saved_runs import label
    from playground.ui.views import history_label

    replay, branch = synthetic_run(2, 3, seed=1), synthetic_run(2, 3, seed=2)
    replay.request.update(request_id="run-r", replay={"of": "run-1234", "pace": "x4"})
    branch.request.update(request_id="run-b", branch={"run": "run-1234", "sample": 1, "position": 3,
                                                     "forced_token_id": 9, "forced_text": " sea"})
    with RunStore(tmp_path / "runs.sqlite3") as store:
        for run in (replay, branch):
            save_run(store, "me", run)
        listed = {e.request_id: label(e) for e in store.entries("me")}
    assert "⟲ replay of run-1234 at x4" in listed["run-r"] and "⟲ replay of run-1234 at x4" in history_label(replay)
    assert "⎇ of run-1234 #1@3 forced ' sea'" in listed["run-b"] and "⎇ of run-1234 #1@3" in history_label(branch)


def test_several_runs_saved_at_once_are_reported_once_with_every_run_pruned_for_them(tmp_path):
    """What if saves its branches as one save: the page hears of it once, and hears of every older run
    removed to make room for any of them, not only for the last."""
    from playground.backends.synthetic import synthetic_run
    from playground.ui.keeping import save_runs

    runs = [synthetic_run(2, 3, seed=k) for k in range(4)]
    for k, run in enumerate(runs):
        run.request.update(request_id=f"run-{k}")
    with RunStore(tmp_path / "runs.sqlite3", StoreLimits(max_runs=2, max_bytes=10**6)) as store:
        assert save_runs(store, "me", runs[:2]).pruned == 0
        kept = save_runs(store, "me", runs[2:])
        assert kept.pruned == 2 and kept.key == store.key_of("me", "run-3")
        assert save_runs(store, "me", runs[2:]) is None  # each was kept before: nothing new to say
        assert [e.request_id for e in store.entries("me")] == ["run-3", "run-2"]


def test_a_run_kept_a_moment_ago_is_named_at_load_and_an_older_one_is_not():
    """A reload mid-run, or a tab closed by mistake: the page's next load says where the run went."""
    from playground.store import Entry
    from playground.ui.saved_runs import RECENT_S, recent_note

    entry = Entry("key", "run-1234abcd", 1000.0, "p", "aborted", 4, 10)
    said = recent_note(entry, 1000.0 + 42)
    assert said.startswith("Your last run, `run-1234abcd` (stopped 42 s ago), is kept") and "Open saved run" in said
    assert "(stopped 3 min ago)" in recent_note(entry, 1000.0 + 200)
    assert "(stopped a moment ago)" in recent_note(entry, 1000.0 + 1)  # a reload: not "0 s ago"
    for later in (1000.0 + RECENT_S + 1, 1000.0 - 5):  # an old run, or a clock that went back: nothing said
        assert not isinstance(recent_note(entry, later), str)
