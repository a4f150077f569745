//! A SentencePiece-style tokenizer from a GGUF's metadata
//! (`tokenizer.ggml.model` "llama": Llama 2, Gemma), tokenizing and decoding
//! as llama.cpp, the GGUF's own runtime, does (llama-vocab.cpp:
//! `tokenizer_st_partition`, `llm_tokenizer_spm_session`, `token_to_piece`,
//! `detokenize`). The special tokens (control, user-defined, unknown) are
//! cut out of the text first, longest first; each piece of text left gets
//! the optional space prefix, its spaces written U+2581, and is split into
//! characters that are merged pairwise, always the pair whose merged piece
//! has the highest score (the leftmost among equals), while the merged text
//! is a token; a character no token covers becomes its UTF-8 bytes' `<0xXX>`
//! tokens.
//!
//! Why not the `tokenizers` crate: it cannot express this exactly. Its BPE
//! merges by a ranked list of pairs, and a file of this kind has scores, not
//! merges: ranking the pairs by their merged piece's score (as transformers'
//! GGUF loader does) orders pairs of equal score by the list, where llama.cpp
//! takes the leftmost pair in the text, and building that list for 262,144
//! tokens takes seconds. Its Unigram model segments by the best total score
//! (Viterbi), not by greedy pair merges. Its added tokens are matched
//! leftmost-longest in one pass, where llama.cpp cuts each special token out
//! in turn, longest first (`<a>b` and `b<c>` in "<a>b<c>" differ). The merge
//! loop is small, so it is written here, as llama.cpp's.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use anyhow::{bail, Result};

use super::super::gguf::vocab::byte_of;

/// Token attributes (llama.cpp's `llama_token_attr`), from GGUF's token types
/// (`llama_token_type`: 0 undefined, 1 normal, 2 unknown, 3 control,
/// 4 user-defined, 5 unused, 6 byte).
const NORMAL: u8 = 1;
const UNKNOWN: u8 = 2;
const CONTROL: u8 = 4;
const USER_DEFINED: u8 = 8;
const BYTE: u8 = 16;

/// Written whole, never merged into or escaped: cut out of the text first
/// (llama.cpp's special-token cache), and decoded as written.
const SPECIAL: u8 = UNKNOWN | CONTROL | USER_DEFINED;

/// Tokens llama.cpp ends generation on, found by their text; each becomes a
/// control token there (so it is matched whole in text) whatever its type.
const END_MARKERS: [&str; 22] = [
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// SentencePiece's escaped space, U+2581.
const SPACE: &str = "\u{2581}";

fn attr(token_type: i32) -> u8 {
    match token_type {
        1 => NORMAL,
        2 => UNKNOWN,
        3 => CONTROL,
        4 => USER_DEFINED,
        6 => BYTE,
        // Unused (5) and undefined (0): never special, decoded as nothing.
        _ => 0,
    }
}

/// The tokenizer: every token's text, attribute and score, the lookup from
/// text to id, the special tokens in the order they are cut out, and each
/// byte's fallback token.
pub struct Spm {
    pieces: Vec<String>,
    attrs: Vec<u8>,
    scores: Vec<f32>,
    ids: HashMap<String, u32>,
    special: Vec<u32>,
    /// Each byte's token, all 256.
    bytes: Vec<Option<u32>>,
    unk: Option<u32>,
    add_space_prefix: bool,
}

/// A stretch of the text to tokenize, or a special token cut out of it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fragment {
    Text(usize, usize),
    Token(u32),
}

/// One character or merged run of the text, linked to its neighbours.
#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// Two neighbouring symbols whose joined text is a token of `score`.
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    len: usize,
}

/// llama.cpp's `llm_bigram_spm::comparator`: the higher score first, then
/// the leftmost. Scores are finite (checked), so they always compare.
impl Ord for Bigram {
    fn cmp(&self, o: &Self) -> Ordering {
        match self.score.partial_cmp(&o.score) {
            Some(Ordering::Equal) | None => o.left.cmp(&self.left),
            Some(other) => other,
        }
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl PartialEq for Bigram {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}

impl Eq for Bigram {}

impl Spm {
    /// From the checked vocabulary: one type and one finite score per token.
    pub fn new(
        tokens: &[&str],
        types: &[i32],
        scores: &[f32],
        unk: Option<u32>,
        add_space_prefix: bool,
    ) -> Self {
        // As llama.cpp loads them: an empty token is named by its id, and a
        // text held twice is found as its last id.
        let pieces: Vec<String> = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| match t.is_empty() {
                true => format!("[EMPTY_{i}]"),
                false => t.to_string(),
            })
            .collect();
        let mut ids = HashMap::with_capacity(pieces.len());
        for (i, p) in pieces.iter().enumerate() {
            ids.insert(p.clone(), i as u32);
        }
        let mut attrs: Vec<u8> = (0..pieces.len())
            .map(|i| attr(types.get(i).copied().unwrap_or(1)))
            .collect();
        for m in END_MARKERS {
            if let Some(&i) = ids.get(m) {
                attrs[i as usize] |= CONTROL;
            }
        }
        let mut special: Vec<u32> = (0..pieces.len() as u32)
            .filter(|&i| attrs[i as usize] & SPECIAL != 0)
            .collect();
        // Longest first (a stable sort: equal lengths keep the ids' order).
        special.sort_by_key(|&i| std::cmp::Reverse(pieces[i as usize].len()));
        // llama.cpp's `byte_to_token`: `<0xXX>`, else the byte itself.
        let bytes = (0..=255u8)
            .map(|b| {
                let own = char::from(b).to_string();
                ids.get(&format!("<0x{b:02X}>"))
                    .or_else(|| ids.get(&own).filter(|_| b.is_ascii()))
                    .copied()
            })
            .collect();
        Self {
            scores: (0..pieces.len())
                .map(|i| scores.get(i).copied().unwrap_or(0.0))
                .collect(),
            pieces,
            attrs,
            ids,
            special,
            bytes,
            unk,
            add_space_prefix,
        }
    }

    /// The ids of `text`, special tokens matched whole; nothing added around
    /// them (the caller adds BOS and EOS as the file says).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        // A space prefix goes on the first stretch and each one after a
        // special token (llama.cpp's `is_prev_special`).
        let mut after_special = true;
        for f in self.partition(text) {
            match f {
                Fragment::Token(id) => {
                    out.push(id);
                    after_special = true;
                }
                Fragment::Text(a, b) => {
                    let prefix = if self.add_space_prefix && after_special {
                        " "
                    } else {
                        ""
                    };
                    let escaped = format!("{prefix}{}", &text[a..b]).replace(' ', SPACE);
                    self.merge(&escaped, &mut out)?;
                    after_special = false;
                }
            }
        }
        Ok(out)
    }

    /// `text` cut at every special token, longest token first, each one cut
    /// out of every stretch still text, at each place it occurs from the left
    /// (llama.cpp's `tokenizer_st_partition` with `parse_special`).
    fn partition(&self, text: &str) -> Vec<Fragment> {
        if text.is_empty() {
            return Vec::new();
        }
        let mut frags = vec![Fragment::Text(0, text.len())];
        for &id in &self.special {
            let needle = self.pieces[id as usize].as_str();
            if !text.contains(needle) {
                continue;
            }
            let mut next = Vec::with_capacity(frags.len() + 2);
            for f in frags {
                let Fragment::Text(mut a, b) = f else {
                    next.push(f);
                    continue;
                };
                while let Some(at) = text[a..b].find(needle) {
                    if at > 0 {
                        next.push(Fragment::Text(a, a + at));
                    }
                    next.push(Fragment::Token(id));
                    a += at + needle.len();
                }
                if a < b {
                    next.push(Fragment::Text(a, b));
                }
            }
            frags = next;
        }
        frags
    }

    /// A bigram of `left` and `right` when their joined text is a token
    /// (llama.cpp's `try_add_bigram`).
    fn bigram(&self, text: &str, syms: &[Symbol], left: usize, right: usize) -> Option<Bigram> {
        let (l, r) = (syms[left], syms[right]);
        let joined = &text[l.start..r.start + r.len];
        let id = *self.ids.get(joined)?;
        Some(Bigram {
            score: self.scores[id as usize],
            left,
            right,
            len: joined.len(),
        })
    }

    /// One escaped stretch of text: its characters merged pairwise by score,
    /// then each symbol's token, or its bytes' tokens.
    fn merge(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        let mut syms: Vec<Symbol> = text
            .char_indices()
            .enumerate()
            .map(|(i, (start, c))| Symbol {
                start,
                len: c.len_utf8(),
                prev: i.checked_sub(1),
                next: Some(i + 1).filter(|_| start + c.len_utf8() < text.len()),
            })
            .collect();
        let mut queue = BinaryHeap::new();
        for i in 1..syms.len() {
            queue.extend(self.bigram(text, &syms, i - 1, i));
        }
        while let Some(b) = queue.pop() {
            let (l, r) = (syms[b.left], syms[b.right]);
            // A pair one of whose symbols has changed since it was queued.
            if l.len == 0 || r.len == 0 || l.len + r.len != b.len {
                continue;
            }
            syms[b.left].len += r.len;
            syms[b.right].len = 0;
            syms[b.left].next = r.next;
            if let Some(n) = r.next {
                syms[n].prev = Some(b.left);
            }
            if let Some(p) = l.prev {
                queue.extend(self.bigram(text, &syms, p, b.left));
            }
            if let Some(n) = r.next {
                queue.extend(self.bigram(text, &syms, b.left, n));
            }
        }
        let mut at = Some(0).filter(|_| !syms.is_empty());
        while let Some(i) = at {
            let s = syms[i];
            let piece = &text[s.start..s.start + s.len];
            match self.ids.get(piece) {
                Some(&id) => out.push(id),
                // Only a single character is left unmerged and unknown: a
                // merged run is always a token.
                None => {
                    for &byte in piece.as_bytes() {
                        out.push(self.byte_token(byte)?);
                    }
                }
            }
            at = s.next;
        }
        Ok(())
    }

    /// The token of one byte no piece covers: its `<0xXX>` token, else
    /// (where llama.cpp would stop) the unknown token.
    fn byte_token(&self, byte: u8) -> Result<u32> {
        match self
            .bytes
            .get(byte as usize)
            .copied()
            .flatten()
            .or(self.unk)
        {
            Some(id) => Ok(id),
            None => bail!(
                "cannot tokenize the prompt: byte 0x{byte:02X} has no token <0x{byte:02X}> in \
                 its vocabulary, and it has no unknown token"
            ),
        }
    }

    /// `ids` back to text as llama.cpp's `detokenize` with special tokens
    /// shown: special tokens as written, U+2581 as a space, byte tokens as
    /// their bytes (joined, then read as UTF-8), unused ones as nothing; with
    /// a space prefix, the first token's leading space is dropped.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        let mut out: Vec<u8> = Vec::new();
        for (k, &id) in ids.iter().enumerate() {
            let Some(piece) = self.pieces.get(id as usize) else {
                bail!(
                    "cannot decode token id {id}: past its vocabulary of {} tokens",
                    self.pieces.len()
                );
            };
            let a = self.attrs[id as usize];
            let text: Vec<u8> = if a & SPECIAL != 0 {
                piece.as_bytes().to_vec()
            } else if a & NORMAL != 0 {
                piece.replace(SPACE, " ").into_bytes()
            } else if a & BYTE != 0 {
                byte_of(piece).into_iter().collect()
            } else {
                Vec::new()
            };
            let strip = k == 0 && self.add_space_prefix && text.first() == Some(&b' ');
            out.extend_from_slice(&text[usize::from(strip)..]);
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny vocabulary: special tokens, byte tokens for every byte, and
    /// pieces whose scores make the merges' order matter.
    fn tiny(add_space_prefix: bool) -> Spm {
        let mut tokens: Vec<String> = ["<unk>", "<s>", "</s>", "<ctl>", "<ctl>x", "\n\n"]
            .map(String::from)
            .to_vec();
        let mut types = vec![2, 3, 3, 3, 4, 4];
        let mut scores = vec![0.0; 6];
        for b in 0..=255u8 {
            tokens.push(format!("<0x{b:02X}>"));
            types.push(6);
            scores.push(0.0);
        }
        // (piece, score): "ab" beats "bc"; "▁" pieces for the escaped spaces.
        for (p, s) in [
            ("a", -1.0),
            ("b", -1.0),
            ("c", -1.0),
            ("ab", -2.0),
            ("bc", -3.0),
            ("abc", -4.0),
            ("▁", -1.0),
            ("▁a", -5.0),
            ("aa", -6.0),
            ("é", -1.0),
            ("<unused>", 0.0),
        ] {
            tokens.push(p.to_string());
            types.push(if p == "<unused>" { 5 } else { 1 });
            scores.push(s);
        }
        let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
        Spm::new(&refs, &types, &scores, Some(0), add_space_prefix)
    }

    fn id(s: &Spm, piece: &str) -> u32 {
        s.ids[piece]
    }

    #[test]
    fn pairs_merge_by_their_pieces_score_then_leftmost() {
        let s = tiny(false);
        // "ab" (-2) before "bc" (-3), then "abc" from "ab" + "c".
        assert_eq!(s.encode("abc").unwrap(), [id(&s, "abc")]);
        // "bcb": "bc" is the only pair that is a token.
        assert_eq!(s.encode("bcb").unwrap(), [id(&s, "bc"), id(&s, "b")]);
        // "aaa": the pairs are equal ("aa" twice): the leftmost merges first.
        assert_eq!(s.encode("aaa").unwrap(), [id(&s, "aa"), id(&s, "a")]);
        // Spaces are pieces of U+2581; "▁a" merges, a lone "▁" stays.
        assert_eq!(
            s.encode("a a").unwrap(),
            [id(&s, "a"), id(&s, "▁a")],
            "a space is U+2581"
        );
    }

    #[test]
    fn what_no_piece_covers_falls_back_to_byte_tokens() {
        let s = tiny(false);
        // "ü" is no token: its two UTF-8 bytes; "é" is one.
        let want = [id(&s, "<0xC3>"), id(&s, "<0xBC>"), id(&s, "é")];
        assert_eq!(s.encode("üé").unwrap(), want);
        assert_eq!(s.decode(&want).unwrap(), "üé");
        // A tab: its byte token.
        assert_eq!(s.encode("\t").unwrap(), [id(&s, "<0x09>")]);
    }

    #[test]
    fn special_tokens_are_cut_out_whole_longest_first() {
        let s = tiny(false);
        // "<ctl>x" (user-defined, longer) before "<ctl>"; "</s>" and "<unk>"
        // (control, unknown) whole; "\n\n" user-defined.
        let got = s.encode("a<ctl>xb<ctl></s>\n\n<unk>").unwrap();
        let want = [
            id(&s, "a"),
            id(&s, "<ctl>x"),
            id(&s, "b"),
            id(&s, "<ctl>"),
            2,
            id(&s, "\n\n"),
            0,
        ];
        assert_eq!(got, want);
        assert_eq!(s.decode(&got).unwrap(), "a<ctl>xb<ctl></s>\n\n<unk>");
        // A lone "\n" is not the user-defined "\n\n": its byte.
        assert_eq!(s.encode("\n").unwrap(), [id(&s, "<0x0A>")]);
        assert!(s.encode("").unwrap().is_empty());
    }

    #[test]
    fn the_space_prefix_goes_first_and_after_each_special_token() {
        let s = tiny(true);
        let (sp_a, a) = (id(&s, "▁a"), id(&s, "a"));
        assert_eq!(s.encode("a").unwrap(), [sp_a]);
        assert_eq!(s.encode("a<s>a").unwrap(), [sp_a, 1, sp_a]);
        // The decode drops the first token's prefixed space only.
        assert_eq!(s.decode(&[sp_a, sp_a]).unwrap(), "a a");
        assert_eq!(s.decode(&[a, sp_a]).unwrap(), "a a");
        let plain = tiny(false);
        assert_eq!(plain.decode(&[sp_a]).unwrap(), " a");
    }

    #[test]
    fn decoding_shows_special_tokens_skips_unused_and_refuses_unknown_ids() {
        let s = tiny(false);
        assert_eq!(s.decode(&[1, id(&s, "a"), 2]).unwrap(), "<s>a</s>");
        assert_eq!(s.decode(&[id(&s, "<unused>")]).unwrap(), "");
        // A lone continuation byte decodes to U+FFFD, never a panic.
        assert_eq!(s.decode(&[id(&s, "<0xBC>")]).unwrap(), "\u{FFFD}");
        let e = s.decode(&[99_999]).unwrap_err().to_string();
        assert!(e.contains("token id 99999: past its vocabulary"), "{e}");
    }

    #[test]
    fn a_byte_without_its_token_is_the_unknown_token_or_refused() {
        let tokens = ["<unk>", "a"];
        let s = Spm::new(&tokens, &[2, 1], &[0.0, 0.0], Some(0), false);
        assert_eq!(s.encode("ab").unwrap(), [1, 0]);
        let s = Spm::new(&tokens[1..], &[1], &[0.0], None, false);
        let e = s.encode("ab").unwrap_err().to_string();
        assert!(e.contains("byte 0x62 has no token <0x62>"), "{e}");
        assert_eq!(byte_of("<0x0A>"), Some(10));
        assert_eq!(byte_of("<0xZZ>"), None);
        assert_eq!(byte_of("<0x0A0>"), None);
        assert_eq!(byte_of("<0x+A>"), None);
    }
}
