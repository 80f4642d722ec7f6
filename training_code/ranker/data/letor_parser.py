"""LETOR/SVMlight text to arrays with numpy, a chunk of whole lines at a time.

It reads what scikit-learn's `load_svmlight_file(..., query_id=True, zero_based=False)` reads and gives the same
numbers: values are parsed to float64 exactly as Python's `float` does (correctly rounded), then rounded to float32.
Most tokens (`0.8506`, `12`, `-3.5`: at most 2**53 as digits, at most 22 after the point) are parsed by whole-array
arithmetic; any other spelling (`1e-05`, `nan`, `1_0`, 17 significant digits) goes through `float` one token at a
time. Whatever it cannot vouch for as scikit-learn would read it (a malformed row, an unsorted index, a NUL byte,
NaN, a file mixing rows with and without `qid:`) makes `parse` return None, so the caller reads the file with
scikit-learn and reports scikit-learn's error: the two readers cannot disagree about what is valid.

Every step is a numpy call on a whole chunk. `parse` runs chunks on threads, which suits small files; the calls are
many and short, so the interpreter lock between them keeps threads to about one core, and ranker.data.letor_processes
runs `parse_lines` and `fill` in worker processes for large files instead.
"""

from __future__ import annotations

import mmap
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

# bytes.split() (the svmlight reader's tokeniser) splits on these besides the space and the newline.
_OTHER_WHITESPACE = b"\t\r\x0b\x0c"
_TO_SPACES = bytes.maketrans(_OTHER_WHITESPACE, b" " * len(_OTHER_WHITESPACE))
_COMMENT = re.compile(rb"#[^\n]*")
_COLON, _NEWLINE, _POINT, _MINUS, _PLUS = (ord(character) for character in ":\n.-+")

# Digits that int64 holds exactly, and the powers of ten that float64 holds exactly (10**22 is the last).
_MAX_DIGITS = 18
_EXACT_SCALES = 10.0 ** np.arange(23)
# Masks keeping the last n bytes (the most significant, little-endian) of a 64-bit word, n = 0..8.
_KEEP_LAST_BYTES = np.array([((1 << (8 * n)) - 1) << (8 * (8 - n)) for n in range(9)], np.uint64)
_EXACT_MANTISSA = 2**53
# Chunks of about this many bytes: big enough that numpy's per-call cost vanishes, small enough that each thread's
# temporaries (about 20 bytes per text byte) stay modest and there are chunks to share out.
CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class ParsedRows:
    """Rows in file order: dense float32 features (1-based index `i` is column `i - 1`), float64 labels, and the
    int64 `qid` of each row (None when no row has a `qid:` column)."""

    features: np.ndarray
    labels: np.ndarray
    qids: np.ndarray | None


@dataclass(frozen=True)
class ChunkRows:
    labels: np.ndarray
    qids: np.ndarray | None
    pairs_per_row: np.ndarray
    indices: np.ndarray
    values: np.ndarray


def parse(text: bytes | mmap.mmap, num_features: int | None = None, threads: int | None = None
          ) -> ParsedRows | None:
    """The rows of a whole LETOR file's bytes (or its memory map), or None where scikit-learn's reader must decide
    (see the module doc). `num_features` widens the rows like scikit-learn's `n_features`."""
    threads = threads or available_cores()
    parts = parse_lines(text, 0, len(text), threads)
    if parts is None:
        return None
    shape = RowsShape.of([RowsShape.of_parts(parts)], num_features)
    if shape is None:
        return None
    rows = ParsedRows(np.zeros((shape.rows, shape.columns), np.float32), np.empty(shape.rows),
                      np.empty(shape.rows, np.int64) if shape.with_qid else None)
    fill(parts, rows, threads)
    return rows


@dataclass(frozen=True)
class RowsShape:
    """What the output arrays need from parsed lines before they are written: rows, columns, whether qids."""

    rows: int
    columns: int  # the largest feature index (0 when no feature)
    with_qid: bool | None  # None when there are no rows

    @staticmethod
    def of_parts(parts: list[ChunkRows]) -> RowsShape | None:
        """The parts' shape, or None when they mix rows with and without qid (scikit-learn's query ids would then
        not line up with its rows, so it must decide)."""
        with_qid = {part.qids is not None for part in parts if len(part.labels)}
        if len(with_qid) > 1:
            return None
        return RowsShape(sum(len(part.labels) for part in parts),
                         max((int(part.indices.max()) for part in parts if len(part.indices)), default=0),
                         with_qid.pop() if with_qid else None)

    @staticmethod
    def of(pieces: list[RowsShape | None], num_features: int | None) -> RowsShape | None:
        """Consecutive pieces of one file as one: scikit-learn's width (the largest index, 1 column when no row has
        a feature, or `num_features` when not narrower); None where scikit-learn must decide."""
        if any(piece is None for piece in pieces):
            return None
        with_qid = {piece.with_qid for piece in pieces if piece.with_qid is not None}
        if len(with_qid) > 1:
            return None
        columns = max(max((piece.columns for piece in pieces), default=0), 1)
        if num_features is not None:
            if num_features < columns:
                return None
            columns = num_features
        return RowsShape(sum(piece.rows for piece in pieces), columns, with_qid == {True})


def parse_lines(text: bytes | mmap.mmap, start: int, end: int, threads: int = 1) -> list[ChunkRows] | None:
    """The lines of text[start:end] (`start` at a line's start) as parsed chunks, on `threads` threads; None where
    scikit-learn must decide."""
    chunks = _chunks(text, CHUNK_BYTES, start, end)
    if threads > 1 and len(chunks) > 1:
        with ThreadPoolExecutor(min(threads, len(chunks)), thread_name_prefix="letor-parser") as pool:
            parts = list(pool.map(_parse_chunk, chunks))
    else:
        parts = [_parse_chunk(chunk) for chunk in chunks]
    return None if any(part is None for part in parts) else parts


def available_cores() -> int:
    """The cores this process may run on (a container's or torchrun's CPU set, not the whole host)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _chunks(text: bytes | mmap.mmap, size: int, start: int, total: int) -> list[memoryview]:
    """Slices of text[start:total] of about `size` bytes ending at a newline; the last one gets a newline if the
    text lacks it."""
    chunks, view = [], memoryview(text)
    while start < total:
        end = text.find(b"\n", min(start + size, total) - 1, total) + 1 or total
        chunks.append(view[start:end])
        start = end
    if chunks and chunks[-1][-1:] != b"\n":
        chunks[-1] = memoryview(bytes(chunks[-1]) + b"\n")
    return chunks


def _parse_chunk(chunk: memoryview) -> ChunkRows | None:
    """Whole lines ending with a newline, as rows; None where scikit-learn must decide."""
    text = _plain_text(chunk)
    if text is None:
        return None
    codes = np.frombuffer(text, np.uint8)
    separator = (codes <= ord(" ")) | (codes == _COLON)
    # Tokens are runs of non-separator bytes (the chunk ends with a newline, so every token ends inside it).
    edges = np.flatnonzero(separator[1:] != separator[:-1]) + 1
    if separator[0]:
        starts, ends = edges[0::2], edges[1::2]
    else:
        starts, ends = np.concatenate([[0], edges[1::2]]), edges[0::2]
    newlines = np.flatnonzero(codes == _NEWLINE)
    tokens_before_line_end = np.searchsorted(starts, newlines)
    tokens_per_line = np.diff(tokens_before_line_end, prepend=0)
    counts = tokens_per_line[tokens_per_line > 0]
    # A row is `label`, then `index:value` pairs (the first may be `qid:Q`): an odd count, and a token comes right
    # after a colon exactly when it is a value (an even position from 2 on).
    if np.any(counts % 2 == 0):
        return None
    first_token = np.cumsum(counts) - counts
    position = _positions_in_rows(first_token, counts, len(starts))
    is_value = (position > 0) & ((position & 1) == 0)
    after_colon = codes[starts - 1] == _COLON
    if not np.array_equal(after_colon, is_value) or np.count_nonzero(codes == _COLON) != np.count_nonzero(is_value):
        return None
    if separator[starts[is_value] - 2].any():
        return None  # a colon with a space before it: `3 :0.5`

    is_qid_name = _qid_names(codes, starts, ends, position)
    # Rows hold 1 token (a label alone) or at least 3; clipping keeps a last 1-token row's lookup in range.
    row_has_qid = (counts >= 3) & is_qid_name[np.minimum(first_token + 1, len(starts) - 1)]
    numbers = _numbers(text, codes, separator, starts, ends, skip=is_qid_name)
    if numbers is None:
        return None
    values, all_digits = numbers
    qid_position = np.zeros(len(starts), bool)
    qid_position[first_token[row_has_qid] + 2] = True
    is_index = ((position & 1) == 1) & ~is_qid_name
    is_feature_value = is_value & ~qid_position
    if np.any(is_qid_name & (position != 1)) or not np.all(all_digits[is_index]):
        return None  # `qid` not first, or an index scikit-learn's int() reads differently (`+3`, `1_0`) or refuses
    qids = None
    if row_has_qid.any():
        if not row_has_qid.all() or not np.all(all_digits[qid_position]) or np.any(values[qid_position] >= 2**53):
            return None
        qids = values[qid_position].astype(np.int64)
    indices = values[is_index]
    if np.any(indices < 1) or np.any(indices >= 2**31):
        return None
    pairs_per_row = (counts - 1) // 2 - row_has_qid
    row_starts = np.cumsum(pairs_per_row) - pairs_per_row
    increasing = np.diff(indices) > 0
    # A row's first index may be below the previous row's last.
    increasing[row_starts[(pairs_per_row > 0) & (row_starts > 0)] - 1] = True
    if not increasing.all():
        return None  # indices must be sorted and unique within a row
    labels = values[position == 0]
    with np.errstate(over="ignore"):  # beyond float32's range is infinite, as in scikit-learn's float32 arrays
        feature_values = values[is_feature_value].astype(np.float32)
    if not (np.isfinite(labels).all() and np.isfinite(feature_values).all()):
        return None  # NaN and infinities: the caller's check names the line
    return ChunkRows(labels, qids, pairs_per_row, indices.astype(np.int32), feature_values)


def _plain_text(chunk: memoryview) -> bytes | None:
    """The chunk with comments cut (from a line's first `#` on, as the svmlight reader cuts them) and every
    whitespace byte but the newline turned into a space; None if it holds a NUL or another control byte, where
    the svmlight reader's C string search and bytes.split() have their own rules."""
    text = bytes(chunk)
    if b"#" in text:
        text = _COMMENT.sub(b"", text)
    if any(space in text for space in _OTHER_WHITESPACE):
        text = text.translate(_TO_SPACES)
    codes = np.frombuffer(text, np.uint8)
    if np.count_nonzero(codes < ord(" ")) != text.count(b"\n"):
        return None
    return text


def _positions_in_rows(first_token: np.ndarray, counts: np.ndarray, num_tokens: int) -> np.ndarray:
    """Each token's place in its row (0 for the label): counts up by one, back to 0 at each row's first token."""
    steps = np.ones(num_tokens, np.int32)
    steps[first_token] = 1 - np.concatenate([[1], counts[:-1]])
    return np.cumsum(steps, dtype=np.int32)


def _qid_names(text: np.ndarray, starts: np.ndarray, ends: np.ndarray, position: np.ndarray) -> np.ndarray:
    """Tokens spelled exactly `qid` right before a colon (position 1 of a row when well formed)."""
    candidates = np.flatnonzero((ends - starts == 3) & ((position & 1) == 1))
    first = starts[candidates]
    spelled = (text[first] == ord("q")) & (text[first + 1] == ord("i")) & (text[first + 2] == ord("d"))
    is_name = np.zeros(len(starts), bool)
    is_name[candidates[spelled]] = True
    return is_name


def _numbers(text: bytes, codes: np.ndarray, separator: np.ndarray, starts: np.ndarray, ends: np.ndarray,
             skip: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Each token's value as Python's float() reads it (float64), and whether the token is digits only; None if a
    token (other than the `skip` ones) is not a number."""
    is_digit = (codes >= ord("0")) & (codes <= ord("9"))
    # Bytes of tokens that are not digits: about one point per value, signs and letters are rare in LETOR data.
    marks = np.flatnonzero(~separator & ~is_digit)
    token_of = np.searchsorted(ends, marks, side="right")
    mark_codes = codes[marks]
    is_point = mark_codes == _POINT
    lengths = ends - starts
    mark_count = np.bincount(token_of, minlength=len(starts))
    digit_count = lengths - mark_count
    all_digits = mark_count == 0
    # Simple: digits with at most one point and at most a leading sign besides.
    simple = (mark_count <= 2) & (digit_count >= 1) & (digit_count <= _MAX_DIGITS)
    point_tokens = token_of[is_point]
    simple[point_tokens[1:][point_tokens[1:] == point_tokens[:-1]]] = False
    negative = np.zeros(len(starts), bool)
    if not is_point.all():
        others = np.flatnonzero(~is_point)
        leading_sign = np.isin(mark_codes[others], (_MINUS, _PLUS)) & (marks[others] == starts[token_of[others]])
        simple[token_of[others[~leading_sign]]] = False
        signed = others[leading_sign]
        negative[token_of[signed]] = mark_codes[signed] == _MINUS
    fraction_digits = np.zeros(len(starts), np.int64)
    fraction_digits[point_tokens] = ends[point_tokens] - marks[is_point] - 1
    simple &= fraction_digits < len(_EXACT_SCALES)

    mantissa = _mantissas(codes[is_digit], digit_count)
    values = mantissa.astype(np.float64)
    exact = mantissa <= _EXACT_MANTISSA
    # Both exact in float64, so one division rounds correctly, as float() does.
    np.divide(values, _EXACT_SCALES.take(fraction_digits, mode="clip"), out=values, where=exact)
    wide = np.flatnonzero(simple & ~exact)
    if len(wide):
        rounded = _divide_wide(mantissa[wide], fraction_digits[wide])
        simple[wide[np.isnan(rounded)]] = False
        values[wide] = rounded
    np.negative(values, out=values, where=negative)

    spelled_out = ~simple & ~skip
    for token, start, end in zip(np.flatnonzero(spelled_out).tolist(), starts[spelled_out].tolist(),
                                 ends[spelled_out].tolist()):
        try:
            values[token] = float(text[start:end])
        except ValueError:
            return None
    return values, all_digits


def _mantissas(digit_bytes: np.ndarray, digit_count: np.ndarray) -> np.ndarray:
    """Each token's digits as one integer, from the digits of all tokens one after another (int64; tokens over 18
    digits come out wrong and are not used). Eight digits at a time, as one 64-bit word each (the SWAR method of
    simdjson's parse_eight_digits_unrolled), so the work is per token rather than per digit."""
    # Digit values after 8 bytes of zeros (so a window may start in front of the first digit), whole 64-bit words.
    padded = np.zeros(8 + -(-len(digit_bytes) // 8) * 8 + 8, np.uint8)
    np.subtract(digit_bytes, np.uint8(ord("0")), out=padded[8:8 + len(digit_bytes)])
    words = padded.view(np.uint64)
    digit_end = np.cumsum(digit_count) + 8
    mantissa = np.zeros(len(digit_count), np.int64)
    tokens = np.flatnonzero(digit_count)
    for part in range(-(-min(int(digit_count.max(initial=0)), _MAX_DIGITS) // 8)):
        if part:
            tokens = tokens[digit_count[tokens] > 8 * part]  # only long tokens have a second or third part
        # The 8 bytes ending at this part's last digit, from the two aligned words they straddle (numpy shifts by
        # 64 give 0, as an unaligned load needs); bytes in front of the part belong to other tokens and are
        # cleared, which leaves leading zero digits.
        first_byte = digit_end[tokens] - 8 * (part + 1)
        word_index, shift = first_byte >> 3, ((first_byte & 7) << 3).astype(np.uint64)
        window = (words[word_index] >> shift) | (words[word_index + 1] << (np.uint64(64) - shift))
        window &= _KEEP_LAST_BYTES.take(np.minimum(digit_count[tokens] - 8 * part, 8))
        mantissa[tokens] += _eight_digits(window).astype(np.int64) * 10 ** (8 * part)
    return mantissa


def _eight_digits(words: np.ndarray) -> np.ndarray:
    """Eight digit values (0-9) per little-endian uint64, first digit in the lowest byte, as the number they spell."""
    words = words * np.uint64(10) + (words >> np.uint64(8))
    low = (words & np.uint64(0x000000FF000000FF)) * np.uint64(100 + (1000000 << 32))
    high = ((words >> np.uint64(16)) & np.uint64(0x000000FF000000FF)) * np.uint64(1 + (10000 << 32))
    return (low + high) >> np.uint64(32)


def _divide_wide(mantissa: np.ndarray, fraction_digits: np.ndarray) -> np.ndarray:
    """mantissa / 10**fraction_digits rounded to float64 as float() would, for mantissas over 2**53, through the
    64-bit extended type; NaN where that type is missing or its result sits exactly between two float64s (rounding
    twice could then differ from rounding once)."""
    if np.finfo(np.longdouble).nmant < 63:
        return np.full(len(mantissa), np.nan)
    quotient = mantissa.astype(np.longdouble) / (np.longdouble(10) ** fraction_digits.astype(np.longdouble))
    rounded = quotient.astype(np.float64)
    residue = np.abs(quotient - rounded.astype(np.longdouble))
    tie = residue == np.spacing(np.abs(rounded)).astype(np.longdouble) / 2
    rounded[tie] = np.nan
    return rounded


def fill(parts: list[ChunkRows], rows: ParsedRows, threads: int = 1, first_row: int = 0) -> None:
    """Writes the parts' rows into `rows` (zeroed features) from `first_row` on, parts on several threads."""
    row_counts = [len(part.labels) for part in parts]
    first_rows = first_row + np.cumsum(row_counts) - row_counts
    columns = rows.features.shape[1]

    def fill_part(index: int) -> None:
        part, first = parts[index], int(first_rows[index])
        end = first + len(part.labels)
        rows.labels[first:end] = part.labels
        if rows.qids is not None:
            rows.qids[first:end] = part.qids
        block = rows.features[first:end].reshape(-1)
        row_of_pair = np.repeat(np.arange(len(part.labels), dtype=np.int64), part.pairs_per_row)
        block[row_of_pair * columns + part.indices - 1] = part.values

    if threads > 1 and len(parts) > 1:
        with ThreadPoolExecutor(min(threads, len(parts)), thread_name_prefix="letor-rows") as pool:
            list(pool.map(fill_part, range(len(parts))))
    else:
        for index in range(len(parts)):
            fill_part(index)
