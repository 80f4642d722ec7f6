"""The vectorised LETOR parser against its oracle, scikit-learn's svmlight reader, on the same bytes: in one
process, and split across worker processes at any byte (a failing worker named by its lines)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from ranker.data import channels as data
from ranker.data import letor_parser, letor_processes
from sklearn.datasets import load_svmlight_file


def sklearn_rows(path, num_features=None):
    features, labels, qids = load_svmlight_file(str(path), n_features=num_features, dtype=np.float32,
                                                query_id=True, zero_based=False)
    return features.toarray(), labels, qids


def assert_same_rows(path, num_features=None, chunk_bytes=None, monkeypatch=None, threads=2):
    if chunk_bytes is not None:
        monkeypatch.setattr(letor_parser, "CHUNK_BYTES", chunk_bytes)
    parsed = letor_parser.parse(path.read_bytes(), num_features, threads=threads)
    assert parsed is not None, "the parser handed a valid file to scikit-learn"
    features, labels, qids = sklearn_rows(path, num_features)
    assert parsed.features.dtype == np.float32 and parsed.features.shape == features.shape
    np.testing.assert_array_equal(parsed.features, features)
    np.testing.assert_array_equal(parsed.labels, labels)
    if qids.size:
        np.testing.assert_array_equal(parsed.qids, qids)
    else:
        assert parsed.qids is None


def write(tmp_path, text: bytes | str, name="rank.train"):
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


EDGE_CASES = {
    "sparse and dense rows": "2 qid:1 1:0.5 2:0.25 3:1\n0 qid:1 3:0.75\n1 qid:2 1:1 3:2\n",
    "no qid, trailing comment and comment lines": "# header 1:2\n1 1:1 2:3 # doc a 3:9\n0 2:1\n#end\n",
    "blank and whitespace-only lines": "\n1 qid:3 1:1\n   \n\t\n0 qid:3 2:2\n\n",
    "trailing whitespace and tabs": "1 qid:1 1:0.5 \t \n0\tqid:1\t2:0.25  \n",
    "CRLF line ends": "1 qid:1 1:0.5 2:1\r\n0 qid:1 2:0.25\r\n",
    "labels alone and rows without features": "3 qid:1\n2 qid:1 4:1\n1 qid:2\n",
    "every spelling of a number": ("1.5 qid:7 1:1e-05 2:-0.5 3:+2 4:.5 5:5. 6:1E3 7:-0 8:0.9127999999999999 "
                                   "9:0.67090000000000006 10:123456789012345678 11:1_0 12:00012.5000\n"
                                   "-2 qid:7 1:3.4028234663852886e+38 2:1.401298464324817e-45 3:-1.5E-7\n"),
    "long mantissas rounding to float32 and float64 boundaries": (
        "0 qid:1 1:16777217 2:16777219 3:0.1000000000000000055511151231257827 4:9007199254740993 "
        "5:1.00000005960464477539062 6:3.4028234e38\n"),
    "large qids and indices": "1 qid:123456789012 7:1 300:2\n0 qid:123456789012 299:4\n",
}


@pytest.mark.parametrize("text", EDGE_CASES.values(), ids=EDGE_CASES.keys())
def test_rows_match_scikit_learn(tmp_path, text):
    assert_same_rows(write(tmp_path, text))


def test_rows_match_scikit_learn_with_a_wider_num_features(tmp_path):
    assert_same_rows(write(tmp_path, "1 qid:1 1:0.5 3:1\n0 qid:1 2:2\n"), num_features=9)


def test_random_files_cut_into_many_chunks_match_scikit_learn(tmp_path, monkeypatch):
    # Given rows of every shape: sparse, dense, comments, CRLF, several number spellings, non-adjacent qids
    rng = np.random.default_rng(7)
    lines = []
    for _ in range(400):
        indices = np.sort(rng.choice(np.arange(1, 40), size=rng.integers(0, 12), replace=False))
        values = rng.choice([f"{rng.random():.4f}", f"{rng.normal():.17g}", f"{rng.random() * 1e-6:g}",
                             str(int(rng.integers(0, 1000))), f"{-rng.random():.3f}"], size=len(indices))
        pairs = " ".join(f"{index}:{value}" for index, value in zip(indices, values))
        comment = " # docid = x1:2" if rng.random() < 0.2 else ""
        end = "\r\n" if rng.random() < 0.1 else "\n"
        lines.append(f"{rng.integers(0, 5)} qid:{rng.integers(1, 30)} {pairs}{comment}{end}")
        if rng.random() < 0.05:
            lines.append("\n" if rng.random() < 0.5 else "# a comment line\n")
    path = write(tmp_path, "".join(lines))
    # When it is parsed in chunks of a few lines on several threads, Then the rows are scikit-learn's
    assert_same_rows(path, chunk_bytes=200, monkeypatch=monkeypatch, threads=3)


def test_the_letor_sample_matches_scikit_learn(letor_sample_dir, monkeypatch):
    for path in sorted(letor_sample_dir.iterdir()):
        if data.is_letor_file(path):
            assert_same_rows(path, chunk_bytes=50_000, monkeypatch=monkeypatch)


INVALID_FOR_SCIKIT_LEARN = {
    "value missing": "1 qid:1 1:0.5\n0 qid:1 2:\n",
    "index missing": "1 qid:1 :0.5\n",
    "label with a colon": "1:2 3:4\n",
    "token without a colon": "1 qid:1 1:0.5 7\n",
    "two colons": "1 qid:1 1:2:3\n",
    "unsorted indices": "1 qid:1 2:1 1:1\n",
    "repeated index": "1 qid:1 2:1 2:1\n",
    "index 0 (indices are 1-based)": "1 qid:1 0:1\n",
    "qid after a feature": "1 1:1 qid:2\n",
    "not a number": "1 qid:1 1:abc\n",
    "hexadecimal": "1 qid:1 1:0x10\n",
    "fractional index": "1 qid:1 1.0:3\n",
    "fractional qid": "1 qid:1.5 1:3\n",
}


@pytest.mark.parametrize("text", INVALID_FOR_SCIKIT_LEARN.values(), ids=INVALID_FOR_SCIKIT_LEARN.keys())
def test_what_scikit_learn_refuses_the_parser_hands_back(tmp_path, text):
    # Given a row scikit-learn's reader refuses
    path = write(tmp_path, text)
    with pytest.raises(ValueError):
        sklearn_rows(path)
    # Then the parser does not vouch for it, and the reader's error is the scikit-learn path's, naming the line
    assert letor_parser.parse(path.read_bytes()) is None
    with pytest.raises(ValueError, match=r"rank\.train:\d+: not a LETOR row") as raised:
        data.read_letor_file(path)
    assert isinstance(raised.value.__cause__, ValueError)


@pytest.mark.parametrize("text", ["1 qid:1 1:nan\n", "1 qid:1 1:inf\n", "nan qid:1 1:1\n", "1 qid:1 1:1\0\n",
                                  "1 qid:1 1:1\n0 2:1\n", "1 qid:1 1:3.5e38\n"])
def test_what_it_cannot_vouch_for_goes_to_scikit_learn(tmp_path, text):
    # NaN and infinities (also a value beyond float32's range: the caller names their line), NUL bytes, and rows
    # mixing qid and no qid
    assert letor_parser.parse(write(tmp_path, text).read_bytes()) is None


def test_num_features_below_the_data_width_is_left_to_scikit_learn(tmp_path):
    path = write(tmp_path, "1 qid:1 5:1\n")
    assert letor_parser.parse(path.read_bytes(), num_features=3) is None
    with pytest.raises(ValueError, match=r"n_features was set to 3"):
        data.read_letor_file(path, num_features=3)


def test_rows_mixing_qid_and_no_qid_are_an_error_naming_the_fix(tmp_path):
    path = write(tmp_path, "1 qid:1 1:1\n0 2:1\n")
    with pytest.raises(ValueError, match=r"1 of 2 rows have a qid: column; give every row one"):
        data.read_letor_file(path)


def test_rows_already_grouped_by_qid_keep_their_order(tmp_path):
    # Given rows in query order (as LETOR files are written), Then each run of a qid is one query, in file order
    loaded = data.read_letor_file(write(tmp_path, "1 qid:9 1:1\n0 qid:9 1:2\n2 qid:4 1:3\n"))
    np.testing.assert_array_equal(loaded.query_offsets, [0, 2, 3])
    np.testing.assert_array_equal(loaded.labels, [1, 0, 2])


def test_a_value_beyond_float32_is_an_error_naming_its_line(tmp_path):
    path = write(tmp_path, "1 qid:1 1:1\n\n0 qid:1 2:3.5e38\n")
    with pytest.raises(ValueError, match=r"rank\.train:3: NaN or infinite value"):
        data.read_letor_file(path)


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "   \n# note\n"])
def test_a_file_without_rows_is_an_error_naming_the_file(tmp_path, text):
    with pytest.raises(ValueError, match=r"rank\.train: no rows; the channel file is empty"):
        data.read_letor_file(write(tmp_path, text))


def test_a_last_row_without_its_newline_is_taken_as_cut_short(tmp_path):
    # Given a file whose last row stops inside a number (it still parses: `0.66` of `0.6627`)
    path = write(tmp_path, "1 qid:1 1:0.5\n0 qid:1 2:0.66")
    # Then the parser reads it like scikit-learn, and the reader refuses it naming the last line
    assert_same_rows(path)
    with pytest.raises(ValueError, match=r"rank\.train:2: the last row has no newline"):
        data.read_letor_file(path)


def random_letor(rng: np.random.Generator, rows: int) -> str:
    lines = []
    for _ in range(rows):
        indices = np.sort(rng.choice(np.arange(1, 30), size=rng.integers(0, 9), replace=False))
        pairs = " ".join(f"{index}:{rng.choice([f'{rng.random():.4f}', f'{rng.normal():.17g}', '1e-05'])}"
                         for index in indices)
        comment = " # doc 3:1" if rng.random() < 0.2 else ""
        lines.append(f"{rng.integers(0, 5)} qid:{rng.integers(1, 20)} {pairs}{comment}\n")
        if rng.random() < 0.05:
            lines.append("\n" if rng.random() < 0.5 else "# a comment line\n")
    return "".join(lines)


@pytest.fixture
def tiny_ranges(monkeypatch):
    """Every file goes to workers, and each worker parses its range in chunks of a few lines."""
    monkeypatch.setattr(letor_processes, "MIN_BYTES_PER_PROCESS", 1)
    monkeypatch.setattr(letor_parser, "CHUNK_BYTES", 300)


@pytest.mark.slow  # starts worker processes
@pytest.mark.parametrize("processes", [2, 3, 7])
def test_rows_split_across_workers_match_scikit_learn(tmp_path, tiny_ranges, processes):
    # Given sparse and dense rows, comments and blank lines, cut into ranges wherever the byte counts fall
    path = write(tmp_path, random_letor(np.random.default_rng(processes), 300))
    parsed = letor_processes.parse_file(path, processes=processes)
    features, labels, qids = sklearn_rows(path)
    assert parsed is not None
    np.testing.assert_array_equal(parsed.features, features)
    np.testing.assert_array_equal(parsed.labels, labels)
    np.testing.assert_array_equal(parsed.qids, qids)


def test_ranges_start_at_line_starts_and_cover_the_text():
    text = b"1 qid:1 1:0.5\n" + b"0 qid:1 2:0.25 3:1\n" * 3 + b"\n" + b"2 qid:2 1:1\n"
    ranges = letor_processes.line_ranges(text, 5)
    assert ranges[0][0] == 0 and ranges[-1][1] == len(text)
    assert all(end == next_start for (_, end), (next_start, _) in zip(ranges, ranges[1:]))
    assert all(start == 0 or text[start - 1:start] == b"\n" for start, _ in ranges)


@pytest.mark.slow
def test_more_workers_than_lines_leave_some_ranges_empty(tmp_path, tiny_ranges):
    path = write(tmp_path, "1 qid:1 1:0.5\n0 qid:1 2:0.25\n")
    parsed = letor_processes.parse_file(path, processes=6)
    np.testing.assert_array_equal(parsed.features, sklearn_rows(path)[0])


@pytest.mark.slow
def test_the_forkserver_start_gives_the_same_rows(tmp_path, tiny_ranges, monkeypatch):
    # What a rank that has initialised CUDA uses: workers in fresh processes, nothing inherited
    monkeypatch.setattr(letor_processes, "_start_method", lambda: "forkserver")
    path = write(tmp_path, random_letor(np.random.default_rng(1), 200))
    parsed = letor_processes.parse_file(path, processes=2)
    np.testing.assert_array_equal(parsed.features, sklearn_rows(path)[0])


@pytest.mark.slow
def test_a_bad_row_in_a_later_range_is_an_error_naming_its_line(tmp_path, tiny_ranges):
    # Given a file whose 250th line (in the third of four ranges) is not a LETOR row
    lines = random_letor(np.random.default_rng(3), 400).splitlines(keepends=True)
    lines[249] = "1 qid:1 1:0.5 2:oops\n"
    path = write(tmp_path, "".join(lines))
    assert letor_processes.parse_file(path, processes=4) is None  # handed to scikit-learn, which names the line
    with pytest.raises(ValueError, match=r"rank\.train:250: not a LETOR row"):
        data.read_letor_file(path)


def failing_chunk(original, marker: bytes, action):
    def parse_chunk(chunk):
        if marker in bytes(chunk):
            action()
        return original(chunk)
    return parse_chunk


@pytest.mark.slow
def test_a_worker_raising_names_the_lines_of_its_range(tmp_path, tiny_ranges, monkeypatch):
    def raise_error():
        raise MemoryError("no room")

    monkeypatch.setattr(letor_parser, "_parse_chunk", failing_chunk(letor_parser._parse_chunk, b"9:7", raise_error))
    path = write(tmp_path, "1 qid:1 1:0.5\n" * 50 + "0 qid:2 9:7\n" + "1 qid:3 1:1\n" * 49)
    text = path.read_bytes()
    second_start = letor_processes.line_ranges(text, 2)[1][0]
    first_line = text[:second_start].count(b"\n") + 1
    assert first_line <= 51  # the bad line is in the second range
    with pytest.raises(letor_processes.WorkerFailed,
                       match=rf"rank\.train: lines {first_line}-101: the parser worker failed: MemoryError: no room"):
        letor_processes.parse_file(path, processes=2)


@pytest.mark.slow
def test_a_worker_dying_is_an_error_naming_the_file(tmp_path, tiny_ranges, monkeypatch):
    monkeypatch.setattr(letor_parser, "_parse_chunk",
                        failing_chunk(letor_parser._parse_chunk, b"9:7", lambda: os._exit(3)))
    path = write(tmp_path, "1 qid:1 1:0.5\n" * 50 + "0 qid:2 9:7\n" + "1 qid:3 1:1\n" * 49)
    with pytest.raises(letor_processes.WorkerFailed,
                       match=r"rank\.train: parser worker letor-parser-1 exited \(3\) before reporting"):
        letor_processes.parse_file(path, processes=2)
