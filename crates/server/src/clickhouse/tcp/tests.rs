//! The packets as real clients send them: Debian's `clickhouse-client` 18.16 (revision 54412,
//! settings in their binary layout) and a client at sluice's revision (settings as strings).

use super::packets::*;

fn concat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn text(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, s);
    out
}

/// `Hello` from `clickhouse-client` 18.16, as it was captured.
fn hello_18_16() -> Vec<u8> {
    concat(&[
        &text("ClickHouse client"),
        &[18, 16, 0x8c, 0xa9, 0x03],
        &text(""),
        &text("default"),
        &text(""),
    ])
}

/// Its `Query` for `--query "INSERT INTO s FORMAT CSV"`, with client info and no settings.
fn query_18_16() -> Vec<u8> {
    concat(&[
        &text(""),
        &[1],
        &text(""),
        &text(""),
        &text("0.0.0.0:0"),
        &[1],
        &text(""),
        &text("vm"),
        &text("ClickHouse client"),
        &[18, 16, 0x8c, 0xa9, 0x03],
        &text(""),
        &[1],
        &[0],
        &[2, 1],
        &text("INSERT INTO s FORMAT CSV"),
    ])
}

#[test]
fn an_old_clients_hello_and_query_are_read_at_its_revision() {
    let hello = read_hello(&mut Reader::new(&hello_18_16())).unwrap();
    assert_eq!(
        (
            hello.client_name.as_str(),
            hello.version,
            hello.revision,
            hello.user.as_str()
        ),
        ("ClickHouse client", (18, 16), 54412, "default")
    );
    assert_eq!(hello.revision(), 54412);
    let bytes = query_18_16();
    let mut reader = Reader::new(&bytes);
    let query = read_query(&mut reader, hello.revision()).unwrap();
    assert_eq!(query.text, "INSERT INTO s FORMAT CSV");
    assert!(query.compression);
    assert!(query.settings.is_empty());
    assert_eq!(reader.pos(), bytes.len());
    for end in 0..bytes.len() {
        let read = read_query(&mut Reader::new(&bytes[..end]), 54412);
        assert_eq!(read, Err(PacketError::Incomplete), "cut at {end}");
    }
}

#[test]
fn settings_are_read_as_strings_or_in_the_binary_layout_of_the_ones_sluice_honours() {
    let info = [
        &[1_u8][..],
        &text(""),
        &text(""),
        &text(""),
        &[1],
        &text("u"),
        &text("h"),
        &text("c"),
        &[25, 8, 0xdd, 0xa9, 0x03],
        &text(""),
        &[1],
    ]
    .concat();
    let as_strings = concat(&[
        &text("q1"),
        &info,
        &text("async_insert"),
        &[2],
        &text("1"),
        &text("wait_for_async_insert"),
        &[0],
        &text("0"),
        &text(""),
        &[2, 0],
        &text("INSERT INTO t VALUES"),
    ]);
    let query = read_query(&mut Reader::new(&as_strings), SERVER_REVISION).unwrap();
    assert_eq!(query.id, "q1");
    assert!(!query.compression);
    assert_eq!(
        query.settings,
        [
            ("async_insert".to_owned(), "1".to_owned()),
            ("wait_for_async_insert".to_owned(), "0".to_owned())
        ]
    );

    let old = |settings: &[u8]| {
        let bytes = concat(&[
            &text(""),
            &[0],
            settings,
            &text(""),
            &[2, 0],
            &text("INSERT INTO t VALUES"),
        ]);
        read_query(&mut Reader::new(&bytes), 54412)
    };
    let skip = concat(&[
        &text("input_format_skip_unknown_fields"),
        &[1],
        &text("format_csv_delimiter"),
        &text(";"),
    ]);
    assert_eq!(
        old(&skip).unwrap().settings,
        [
            (
                "input_format_skip_unknown_fields".to_owned(),
                "1".to_owned()
            ),
            ("format_csv_delimiter".to_owned(), ";".to_owned())
        ]
    );
    let PacketError::Bad(message) = old(&concat(&[&text("max_threads"), &[4]])).unwrap_err() else {
        panic!("an unknown binary setting is refused");
    };
    assert!(
        message.contains("'max_threads'") && message.contains("54429"),
        "{message}"
    );
}

#[test]
fn the_server_hello_carries_what_the_clients_revision_reads() {
    let mut old = Vec::new();
    write_hello(&mut old, 54412, "sluice");
    let mut reader = Reader::new(&old);
    assert_eq!(reader.varuint(), Ok(0));
    assert_eq!(reader.string().unwrap(), "ClickHouse");
    let numbers: Vec<u64> = (0..3).map(|_| reader.varuint().unwrap()).collect();
    assert_eq!(numbers, [25, 8, SERVER_REVISION]);
    assert_eq!(reader.string().unwrap(), "UTC");
    assert_eq!(reader.string().unwrap(), "sluice");
    assert_eq!(reader.varuint(), Ok(1));
    assert!(reader.rest().is_empty());

    let mut ancient = Vec::new();
    write_hello(&mut ancient, 54000, "sluice");
    assert_eq!(
        ancient.len(),
        old.len() - text("UTC").len() - text("sluice").len() - 1
    );
}

#[test]
fn blocks_are_framed_with_their_block_info() {
    let mut out = Vec::new();
    write_data(&mut out, &[0, 0], false);
    let mut reader = Reader::new(&out);
    assert_eq!(reader.varuint(), Ok(1));
    assert_eq!(reader.string().unwrap(), "");
    skip_block_info(&mut reader).unwrap();
    assert_eq!(reader.rest(), [0, 0]);
    let unknown_field = [3_u8, 0];
    assert!(matches!(
        skip_block_info(&mut Reader::new(&unknown_field)),
        Err(PacketError::Bad(_))
    ));

    let mut compressed = Vec::new();
    write_data(&mut compressed, &[0, 0], true);
    let frame = &compressed[2..];
    let raw = crate::clickhouse::compressed::decompress_blocks(frame, 1024).unwrap();
    assert_eq!(&raw[raw.len() - 2..], [0, 0]);
}

#[test]
fn an_exception_is_code_name_message_trace_and_no_nesting() {
    let mut out = Vec::new();
    write_exception(&mut out, 60, "Table default.x does not exist");
    assert_eq!(out[0], 2, "the Exception packet type");
    let code = i32::from_le_bytes(out[1..5].try_into().unwrap());
    assert_eq!(code, 60);
    let mut reader = Reader::new(&out[5..]);
    assert_eq!(reader.string().unwrap(), "DB::Exception");
    assert_eq!(
        reader.string().unwrap(),
        "DB::Exception: Table default.x does not exist"
    );
    assert_eq!(reader.string().unwrap(), "");
    assert_eq!(reader.u8(), Ok(0));
}
