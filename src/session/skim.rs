//! Validating a record line without decoding its payload.
//!
//! Large logs are mostly tool output (`tool/result`) and packed chunk rows, and a session
//! reference never reads either: it needs their seqs (for contiguity and `capturedThroughSeq`) and
//! their surface ops (for the fold), nothing else. Decoding them with serde costs about as much as
//! everything else in `prepare` together, so the reader can *skim* such lines instead: one pass
//! that checks the whole line is JSON serde would accept as a [`super::Record`], and returns only
//! the envelope ([`Envelope`]).
//!
//! Skimming is an optimization, never a second definition of the format: it accepts only the
//! canonical layout writers produce (`type` first, known keys, integers where serde wants them) and
//! answers `None` for everything else — unusual but valid lines as well as invalid ones — so that
//! the reader falls back to the serde parser, which stays the single source of truth for what is
//! valid and for the error messages. The property that matters is *soundness*: whatever `skim`
//! accepts, serde accepts with the same envelope. `tests/session/reliability_skim.rs` and the fuzz target
//! `skim_vs_serde` check exactly that.

use super::format::{is_surface_type, PackedKind, SurfaceOp};
use simd::{digit_mask, eq_mask, string_masks, MaskedScan, StringMasks, Wide};

mod simd;

/// The envelope of a record whose payload was validated but not decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope<'a> {
    /// The record `type` (an event type, or a packed row type).
    pub kind: &'a str,
    /// `seq`, or `seq0` for a packed row.
    pub first_seq: u64,
    /// 1 for an event; the member count for a packed row.
    pub seq_count: u64,
    /// `time`, or `time0` for a packed row.
    pub time: i64,
    /// A packed chunk row (`text-chunks`, `reasoning-chunks`, `tool-call-chunks`).
    pub packed: bool,
    /// `surfaceOp`; `None` when absent (always for a packed row).
    pub surface_op: Option<SurfaceOp>,
    /// `sourceEventSeqs`; `None` when absent.
    pub source_event_seqs: Option<Vec<u64>>,
}

/// The record `type` of a line in the canonical layout (`{"type":"…",`), without validating the
/// rest. `None` when the line does not start that way.
pub fn peek_kind(line: &[u8]) -> Option<&str> {
    const PREFIX: &[u8] = b"{\"type\":\"";
    let rest = line.strip_prefix(PREFIX)?;
    let end = rest.iter().position(|&b| b == b'"' || b == b'\\')?;
    if rest[end] != b'"' {
        return None;
    }
    std::str::from_utf8(&rest[..end]).ok()
}

/// Validates `line` (one record, without its newline; trailing whitespace allowed) and returns
/// its envelope, or `None` when the line is not in the canonical layout or not valid.
pub fn skim(line: &[u8]) -> Option<Envelope<'_>> {
    match skim_prefix(line)? {
        (envelope, end) if end == line.len() => Some(envelope),
        _ => None,
    }
}

/// Skims the record at the start of `bytes` (which may run on past the line) and returns its
/// envelope and where the record and its trailing spaces end: at a `\n` or at the end of
/// `bytes`. Nothing in a record can span a newline (whitespace here excludes `\n`, and strings
/// cannot hold a raw one), so a plain reader can find the end of a line this way instead of
/// searching for it first.
pub fn skim_prefix(bytes: &[u8]) -> Option<(Envelope<'_>, usize)> {
    let line = bytes;
    // serde validates every string it keeps, and a record keeps all of them: strings are checked
    // for UTF-8 as they are scanned, and nothing else may hold a non-ASCII byte.
    let mut c = Cursor { b: line, i: 0 };
    c.expect(b'{')?;
    let mut kind: Option<&str> = None;
    let mut seq = None;
    let mut time = None;
    let mut seq0 = None;
    let mut time0 = None;
    let mut data: Option<(usize, usize)> = None;
    let mut members: Option<u64> = None;
    let mut surface_op: Option<Option<SurfaceOp>> = None;
    let mut source_event_seqs: Option<Option<Vec<u64>>> = None;
    loop {
        c.ws();
        let key = c.simple_string()?;
        c.ws();
        c.expect(b':')?;
        c.ws();
        match key {
            b"type" if kind.is_none() => {
                let raw = c.simple_string()?;
                kind = Some(std::str::from_utf8(raw).ok()?);
            }
            b"seq" if seq.is_none() => seq = Some(c.uint()?),
            b"time" if time.is_none() => time = Some(c.int()?),
            b"seq0" if seq0.is_none() => seq0 = Some(c.uint()?),
            b"time0" if time0.is_none() => time0 = Some(c.int()?),
            b"data" if data.is_none() => {
                let start = c.i;
                match kind.and_then(PackedKind::from_type) {
                    // A packed row's data is decoded by serde: check it as such, once.
                    Some(packed) => members = Some(c.packed_data(packed)?),
                    // An event's `data` is kept as a raw value: serde checks its syntax at any
                    // depth.
                    None => c.value(usize::MAX, false)?,
                }
                data = Some((start, c.i));
            }
            b"surfaceOp" if surface_op.is_none() => surface_op = Some(c.surface_op()?),
            b"sourceEventSeqs" if source_event_seqs.is_none() => {
                source_event_seqs = Some(c.uint_array_or_null()?)
            }
            // Unknown or repeated keys: the serde parser decides.
            _ => return None,
        }
        c.ws();
        match c.next()? {
            b',' => continue,
            b'}' => break,
            _ => return None,
        }
    }
    c.ws();
    let end = c.i;
    if end != line.len() && line[end] != b'\n' {
        return None;
    }
    let kind = kind?;
    let (data_start, data_end) = data?;
    let surface_op = surface_op.flatten();
    let source_event_seqs = source_event_seqs.flatten();
    if let Some(packed) = PackedKind::from_type(kind) {
        if seq.is_some() || time.is_some() || surface_op.is_some() || source_event_seqs.is_some() {
            return None;
        }
        let count = match members {
            Some(count) => count,
            None => Cursor {
                b: &line[data_start..data_end],
                i: 0,
            }
            .packed_data(packed)?,
        };
        let envelope = Envelope {
            kind,
            first_seq: seq0?,
            seq_count: count,
            time: time0?,
            packed: true,
            surface_op: None,
            source_event_seqs: None,
        };
        return Some((envelope, end));
    }
    if seq0.is_some() || time0.is_some() {
        return None;
    }
    if is_surface_type(kind) && surface_op.is_none() {
        return None;
    }
    let envelope = Envelope {
        kind,
        first_seq: seq?,
        seq_count: 1,
        time: time?,
        packed: false,
        surface_op,
        source_event_seqs,
    };
    Some((envelope, end))
}

/// Whether `json` (one JSON value, valid as a raw value) surely decodes as a `serde_json::Value`,
/// which raw values do not promise: serde rejects unpaired surrogate escapes, numbers beyond
/// `f64` and nesting past its recursion limit when it builds a value. Errs only towards `false`
/// (a surrogate pair, a float or a long integer is `false` too).
pub fn surely_decodable(json: &[u8]) -> bool {
    let mut c = Cursor { b: json, i: 0 };
    c.value(VALUE_DEPTH, true).is_some() && {
        c.ws();
        c.i == json.len()
    }
}

/// Depth serde allows for values it decodes (its recursion limit is 128); kept below it.
/// Such values (a packed row's `turn`, `step`, `index` and unknown fields) must also hold only
/// short integers: serde rejects numbers out of `f64` range there, which raw values keep.
const VALUE_DEPTH: usize = 100;

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.i += 1;
        Some(b)
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.next()? == byte).then_some(())
    }

    /// JSON whitespace, except `\n`: a record never spans lines.
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i.checked_add(word.len())?;
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    /// An ASCII string without escapes (keys, types); its bytes without the quotes.
    fn simple_string(&mut self) -> Option<&'a [u8]> {
        self.expect(b'"')?;
        let start = self.i;
        let len = self.b[start..]
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || !(0x20..0x80).contains(&b))?;
        if self.b[start + len] != b'"' {
            return None;
        }
        self.i = start + len + 1;
        Some(&self.b[start..start + len])
    }

    /// The rest of a string after its opening quote: escapes checked, no raw control characters,
    /// valid UTF-8. On a CPU with AVX-512BW the block loop runs in a frame compiled for it, so
    /// its masks are computed inline ([`simd::with_cpu_masks`]).
    fn string_body(&mut self) -> Option<()> {
        simd::with_cpu_masks(StringBody(self))
    }

    /// Scans string bodies from just after an opening quote. At each closing quote `after`
    /// decides: the scan either ends, or goes on with the body of a next string (an array's
    /// elements) without leaving the block loop.
    ///
    /// Sixty-four bytes are classified at once; every flagged byte of the block (quote,
    /// backslash, control, non-ASCII) is then handled from the block's bit mask, so long text
    /// costs a few instructions per block and escape-dense text (code, logs) does not pay a
    /// reload per flagged byte.
    ///
    /// With `elements`, the scan is over an array's elements, and a block holding nothing but
    /// plain strings separated by `","` is checked as a whole (see [`separated_run`]); each
    /// element it passes is counted there, as `after` would have. `wide`: the masks come from
    /// AVX-512BW ([`Wide::detect`] said so).
    #[inline(always)]
    fn strings(
        &mut self,
        mut elements: Option<&mut u64>,
        wide: Wide,
        mut after: impl FnMut(&'a [u8], usize) -> AfterQuote,
    ) -> Option<()> {
        let bytes = self.b;
        let mut i = self.i;
        // Bytes before `skip` were consumed already (an escape, a multi-byte character, the
        // separator between two strings).
        let mut skip = i;
        let mut padded = [b' '; 64];
        loop {
            let (block, full): (&[u8; 64], bool) = match bytes.get(i..i + 64) {
                Some(block) => (block.try_into().ok()?, true),
                None => {
                    // The last bytes, padded with spaces (never flagged).
                    let rest = bytes.get(i..).filter(|rest| !rest.is_empty())?;
                    padded[..rest.len()].copy_from_slice(rest);
                    (&padded, false)
                }
            };
            let live = bits_from(skip - i);
            let masks = string_masks(block, wide);
            if elements.is_none() {
                match plain_block(masks, live) {
                    Some(Some(at)) => {
                        self.i = i + at as usize + 1;
                        return Some(());
                    }
                    Some(None) if full => {
                        i += 64;
                        skip = skip.max(i);
                        continue;
                    }
                    Some(None) => return None,
                    None => {}
                }
            }
            let mut mask = masks.special() & live;
            if let Some(count) = elements.as_deref_mut() {
                if let Some((passed, rest)) = separated_run(block, mask) {
                    *count += u64::from(passed);
                    mask = rest;
                }
            }
            while mask != 0 {
                let at = i + mask.trailing_zeros() as usize;
                mask &= mask - 1;
                if at < skip {
                    continue;
                }
                match bytes[at] {
                    b'"' => match after(bytes, at) {
                        AfterQuote::Next(start) => skip = start,
                        AfterQuote::End(end) => {
                            self.i = end;
                            return Some(());
                        }
                    },
                    b'\\' => skip = at + escape_len(bytes, at)?,
                    0..=0x1F => return None,
                    _ => skip = at + utf8_len(bytes, at)?,
                }
            }
            if !full {
                return None;
            }
            i += 64;
            skip = skip.max(i);
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.next()? {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            self.digit()?;
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            self.digit()?;
            self.digits();
        }
        Some(())
    }

    fn digit(&mut self) -> Option<()> {
        self.next()?.is_ascii_digit().then_some(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.i += 1;
        }
    }

    /// A non-negative integer that fits `u64`, in plain integer syntax.
    fn uint(&mut self) -> Option<u64> {
        let bytes = self.b;
        let start = self.i;
        let mut end = start;
        while bytes.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        let digits = &bytes[start..end];
        // No digits, a leading zero, or a fraction or exponent (a float, which serde's integers
        // reject).
        if digits.is_empty()
            || (digits.len() > 1 && digits[0] == b'0')
            || matches!(bytes.get(end), Some(b'.' | b'e' | b'E'))
        {
            return None;
        }
        let value = if digits.len() < 20 {
            // Nineteen digits always fit.
            digits
                .iter()
                .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'))
        } else {
            std::str::from_utf8(digits).ok()?.parse().ok()?
        };
        self.i = end;
        Some(value)
    }

    /// An integer that fits `i64`, in plain integer syntax.
    fn int(&mut self) -> Option<i64> {
        let negative = self.peek() == Some(b'-');
        if negative {
            self.i += 1;
        }
        let magnitude = self.uint()?;
        if negative {
            // serde_json reads `-0` as the float -0.0, which an `i64` rejects.
            if magnitude == 0 {
                return None;
            }
            0i64.checked_sub_unsigned(magnitude)
        } else {
            i64::try_from(magnitude).ok()
        }
    }

    /// Any JSON value, nested at most `max_depth` containers deep.
    ///
    /// `decoded`: the value will be decoded by serde (not kept raw), which also rejects numbers
    /// out of `f64` range; only short integers are accepted then.
    fn value(&mut self, max_depth: usize, decoded: bool) -> Option<()> {
        // The open containers, innermost last: `true` for an object.
        let mut open: Vec<bool> = Vec::new();
        loop {
            // A value starts here.
            self.ws();
            match self.next()? {
                b'{' => {
                    self.ws();
                    if self.peek()? == b'}' {
                        self.i += 1;
                    } else {
                        if open.len() >= max_depth {
                            return None;
                        }
                        open.push(true);
                        self.key()?;
                        continue;
                    }
                }
                b'[' => {
                    self.ws();
                    if self.peek()? == b']' {
                        self.i += 1;
                    } else {
                        if open.len() >= max_depth {
                            return None;
                        }
                        open.push(false);
                        continue;
                    }
                }
                b'"' => self.string_body()?,
                b't' => self.literal(b"rue")?,
                b'f' => self.literal(b"alse")?,
                b'n' => self.literal(b"ull")?,
                b'-' | b'0'..=b'9' if decoded => {
                    self.i -= 1;
                    let start = self.i;
                    self.int()?;
                    if self.i - start > 18 {
                        return None;
                    }
                }
                b'-' | b'0'..=b'9' => {
                    self.i -= 1;
                    self.number()?;
                }
                _ => return None,
            }
            // A value ended: close containers until one continues.
            loop {
                let Some(&object) = open.last() else {
                    return Some(());
                };
                self.ws();
                match self.next()? {
                    b',' => {
                        if object {
                            self.ws();
                            self.key()?;
                        }
                        break;
                    }
                    b'}' if object => {
                        open.pop();
                    }
                    b']' if !object => {
                        open.pop();
                    }
                    _ => return None,
                }
            }
        }
    }

    /// An object key and its colon.
    fn key(&mut self) -> Option<()> {
        self.expect(b'"')?;
        self.string_body()?;
        self.ws();
        self.expect(b':')
    }

    /// A packed row's `data`, checked the way serde decodes it; returns its member count.
    fn packed_data(&mut self, kind: PackedKind) -> Option<u64> {
        self.expect(b'{')?;
        // Keys seen so far (serde rejects a repeated field); more than a row ever has falls back.
        let mut seen: [&[u8]; 8] = [b""; 8];
        let mut seen_len = 0;
        let mut texts = None;
        let mut args = None;
        self.ws();
        if self.peek()? == b'}' {
            return None;
        }
        loop {
            self.ws();
            let key = self.simple_string()?;
            if seen_len == seen.len() || seen[..seen_len].contains(&key) {
                return None;
            }
            seen[seen_len] = key;
            seen_len += 1;
            self.ws();
            self.expect(b':')?;
            self.ws();
            match key {
                b"dt" => self.int_array()?,
                b"texts" => texts = self.string_array_or_null()?,
                b"args" => args = self.string_array_or_null()?,
                b"id" | b"name" => self.string_or_null()?,
                _ => self.value(VALUE_DEPTH, true)?,
            }
            self.ws();
            match self.next()? {
                b',' => continue,
                b'}' => break,
                _ => return None,
            }
        }
        match kind {
            PackedKind::ToolCall => args,
            PackedKind::Text | PackedKind::Reasoning => texts,
        }
    }

    fn surface_op(&mut self) -> Option<Option<SurfaceOp>> {
        match self.peek()? {
            b'n' => {
                self.literal(b"null")?;
                Some(None)
            }
            b'"' => (self.simple_string()? == b"append").then_some(Some(SurfaceOp::Append)),
            b'{' => {
                self.i += 1;
                let field = |c: &mut Self, name: &[u8]| -> Option<()> {
                    c.ws();
                    (c.simple_string()? == name).then_some(())?;
                    c.ws();
                    c.expect(b':')?;
                    c.ws();
                    Some(())
                };
                field(self, b"op")?;
                (self.simple_string()? == b"replace").then_some(())?;
                self.ws();
                self.expect(b',')?;
                field(self, b"start")?;
                let start = self.uint()?;
                self.ws();
                self.expect(b',')?;
                field(self, b"end")?;
                let end = self.uint()?;
                self.ws();
                self.expect(b'}')?;
                Some(Some(SurfaceOp::Replace { start, end }))
            }
            _ => None,
        }
    }

    /// The start of an array, or `null` when `nullable`: what follows.
    fn open_array(&mut self, nullable: bool) -> Option<ArrayStart> {
        if nullable && self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(ArrayStart::Null);
        }
        self.expect(b'[')?;
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            return Some(ArrayStart::Empty);
        }
        Some(ArrayStart::Elements)
    }

    /// `[a, b, …]` with each element read by `element`; `null` when `nullable`.
    fn array(
        &mut self,
        nullable: bool,
        mut element: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<Option<u64>> {
        match self.open_array(nullable)? {
            ArrayStart::Null => return Some(None),
            ArrayStart::Empty => return Some(Some(0)),
            ArrayStart::Elements => {}
        }
        let mut count = 0u64;
        loop {
            self.ws();
            element(self)?;
            count += 1;
            self.ws();
            match self.next()? {
                b',' => continue,
                b']' => return Some(Some(count)),
                _ => return None,
            }
        }
    }

    fn uint_array_or_null(&mut self) -> Option<Option<Vec<u64>>> {
        let mut values = Vec::new();
        let found = self.array(true, |c| {
            values.push(c.uint()?);
            Some(())
        })?;
        Some(found.map(|_| values))
    }

    /// `[i64, …]`, as a packed row's `dt`.
    fn int_array(&mut self) -> Option<()> {
        if let ArrayStart::Empty = self.open_array(false)? {
            return Some(());
        }
        loop {
            // An element starts here. Runs of short plain integers go sixteen bytes at a time.
            if let Some(block) = self.b.get(self.i..self.i + 16) {
                let taken = short_int_run(block.try_into().ok()?)?;
                if taken > 0 {
                    self.i += taken;
                    continue;
                }
            }
            self.int()?;
            match self.next()? {
                b',' => {}
                b']' => return Some(()),
                _ => {
                    // Whitespace around elements is rare; take the general path for it.
                    self.i -= 1;
                    self.ws();
                    match self.next()? {
                        b',' => {}
                        b']' => return Some(()),
                        _ => return None,
                    }
                }
            }
            self.ws();
        }
    }

    /// `["…", …]` or `null`, as a packed row's `texts` or `args`; the element count.
    fn string_array_or_null(&mut self) -> Option<Option<u64>> {
        match self.open_array(true)? {
            ArrayStart::Null => return Some(None),
            ArrayStart::Empty => return Some(Some(0)),
            ArrayStart::Elements => {}
        }
        let mut count = 0u64;
        loop {
            self.expect(b'"')?;
            count += 1;
            // The canonical `","` between elements and the final `"]` are taken inside the scan.
            let mut closed = false;
            let mut passed = 0;
            self.strings(Some(&mut passed), Wide::detect(), |bytes, at| {
                if bytes.get(at + 1..at + 3) == Some(b",\"") {
                    count += 1;
                    AfterQuote::Next(at + 3)
                } else if bytes.get(at + 1) == Some(&b']') {
                    closed = true;
                    AfterQuote::End(at + 2)
                } else {
                    AfterQuote::End(at + 1)
                }
            })?;
            count += passed;
            if closed {
                return Some(Some(count));
            }
            self.ws();
            match self.next()? {
                b',' => {}
                b']' => return Some(Some(count)),
                _ => return None,
            }
            self.ws();
        }
    }

    fn string_or_null(&mut self) -> Option<()> {
        match self.next()? {
            b'n' => self.literal(b"ull"),
            b'"' => self.string_body(),
            _ => None,
        }
    }
}

/// The body of one string as a [`MaskedScan`], so that its block loop is compiled into the
/// AVX-512BW frame where the CPU has it.
struct StringBody<'c, 'a>(&'c mut Cursor<'a>);

impl MaskedScan for StringBody<'_, '_> {
    type Output = Option<()>;

    #[inline(always)]
    fn scan(self, wide: Wide) -> Option<()> {
        self.0.strings(None, wide, |_, at| AfterQuote::End(at + 1))
    }
}

/// What [`Cursor::open_array`] found.
enum ArrayStart {
    Null,
    /// `[]`, read whole.
    Empty,
    /// `[` and the first element next.
    Elements,
}

/// What follows a closing quote in [`Cursor::strings`].
enum AfterQuote {
    /// Another string's body starts at this index.
    Next(usize),
    /// The scan ends; the cursor moves to this index.
    End(usize),
}

/// For sixteen bytes at the start of an array element: how many bytes, up to and including the
/// last comma, hold nothing but short plain integers (`0` or `[1-9][0-9]*`), each followed by a
/// comma. `Some(0)` when the block does not start such a run (a sign, whitespace, a number with
/// no comma after it in the block: the caller reads one element the long way); `None` when the
/// run is invalid JSON (`,,` or a leading zero), which serde rejects too.
fn short_int_run(block: &[u8; 16]) -> Option<usize> {
    let digits = digit_mask(block);
    let commas = eq_mask(block, b',');
    let others = !(digits | commas) & 0xFFFF;
    let before_others = match others {
        0 => 0xFFFF,
        _ => (1u32 << others.trailing_zeros()) - 1,
    };
    let commas = commas & before_others;
    if commas == 0 || digits & 1 == 0 {
        return Some(0);
    }
    let last = 31 - commas.leading_zeros();
    let digits = digits & ((1u32 << last) - 1);
    if commas & (commas >> 1) != 0 {
        return None;
    }
    let starts = digits & !(digits << 1);
    let leading_zeros = eq_mask(block, b'0') & starts;
    if (leading_zeros << 1) & digits != 0 {
        return None;
    }
    // Each number lies between two commas of the block: at most 15 digits, within `i64`.
    Some(last as usize + 1)
}

/// The length of the escape sequence at `bytes[at]` (a backslash), if valid.
#[inline(always)]
fn escape_len(bytes: &[u8], at: usize) -> Option<usize> {
    match *bytes.get(at + 1)? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(2),
        b'u' => {
            let hex = bytes.get(at + 2..at + 6)?;
            let mut unit = 0u32;
            for &h in hex {
                unit = unit * 16 + (h as char).to_digit(16)?;
            }
            // Surrogate pairs have rules of their own: leave them to serde.
            (!(0xD800..=0xDFFF).contains(&unit)).then_some(6)
        }
        _ => None,
    }
}

/// The length of the UTF-8 character starting at `bytes[at]` (a non-ASCII byte), if valid.
fn utf8_len(bytes: &[u8], at: usize) -> Option<usize> {
    let width = match bytes[at] {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    };
    let end = (at + 4).min(bytes.len());
    let valid = match std::str::from_utf8(&bytes[at..end]) {
        Ok(text) => text.len(),
        Err(e) => e.valid_up_to(),
    };
    // `valid` covers the first character whole only if it decoded.
    (valid >= width).then_some(width)
}

/// The block step of an array scan ([`Cursor::strings`] with `elements`): `flagged`, the block's
/// flagged bytes from where the scan stands (inside a string), holding only quotes, which
/// alternate closing and opening. When every closing quote but possibly the last one is
/// followed by exactly `,` and an opening quote, that stretch is a run of plain string elements:
/// the answer is how many elements it closes and the bits left to the byte-by-byte loop (the
/// last quote, if it closes, whatever follows it). `None`, and the loop takes the whole block,
/// for anything else (an escape, a control or non-ASCII byte, other separators, the array's
/// end).
#[inline(always)]
fn separated_run(block: &[u8; 64], flagged: u64) -> Option<(u32, u64)> {
    let quotes = eq_mask64(block, b'"') & flagged;
    if quotes != flagged || quotes == 0 {
        return None;
    }
    // Bit k: an odd number of quotes at or before k, i.e. the quote at k (if any) closes.
    let mut odd = quotes;
    for shift in [1, 2, 4, 8, 16, 32] {
        odd ^= odd << shift;
    }
    let closing = quotes & odd;
    let opening = quotes & !odd;
    let last = 1u64 << (63 - quotes.leading_zeros());
    let tail = closing & last;
    let paired = closing & !tail;
    let separated = opening == paired << 2 && (paired << 1) & !eq_mask64(block, b',') == 0;
    separated.then_some((paired.count_ones(), tail))
}

/// [`eq_mask`] over sixty-four bytes.
#[inline(always)]
fn eq_mask64(block: &[u8; 64], byte: u8) -> u64 {
    let (chunks, _) = block.as_chunks::<16>();
    chunks.iter().enumerate().fold(0, |mask, (k, chunk)| {
        mask | u64::from(eq_mask(chunk, byte)) << (16 * k)
    })
}

/// Bits `n` and up of a 64-bit mask (none when `n >= 64`).
#[inline(always)]
fn bits_from(n: usize) -> u64 {
    u64::MAX.checked_shl(n as u32).unwrap_or(0)
}

/// The index of the first `byte` in `haystack` (the `memchr` crate: SIMD, AVX2 where the CPU
/// has it, chosen at run time).
pub fn find_byte(haystack: &[u8], byte: u8) -> Option<usize> {
    memchr::memchr(byte, haystack)
}

/// The fast step of a string scan over one block, for text whose escapes are all `\n` or
/// `\"` (what prose and most tool output hold), decided from the block's masks without a loop
/// over its flagged bytes: `Some(Some(k))` when the string closes at byte `k` of the block,
/// `Some(None)` when the whole block (from `live`) is plain string text, and `None` when the
/// block holds anything else before its closing quote (another escape, two backslashes in a
/// row, a backslash as the last byte, a control or non-ASCII byte): the byte-by-byte loop takes
/// the block then.
#[inline(always)]
fn plain_block(masks: StringMasks, live: u64) -> Option<Option<u32>> {
    let backslash = masks.backslash & live;
    // Valid only while no backslash follows another (checked below, up to the closing quote).
    let escaped = backslash << 1;
    let closing = masks.quote & live & !escaped;
    // The bits before the closing quote (all of them while the string goes on).
    let within = if closing == 0 {
        u64::MAX
    } else {
        (closing & closing.wrapping_neg()) - 1
    };
    let plain = backslash & (backslash << 1) & within == 0
        && (backslash & within) >> 63 == 0
        && masks.outside & live & within == 0
        && escaped & within & !(masks.quote | masks.n) == 0;
    plain.then(|| (closing != 0).then(|| closing.trailing_zeros()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Record;
    use crate::test_rng::TestRng;

    fn agrees(line: &str) -> Option<Envelope<'_>> {
        let skimmed = skim(line.as_bytes());
        if let Some(envelope) = &skimmed {
            let record: Record = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("skim accepted what serde rejects: {line}: {e}"));
            assert_eq!(record.first_seq(), envelope.first_seq, "{line}");
            assert_eq!(record.seq_count(), envelope.seq_count, "{line}");
            assert_eq!(record.kind(), envelope.kind, "{line}");
            if let Record::Event(event) = &record {
                assert_eq!(event.time, envelope.time);
                assert_eq!(event.surface_op, envelope.surface_op);
                assert_eq!(event.source_event_seqs, envelope.source_event_seqs);
            }
        }
        skimmed
    }

    #[test]
    fn canonical_lines_are_skimmed() {
        let e = agrees(r#"{"type":"tool/result","seq":15,"time":0,"data":{"turn":1,"content":[{"type":"text","text":"a\nb \"q\" \u00e9 é"}],"isError":false},"sourceEventSeqs":[13],"surfaceOp":"append"}"#).unwrap();
        assert_eq!((e.kind, e.first_seq, e.seq_count), ("tool/result", 15, 1));
        assert_eq!(e.surface_op, Some(SurfaceOp::Append));
        let e = agrees(r#"{"type":"user/message","seq":3,"time":-5,"data":{},"surfaceOp":{"op":"replace","start":0,"end":2}}"#).unwrap();
        assert_eq!(e.surface_op, Some(SurfaceOp::Replace { start: 0, end: 2 }));
        let e = agrees(r#"{"type":"text-chunks","seq0":5,"time0":17,"data":{"turn":1,"step":1,"index":0,"dt":[1,-2],"texts":["a","b","c"]}}"#).unwrap();
        assert_eq!((e.first_seq, e.seq_count, e.packed), (5, 3, true));
        let e = agrees(r#"{"type":"tool-call-chunks","seq0":0,"time0":1,"data":{"id":"c","name":null,"args":["{","}"],"texts":null}}  "#).unwrap();
        assert_eq!(e.seq_count, 2);
        assert!(agrees(
            r#"{"type":"turn/end","seq":9,"time":1,"data":[1,2.5e-3,true,null,{"a":[]}]}"#
        )
        .is_some());
        // Key order is free (the reader only skims lines that start with `type`).
        assert!(agrees(r#"{"seq":1, "type":"turn/end","time":1,"data":{}}"#).is_some());
    }

    #[test]
    fn anything_unusual_falls_back() {
        for line in [
            r#"{"type":"turn/end","seq":1,"time":1,"data":{},"extra":1}"#.to_string(),
            r#"{"type":"turn/end","seq":1.0,"time":1,"data":{}}"#.into(),
            r#"{"type":"turn/end","seq":-1,"time":1,"data":{}}"#.into(),
            r#"{"type":"turn/end","seq":01,"time":1,"data":{}}"#.into(),
            r#"{"type":"turn/end","seq":1,"time":1,"data":{},}"#.into(),
            r#"{"type":"turn/end","seq":1,"time":1,"data":{"a":1,}}"#.into(),
            r#"{"type":"turn/end","seq":1,"time":1,"data":"\ud800"}"#.into(),
            r#"{"type":"turn/end","seq":1,"time":1,"data":"\x"}"#.into(),
            "{\"type\":\"turn/end\",\"seq\":1,\"time\":1,\"data\":\"\t\"}".into(),
            r#"{"type":"tool/result","seq":1,"time":1,"data":{}}"#.into(),
            r#"{"type":"turn/end","seq":1,"seq":2,"time":1,"data":{}}"#.into(),
            r#"{"type":"turn/end","seq":1,"time":1,"data":{}} x"#.into(),
            r#"{"type":"turn/end","seq":1,"time":1,"data":{}"#.into(),
            r#"{"type":"text-chunks","seq0":1,"time0":1,"data":{"texts":[1]}}"#.into(),
            r#"{"type":"text-chunks","seq0":1,"time0":1,"data":{"args":["a"]}}"#.into(),
            r#"{"type":"text-chunks","seq0":1,"time0":1,"data":{"texts":["a"],"texts":["b"]}}"#
                .into(),
            format!(
                r#"{{"type":"text-chunks","seq0":1,"time0":1,"data":{{"turn":{}1{},"texts":[]}}}}"#,
                "[".repeat(200),
                "]".repeat(200)
            ),
            r#"{"type":"turn/end","seq":18446744073709551616,"time":1,"data":{}}"#.into(),
            // Found by the long differential run: serde reads `-0` as a float.
            r#"{"type":"text-chunks","seq0":1,"time0":1,"data":{"dt":[-0],"texts":["a","b"]}}"#
                .into(),
            r#"{"type":"turn/end","seq":1,"time":-0,"data":{}}"#.into(),
            // Found by the `skim_vs_serde` fuzz target: a number out of f64 range in a packed
            // row's unknown field (decoded by serde, unlike an event's raw `data`).
            r#"{"type":"text-chunks","seq0":1,"time0":1,"data":{"dp":[2E22220],"texts":["a"]}}"#
                .into(),
            r#"{"type":"text-chunks","seq0":1,"time0":1,"data":{"turn":0.5,"texts":["a"]}}"#.into(),
        ] {
            assert!(agrees(&line).is_none(), "{line}");
        }
        // Deep nesting inside `data` is fine for serde's raw values, and for skim.
        let deep = format!(
            r#"{{"type":"turn/end","seq":1,"time":1,"data":{}{}}}"#,
            "[".repeat(5000),
            "]".repeat(5000)
        );
        assert!(agrees(&deep).is_some());
        assert!(skim(b"{\"type\":\"turn/end\",\"seq\":1,\"time\":1,\"data\":\"\xff\"}").is_none());
    }

    /// The sixteen-byte integer runs and the in-scan string separators, at every alignment:
    /// packed rows built from pieces that are valid, invalid or merely unusual, each compared
    /// with serde through `agrees`.
    #[test]
    fn packed_arrays_agree_with_serde_at_every_alignment() {
        let ints = [
            "0",
            "7",
            "10",
            "05",
            "-3",
            "-0",
            "123456789012345",
            "1234567890123456789",
            "99999999999999999999",
            "1.5",
            "2e3",
            " 4",
            "4 ",
            "",
            "00",
        ];
        let texts = [
            r#""a""#,
            r#""""#,
            r#""\"""#,
            r#""x\\""#,
            r#""\u00e9""#,
            r#""\ud800""#,
            r#""é""#,
            r#""tab\t""#,
            "\"raw\u{1}\"",
            r#""q\",\"""#,
            r#" "s" "#,
            "1",
            r#""a","#,
            r#"x""#,
        ];
        let mut rng = TestRng::new(3);
        let mut accepted = 0;
        for round in 0..40_000 {
            let pick = |rng: &mut TestRng, pool: &[&str], valid: usize| {
                (0..rng.below(40))
                    .map(|_| match rng.below(10) {
                        0 => pool[rng.below(pool.len())],
                        _ => pool[rng.below(valid)],
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let dt = pick(&mut rng, &ints, 3);
            let pieces = pick(&mut rng, &texts, 3);
            // Shift the arrays against the sixteen- and sixty-four-byte blocks.
            let pad = "x".repeat(round % 67);
            let line = format!(
                r#"{{"type":"text-chunks","seq0":1,"time0":2,"data":{{"turn":"{pad}","dt":[{dt}],"texts":[{pieces}]}}}}"#
            );
            accepted += usize::from(agrees(&line).is_some());
        }
        assert!(accepted > 5_000, "only {accepted} rows were skimmed");
        // Specific shapes at a block edge.
        for dt in ["1,,2", "1,01", "01,1", "1,2,3,4,5,6,7,8,9,10,11,012"] {
            let line = format!(
                r#"{{"type":"text-chunks","seq0":1,"time0":2,"data":{{"dt":[{dt}],"texts":["a"]}}}}"#
            );
            assert!(agrees(&line).is_none(), "{line}");
        }
    }

    /// The block step's shortcut at every alignment: strings of escapes, quotes, controls and
    /// non-ASCII bytes around a 64-byte edge, each skimmed and compared with serde.
    #[test]
    fn string_bodies_agree_with_serde_at_every_alignment() {
        let pieces = [
            "a", "\\n", "\\\"", "\\\\", "\\t", "\\u00e9", "\\ud800", "é", "\\x", "\\", "\"",
            "\u{1}", "n", " ",
        ];
        let mut rng = TestRng::new(5);
        let mut accepted = 0;
        for round in 0..20_000 {
            let text: String = (0..rng.below(60))
                .map(|_| match rng.below(8) {
                    0 => pieces[rng.below(pieces.len())],
                    1..=3 => pieces[1 + rng.below(2)],
                    _ => "abc",
                })
                .collect();
            let pad = "x".repeat(round % 131);
            let line = format!(
                r#"{{"type":"tool/result","seq":1,"time":2,"data":{{"k":"{pad}","t":"{text}"}},"surfaceOp":"append"}}"#
            );
            accepted += usize::from(agrees(&line).is_some());
        }
        assert!(accepted > 5_000, "only {accepted} lines were skimmed");
    }

    #[test]
    fn peek_and_find() {
        assert_eq!(
            peek_kind(br#"{"type":"tool/result","seq":1"#),
            Some("tool/result")
        );
        assert_eq!(peek_kind(br#"{"type":"a\"b"}"#), None);
        assert_eq!(peek_kind(br#"{ "type":"a"}"#), None);
        let hay = b"0123456789abcdef\nxyz";
        assert_eq!(find_byte(hay, b'\n'), Some(16));
        assert_eq!(find_byte(hay, b'z'), Some(19));
        assert_eq!(find_byte(hay, b'!'), None);
        for i in 0..40 {
            let mut v = vec![b'a'; 40];
            v[i] = b'\n';
            assert_eq!(find_byte(&v, b'\n'), Some(i));
        }
    }
}
