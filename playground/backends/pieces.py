"""Token ids -> text: one table per tokenizer of each token's bytes, filled on first use.

The record keeps one text piece per sampled token (the token wall, the diff, the CSV), and one
text per top-k alternative. Decoding them with the tokenizer costs two decodes per sampled token
and one per alternative: at n=256 with a top-5, more than vLLM's whole frontend spends on the
token. But a token is the same bytes wherever it stands, for the tokenizers that spell text as
bytes (byte-level BPE, as GPT-2 and Llama 3 do; SentencePiece with byte fallback, as Llama 2
does). So each id's bytes are worked out once, and a sample's pieces are its tokens' bytes run
through one incremental UTF-8 decoder: a token that ends inside a multibyte character gets an
empty piece, and the token that completes the character carries it, as the tokenizer's own
decode of the sequence would put it. Other tokenizers keep the tokenizer's decode, with a short
window of context (``DecodedPieces``), as vLLM's incremental detokenizer does.

The same table can give each output the text vLLM's detokenizer would (``Spelling``), so the
engine is asked not to detokenize at all: with a top-5, vLLM decodes six tokens per sampled token
(each alternative twice over), about two thirds of its front end's CPU, for texts the record
takes from this table anyway.
"""

from __future__ import annotations

import codecs
import functools
import re
from collections.abc import Callable

SPACE = "\u2581"  # SentencePiece's word boundary
BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


@functools.cache
def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's printable stand-in for each byte, inverted (the ByteLevel pre-tokenizer's map)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            chars[chr(byte)] = byte
        else:
            chars[chr(256 + extra)] = byte
            extra += 1
    return chars


def _decoder_kind(tokenizer) -> str | None:
    """"byte-level", "sentencepiece", or None (decode with the tokenizer), from the tokenizer's own
    decoder (HF fast tokenizers)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    decoder = getattr(backend, "decoder", None)
    text = repr(decoder) if decoder is not None else ""
    if text.startswith("ByteLevel("):
        return "byte-level"
    if "ByteFallback" in text and "Metaspace" not in text and SPACE in text:
        return "sentencepiece"
    return None


class TokenTable:
    """What a tokenizer's tokens say: each id's bytes (the table), a sample's pieces as they come
    (``stream``), and one token's text alone (a top-k alternative)."""

    def __init__(self, tokenizer, decode: Callable[[list[int]], str]):
        self.tokenizer = tokenizer
        self.decode = decode  # the tokenizer's decode, special tokens kept
        self.kind = _decoder_kind(tokenizer)
        added = getattr(tokenizer, "added_tokens_decoder", None) or {}
        self._added = {token_id: getattr(token, "content", str(token)) for token_id, token in added.items()}
        # What a decode that skips special tokens (vLLM's default) leaves out.
        self.special = frozenset(token_id for token_id, token in added.items() if getattr(token, "special", False))
        self._bytes: dict[int, bytes] = {}
        self._alone: dict[int, str] = {}
        self.whole = _Whole(self)  # id -> its text when its bytes are whole UTF-8 by themselves, else None
        self.plain = _Plain(self)  # id -> its text where it reads as itself in any sample's text, else None

    def bytes_of(self, token_id: int) -> bytes:
        found = self._bytes.get(token_id)
        if found is None:
            found = self._bytes[token_id] = self._spell(token_id)
        return found

    def _spell(self, token_id: int) -> bytes:
        if token_id in self._added:  # special and added tokens are written as they read
            return self._added[token_id].encode("utf-8")
        token = self.tokenizer.convert_ids_to_tokens(token_id)
        if token is None:
            return self.decode([token_id]).encode("utf-8")
        if self.kind == "byte-level":
            alphabet = _byte_level_alphabet()
            if all(c in alphabet for c in token):
                return bytes(alphabet[c] for c in token)
        elif self.kind == "sentencepiece":
            if match := BYTE.fullmatch(token):
                return bytes([int(match.group(1), 16)])
            return token.replace(SPACE, " ").encode("utf-8")
        return self.decode([token_id]).encode("utf-8")

    def alone(self, token_id: int) -> str:
        """The token's text by itself (an alternative in a top-k): a part of a character shows as
        the replacement character."""
        found = self._alone.get(token_id)
        if found is None:
            found = self._alone[token_id] = (self.bytes_of(token_id).decode("utf-8", "replace")
                                             if self.kind else self.decode([token_id]))
        return found

    def stream(self, pending: bytes = b"") -> TablePieces | DecodedPieces:
        """A decoder of one sample's pieces, token by token (``pending``: the bytes of a character
        its prompt left incomplete, which its first tokens complete)."""
        return TablePieces(self, pending) if self.kind else DecodedPieces(self.decode)

    def pending(self, prompt_ids: list[int]) -> bytes:
        """The bytes of the character a prompt's last tokens leave incomplete (a branch from a
        point inside a character), else none: a sample's first piece completes it."""
        if not self.kind:
            return b""
        tail = codecs.getincrementaldecoder("utf-8")("replace")
        for token_id in prompt_ids[-8:]:
            if token_id not in self.special:
                tail.decode(self.bytes_of(token_id))
        return tail.getstate()[0]

    def echo(self, prompt_ids: list[int]) -> str:
        """What vLLM's fast detokenizer puts before a sample's first text when the prompt ends
        inside a character (vLLM issue #48853: tokenizers' DecodeStream, primed with such a prompt,
        releases the whole prompt's text with the character it completes): the prompt's text
        without special tokens, up to that character. "" for a prompt that ends on a whole one."""
        if not self.pending(prompt_ids):
            return ""
        spelled = b"".join(self.bytes_of(token_id) for token_id in prompt_ids if token_id not in self.special)
        return spelled.decode("utf-8", "replace").rstrip("\ufffd")

    def spelling(self, prompt_ids: list[int], output_kind: str, stop: list[str]) -> Spelling | None:
        """A run's texts from this table instead of vLLM's detokenizer, when they are the same:
        a byte-level tokenizer (whose pieces are context-free) and no stop strings (vLLM finds
        those in the text it detokenizes). A prompt that ends inside a character gives each sample
        its pending bytes, so the first text is the character the sample completes (vLLM's
        detokenizer would put the whole prompt's text before it: ``echo``)."""
        if self.kind != "byte-level" or stop:
            return None
        return Spelling(self, cumulative=output_kind != "DELTA", pending=self.pending(prompt_ids))


class _Whole(dict):
    """Token id -> its text, when its bytes are whole UTF-8 by themselves (most tokens), else None:
    such a token read with no character pending is its text, without the decoder's work."""

    def __init__(self, table: TokenTable):
        super().__init__()
        self.bytes_of = table.bytes_of

    def __missing__(self, token_id: int) -> str | None:
        try:
            text = self.bytes_of(token_id).decode("utf-8")
        except UnicodeDecodeError:
            text = None
        self[token_id] = text
        return text


class _Plain(dict):
    """Token id -> its text when a sample's text and pieces say it as itself wherever it stands
    with nothing pending before it: whole UTF-8 (``_Whole``), not special, and no replacement
    character (which would hold vLLM's text back). Most tokens are."""

    def __init__(self, table: TokenTable):
        super().__init__()
        self.whole, self.special = table.whole, table.special

    def __missing__(self, token_id: int) -> str | None:
        text = self.whole[token_id]
        if text is not None and (token_id in self.special or "\ufffd" in text):
            text = None
        self[token_id] = text
        return text


class TablePieces:
    """One sample's pieces from the table's bytes, through one incremental UTF-8 decoder (its
    ``buffer``: the bytes of a character not yet complete)."""

    def __init__(self, texts: TokenTable, pending: bytes = b""):
        self.bytes_of, self.whole = texts.bytes_of, texts.whole
        self.utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        if pending:  # a character the prompt began: the sample's first tokens complete it
            self.utf8.setstate((pending, 0))

    def add(self, new_ids: list[int]) -> list[str]:
        utf8, whole, bytes_of = self.utf8, self.whole, self.bytes_of
        pieces = []
        for token_id in new_ids:
            text = None if utf8.buffer else whole[token_id]
            pieces.append(utf8.decode(bytes_of(token_id)) if text is None else text)
        return pieces


class DecodedPieces:
    """A growing token sequence decoded by the tokenizer into one text piece per token.

    A token that ends inside a multibyte character gets an empty piece; the token that completes
    the character carries it. A short window of earlier tokens gives decoders that depend on
    context (leading spaces) what they need, as vLLM's incremental detokenizer does.
    """

    WINDOW = 6

    def __init__(self, decode: Callable[[list[int]], str]):
        self.decode = decode
        self.ids: list[int] = []
        self.prefix = 0  # start of the context window
        self.read = 0  # tokens already turned into pieces

    def add(self, new_ids: list[int]) -> list[str]:
        pieces = []
        for token_id in new_ids:
            self.ids.append(token_id)
            before = self.decode(self.ids[self.prefix:self.read])
            after = self.decode(self.ids[self.prefix:])
            if after.endswith("\ufffd"):
                pieces.append("")  # incomplete character: the next token completes it
                continue
            pieces.append(after[len(before):])
            self.read = len(self.ids)
            self.prefix = max(0, self.read - self.WINDOW)
        return pieces


class Spelling:
    """Each output's text as vLLM's detokenizer would have put it, from the table's pieces.

    vLLM's detokenizer (tokenizers' DecodeStream, with vLLM's defaults) leaves out special
    tokens, and the token that ended a sample by a stop (EOS), and releases text only when it does
    not end with a replacement character: a character cut by the end of the sample never shows.
    ``read`` takes the ids of an output of any kind (a DELTA's new ones, or all of them so far)
    and gives its text (a DELTA's new part, else the whole) and one piece per new token.

    The text is the pieces without the left-out tokens, until a special token comes: its bytes
    then went to the pieces' decoder but not to the text's (a character it cuts in two reads
    whole in the text), so from there on the text has a decoder of its own.
    """

    def __init__(self, table: TokenTable, cumulative: bool, pending: bytes = b""):
        self.table = table
        self.cumulative = cumulative
        self.pending = pending  # a character the prompt left incomplete: every sample starts inside it
        self.begun: set[int] = set()  # the indices read so far (with ``pending``)
        self.pieces: dict[int, TablePieces] = {}
        self.counts: dict[int, int] = {}  # ids read so far, per index (cumulative kinds)
        self.texts: dict[int, str] = {}  # the text released so far, per index (cumulative kinds)
        self.held: dict[int, str] = {}  # text decoded but not released (it ends in U+FFFD)
        self.own: dict[int, codecs.IncrementalDecoder] = {}  # the text's decoder, once it parts from the pieces'

    def read(self, index: int, token_ids: list[int], finish_reason: str | None) -> tuple[str, list[str]]:
        if self.pending and index not in self.begun:  # its first tokens complete the prompt's character
            self.begun.add(index)
            self.pieces[index] = TablePieces(self.table, self.pending)
        if len(token_ids) == 1 and not self.cumulative and index not in self.pieces and finish_reason != "stop":
            # Most DELTA outputs: one plain token, from a sample with nothing pending (a stream of
            # its pieces, its own decoder and its held text are all kept on the way below).
            text = self.table.plain[token_ids[0]]
            if text is not None:
                return text, [text]
        new = token_ids
        if self.cumulative:
            count = self.counts.get(index, 0)
            if len(token_ids) < count:  # not a continuation: read it anew
                for kept in (self.pieces, self.own):
                    kept.pop(index, None)
                if self.pending:
                    self.pieces[index] = TablePieces(self.table, self.pending)
                self.texts[index], self.held[index], count = "", "", 0
            new = token_ids[count:]
            self.counts[index] = len(token_ids)
        if (plain := self._plain(index, new, finish_reason)) is not None:
            text, pieces = plain
            return (self._released(index, text) if self.cumulative else text), pieces
        stream = self.pieces.get(index)
        if stream is None:
            stream = self.pieces[index] = TablePieces(self.table)
        before = stream.utf8.buffer  # the pieces' decoder's state is (buffer, 0)
        pieces = stream.add(new)
        special, held, released = self.table.special, self.held.get(index, ""), []
        if finish_reason != "stop" and not held and index not in self.own and not stream.utf8.buffer and \
                special.isdisjoint(new) and "\ufffd" not in (text := "".join(pieces)):
            # Characters cut across tokens, all whole by the output's end, with nothing held back:
            # the text's decoder would read the same bytes from the same state and release them
            # all, so the text is the pieces (most outputs of a text that is not all ASCII).
            del self.pieces[index]
            return self._released(index, text), pieces
        last = len(new) - 1 if finish_reason == "stop" else len(new)  # the stop token is not text
        decoder = self.own.get(index)
        if decoder is None:
            skips = not special.isdisjoint(new[:last])
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            decoder.setstate((before, 0))  # token by token from where the pieces' decoder stood
            if skips:  # a special token parts the text from the pieces here, for good
                self.own[index] = decoder
        bytes_of = self.table.bytes_of
        for token_id in new[:last]:
            if token_id in special:
                continue
            held += decoder.decode(bytes_of(token_id))
            # As DecodeStream: nothing is released while the decoded text ends in U+FFFD (a
            # character still incomplete decodes so there).
            if held and not held.endswith("\ufffd") and not decoder.getstate()[0]:
                released.append(held)
                held = ""
        self.held[index] = held
        if not held and not stream.utf8.buffer and index not in self.own:
            del self.pieces[index]  # nothing pending: the sample's next plain tokens take the short way
        return self._released(index, "".join(released)), pieces

    def _plain(self, index: int, new: list[int], finish_reason: str | None) -> tuple[str, list[str]] | None:
        """New tokens as most are: whole characters each, none special or a stop, with nothing
        pending before them. Each piece is then the table's text of its token and the text their
        join, read without a decoder (at n=256 every output costs: this is most of them). None
        when they are not such tokens."""
        if finish_reason == "stop" or index in self.own or self.held.get(index):
            return None
        stream = self.pieces.get(index)
        if stream is not None and stream.utf8.buffer:
            return None
        plain = self.table.plain
        if len(new) == 1:  # most outputs carry one token: no list to join
            text = plain[new[0]]
            return None if text is None else (text, [text])
        pieces = [plain[token_id] for token_id in new]
        return None if None in pieces else ("".join(pieces), pieces)

    def _released(self, index: int, text: str) -> str:
        if self.cumulative:
            text = self.texts[index] = self.texts.get(index, "") + text
        return text
