//! The records of a CSV body, read by csv-core.
//!
//! Building a csv-core reader works out its state machine for the delimiter, and that costs
//! more than reading a short body: an insert of a row or two would spend most of its decoding
//! there. So each thread keeps the readers it built, one per delimiter, and a body takes one and
//! gives it back reset. The csv crate's reader builds its own every time and cannot be handed a
//! built one, so it is not used. A kept reader is moved, never cloned: csv-core's `Clone` of a
//! reader does not copy its state machine.

use std::cell::RefCell;

use csv_core::{ReadRecordResult, Reader, ReaderBuilder};

/// The bytes a record's fields are first given room for, grown as a record needs.
const FIELD_BYTES: usize = 256;

/// The fields a record is first given room for.
const FIELDS: usize = 16;

/// One record of a body, borrowed from its [`Records`] until the next one is read.
#[derive(Debug)]
pub(crate) struct Record<'r> {
    /// The 1-based line of the body the record starts on.
    pub(crate) line: usize,
    /// The fields' bytes, one after another.
    bytes: &'r [u8],
    /// Where each field ends in `bytes`.
    ends: &'r [usize],
}

impl<'r> Record<'r> {
    /// How many fields the record has.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// The fields, unquoted.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &'r [u8]> + use<'r> {
        let (bytes, ends) = (self.bytes, self.ends);
        let starts = std::iter::once(0).chain(ends.iter().copied());
        starts
            .zip(ends)
            .map(move |(start, &end)| &bytes[start..end])
    }
}

/// The records of a body, in order, read into buffers kept from one record to the next.
/// Reading CSV from bytes cannot fail: any text is some records, and a record of the wrong
/// width is for the caller to refuse.
pub(crate) struct Records<'a> {
    /// The reader, until it is given back to the thread.
    reader: Option<Reader>,
    delimiter: u8,
    /// What is left of the body.
    input: &'a [u8],
    done: bool,
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl<'a> Records<'a> {
    /// The records of `body`, whose fields are separated by `delimiter`.
    pub(crate) fn new(body: &'a [u8], delimiter: u8) -> Self {
        Self {
            reader: Some(take_reader(delimiter)),
            delimiter,
            input: body,
            done: false,
            bytes: vec![0; FIELD_BYTES],
            ends: vec![0; FIELDS],
        }
    }

    /// The next record, or `None` at the body's end.
    pub(crate) fn next_record(&mut self) -> Option<Record<'_>> {
        let reader = self.reader.as_mut().filter(|_| !self.done)?;
        // Blank lines before a record: the reader would skip them too, but counted here the
        // record's line is the one it starts on.
        let blank = self
            .input
            .iter()
            .take_while(|b| matches!(b, b'\n' | b'\r'))
            .count();
        let newlines = self.input[..blank].iter().filter(|&&b| b == b'\n').count();
        self.input = &self.input[blank..];
        reader.set_line(reader.line() + newlines as u64);
        let line = usize::try_from(reader.line()).unwrap_or(usize::MAX);
        let (mut written, mut ended) = (0, 0);
        loop {
            // With the body all read, `input` is empty, which tells the reader the body ended.
            let (result, read, wrote, found) = reader.read_record(
                self.input,
                &mut self.bytes[written..],
                &mut self.ends[ended..],
            );
            self.input = &self.input[read..];
            written += wrote;
            ended += found;
            match result {
                ReadRecordResult::InputEmpty => {}
                ReadRecordResult::OutputFull => self.bytes.resize(self.bytes.len() * 2, 0),
                ReadRecordResult::OutputEndsFull => self.ends.resize(self.ends.len() * 2, 0),
                ReadRecordResult::Record => {
                    return Some(Record {
                        line,
                        bytes: &self.bytes[..written],
                        ends: &self.ends[..ended],
                    });
                }
                ReadRecordResult::End => {
                    self.done = true;
                    return None;
                }
            }
        }
    }
}

impl Drop for Records<'_> {
    fn drop(&mut self) {
        if let Some(reader) = self.reader.take() {
            give_back(self.delimiter, reader);
        }
    }
}

thread_local! {
    /// The readers this thread built and that no body holds, by delimiter.
    static KEPT: RefCell<Vec<(u8, Reader)>> = const { RefCell::new(Vec::new()) };
}

/// A reader for `delimiter` at the start of a body: one this thread kept, or a new one.
fn take_reader(delimiter: u8) -> Reader {
    let kept = KEPT.with(|kept| {
        let mut kept = kept.borrow_mut();
        let found = kept.iter().position(|(d, _)| *d == delimiter)?;
        Some(kept.swap_remove(found).1)
    });
    kept.unwrap_or_else(|| ReaderBuilder::new().delimiter(delimiter).build())
}

/// Keeps `reader`, reset, for the thread's next body with `delimiter`, unless the thread has one
/// for it already. There are at most 256 delimiters, so every one is kept.
fn give_back(delimiter: u8, mut reader: Reader) {
    reader.reset();
    KEPT.with(|kept| {
        let mut kept = kept.borrow_mut();
        if kept.iter().all(|(d, _)| *d != delimiter) {
            kept.push((delimiter, reader));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(body: &str, delimiter: u8) -> Vec<(usize, Vec<String>)> {
        let mut records = Records::new(body.as_bytes(), delimiter);
        let mut read = Vec::new();
        while let Some(record) = records.next_record() {
            let fields = record
                .iter()
                .map(|f| String::from_utf8(f.to_vec()).unwrap())
                .collect();
            read.push((record.line, fields));
        }
        read
    }

    /// Quoted fields are unquoted, blank lines hold no record, a record's line is where it
    /// starts, and the last record needs no line end.
    #[test]
    fn records_are_unquoted_with_the_line_they_start_on() {
        let body = "a,\"b,\"\"c\"\"\"\n\n\"multi\nline\",2\r\nlast";
        let expected = vec![
            (1, vec!["a".to_owned(), "b,\"c\"".to_owned()]),
            (3, vec!["multi\nline".to_owned(), "2".to_owned()]),
            (5, vec!["last".to_owned()]),
        ];
        assert_eq!(read(body, b','), expected);
    }

    /// A kept reader starts each body afresh, whatever the last one left it in, even a body
    /// read only in part; each delimiter has its own.
    #[test]
    fn each_body_starts_afresh_with_its_delimiter() {
        assert_eq!(
            read("\"open,1\nx", b','),
            vec![(1, vec!["open,1\nx".to_owned()])]
        );
        let mut cut_short = Records::new(b"a\nb\nc\n", b',');
        cut_short.next_record();
        assert_eq!(cut_short.next_record().map(|r| r.line), Some(2));
        drop(cut_short);
        assert_eq!(read("x", b','), vec![(1, vec!["x".to_owned()])]);
        for _ in 0..2 {
            assert_eq!(
                read("a;b\n", b';'),
                vec![(1, vec!["a".to_owned(), "b".to_owned()])]
            );
            assert_eq!(read("a;b\n", b','), vec![(1, vec!["a;b".to_owned()])]);
        }
    }

    /// Records longer than the room first given grow it; a body's byte order mark is not a
    /// field's.
    #[test]
    fn long_records_grow_and_a_byte_order_mark_is_dropped() {
        let long = "x".repeat(3 * FIELD_BYTES);
        let fields: Vec<String> = (0..3 * FIELDS).map(|i| i.to_string()).collect();
        let body = format!("\u{FEFF}{long}\n{}\n", fields.join(","));
        let records = read(&body, b',');
        assert_eq!(records[0], (1, vec![long]));
        assert_eq!(records[1], (2, fields));
        assert!(read("", b',').is_empty());
    }
}
