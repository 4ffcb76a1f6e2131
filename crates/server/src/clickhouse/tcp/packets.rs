//! The native protocol's packets: what clients send, read from bytes, and what sluice answers,
//! written to bytes. Pure: the connection hands in what it has received so far.
//!
//! Every packet starts with its type as a LEB128 number. Strings are a LEB128 length and the
//! bytes. Which fields a packet carries depends on the protocol revision both sides speak: the
//! lower of the client's and [`SERVER_REVISION`]. Reading a packet that has not fully arrived
//! yet gives [`PacketError::Incomplete`], and the connection reads more and tries again.

use std::fmt;

/// The revision sluice speaks. Clients at or above it send settings as strings and no field
/// of a later revision: no OpenTelemetry context, no interserver secret, no custom
/// serialization flag in blocks, no handshake addendum. Older clients, such as Debian's
/// `clickhouse-client` 18.16 at 54412, speak their own revision.
pub const SERVER_REVISION: u64 = 54429;

/// Client info in the `Query` packet.
const WITH_CLIENT_INFO: u64 = 54032;
/// The server's time zone in its `Hello`.
const WITH_SERVER_TIMEZONE: u64 = 54058;
/// A quota key in the client info.
const WITH_QUOTA_KEY_IN_CLIENT_INFO: u64 = 54060;
/// The server's display name in its `Hello`.
const WITH_SERVER_DISPLAY_NAME: u64 = 54372;
/// The patch number of versions, in both `Hello`s and the client info.
const WITH_VERSION_PATCH: u64 = 54401;
/// Written rows and bytes in `Progress`.
const WITH_CLIENT_WRITE_INFO: u64 = 54420;
/// Settings as name, flags and text; before, each in its own binary layout.
const WITH_SETTINGS_AS_STRINGS: u64 = 54429;

/// The version sluice reports, as in the HTTP door's `version()`.
const VERSION: (u64, u64, u64) = (25, 8, 1);

/// Packet types a client sends.
mod client {
    pub(super) const HELLO: u64 = 0;
    pub(super) const QUERY: u64 = 1;
    pub(super) const DATA: u64 = 2;
    pub(super) const CANCEL: u64 = 3;
    pub(super) const PING: u64 = 4;
}

/// Packet types sluice sends.
mod server {
    pub(super) const HELLO: u64 = 0;
    pub(super) const DATA: u64 = 1;
    pub(super) const EXCEPTION: u64 = 2;
    pub(super) const PROGRESS: u64 = 3;
    pub(super) const PONG: u64 = 4;
    pub(super) const END_OF_STREAM: u64 = 5;
}

/// The longest string sluice reads in a packet's fields (names, the query text): longer is a
/// corrupt or hostile packet.
const MAX_FIELD_LEN: u64 = 1 << 20;

/// Why a packet could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PacketError {
    /// The bytes end inside the packet: read more and try again.
    Incomplete,
    /// The packet is malformed or not one sluice reads.
    Bad(String),
}

impl fmt::Display for PacketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Incomplete => write!(f, "the packet ends early"),
            Self::Bad(message) => write!(f, "{message}"),
        }
    }
}

type Read<T> = Result<T, PacketError>;

fn bad<T>(message: impl Into<String>) -> Read<T> {
    Err(PacketError::Bad(message.into()))
}

/// Bytes received, read front to back.
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, pos: 0 }
    }

    /// Bytes read so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        &self.bytes[self.pos..]
    }

    fn take(&mut self, len: u64) -> Read<&'a [u8]> {
        let end = usize::try_from(len)
            .ok()
            .and_then(|len| self.pos.checked_add(len))
            .ok_or(PacketError::Incomplete)?;
        let taken = self
            .bytes
            .get(self.pos..end)
            .ok_or(PacketError::Incomplete)?;
        self.pos = end;
        Ok(taken)
    }

    /// Moves past `len` bytes.
    pub fn skip(&mut self, len: usize) -> Read<()> {
        self.take(len as u64).map(drop)
    }

    /// One byte.
    pub fn u8(&mut self) -> Read<u8> {
        Ok(self.take(1)?[0])
    }

    fn i32(&mut self) -> Read<i32> {
        let bytes = self.take(4)?;
        Ok(i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// A LEB128 number (ClickHouse's `VarUInt`).
    pub fn varuint(&mut self) -> Read<u64> {
        let mut value = 0_u64;
        for shift in (0..64).step_by(7) {
            let byte = self.u8()?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        bad("a number runs past ten bytes")
    }

    /// A length-prefixed UTF-8 string of at most `MAX_FIELD_LEN` bytes.
    pub fn string(&mut self) -> Read<String> {
        let len = self.varuint()?;
        if len > MAX_FIELD_LEN {
            return bad(format!(
                "a {len}-byte string field is longer than sluice reads"
            ));
        }
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).or_else(|_| bad("a string field is not valid UTF-8"))
    }
}

/// The client's `Hello`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The client's name for itself (`ClickHouse client`, `python-driver`).
    pub client_name: String,
    /// The client's version: major, minor.
    pub version: (u64, u64),
    /// The client's protocol revision.
    pub revision: u64,
    /// The default database; sluice has one namespace and ignores it.
    pub database: String,
    /// The ClickHouse user, checked against the table's rule at each insert.
    pub user: String,
    /// The user's password, sent in the clear: TLS protects it.
    pub password: String,
}

impl Hello {
    /// The revision both sides speak.
    pub fn revision(&self) -> u64 {
        self.revision.min(SERVER_REVISION)
    }
}

/// A packet from a client, its data block (if any) not read yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientPacket {
    /// The first packet of a connection.
    Hello(Hello),
    /// A statement.
    Query(Query),
    /// A data packet's header: the temporary table its block is for (empty for an insert's).
    Data {
        /// The table's name.
        table: String,
    },
    /// Stop the query in flight.
    Cancel,
    /// Answered with `Pong`.
    Ping,
}

/// Reads the next packet from a client speaking `revision`.
pub fn read_client_packet(reader: &mut Reader<'_>, revision: u64) -> Read<ClientPacket> {
    Ok(match reader.varuint()? {
        client::HELLO => ClientPacket::Hello(read_hello(reader)?),
        client::QUERY => ClientPacket::Query(read_query(reader, revision)?),
        client::DATA => ClientPacket::Data {
            table: reader.string()?,
        },
        client::CANCEL => ClientPacket::Cancel,
        client::PING => ClientPacket::Ping,
        other => return bad(format!("unexpected packet {other} from the client")),
    })
}

/// Reads a `Hello`, its type already read.
pub fn read_hello(reader: &mut Reader<'_>) -> Read<Hello> {
    Ok(Hello {
        client_name: reader.string()?,
        version: (reader.varuint()?, reader.varuint()?),
        revision: reader.varuint()?,
        database: reader.string()?,
        user: reader.string()?,
        password: reader.string()?,
    })
}

/// A `Query` packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The client's id for the query.
    pub id: String,
    /// The settings it changes, by name, as text.
    pub settings: Vec<(String, String)>,
    /// Whether its data blocks, both ways, are in ClickHouse's compressed blocks.
    pub compression: bool,
    /// The statement.
    pub text: String,
}

/// Reads a `Query` packet, its type already read, at `revision`.
pub fn read_query(reader: &mut Reader<'_>, revision: u64) -> Read<Query> {
    let id = reader.string()?;
    if revision >= WITH_CLIENT_INFO {
        skip_client_info(reader, revision)?;
    }
    let settings = if revision >= WITH_SETTINGS_AS_STRINGS {
        read_settings(reader)?
    } else {
        read_binary_settings(reader)?
    };
    let _stage = reader.varuint()?;
    let compression = match reader.varuint()? {
        0 => false,
        1 => true,
        other => return bad(format!("unknown compression flag {other}")),
    };
    let text = reader.string()?;
    Ok(Query {
        id,
        settings,
        compression,
        text,
    })
}

/// Moves past the client info: who sends the query, from where, with which client.
fn skip_client_info(reader: &mut Reader<'_>, revision: u64) -> Read<()> {
    const TCP: u8 = 1;
    const HTTP: u8 = 2;
    let kind = reader.u8()?;
    if kind == 0 {
        return Ok(());
    }
    for _ in ["initial user", "initial query id", "initial address"] {
        reader.string()?;
    }
    let interface = reader.u8()?;
    match interface {
        TCP => {
            for _ in ["os user", "hostname", "client name"] {
                reader.string()?;
            }
            for _ in ["major", "minor", "revision"] {
                reader.varuint()?;
            }
        }
        HTTP => {
            reader.u8()?;
            reader.string()?;
        }
        other => return bad(format!("unknown client interface {other}")),
    }
    if revision >= WITH_QUOTA_KEY_IN_CLIENT_INFO {
        reader.string()?;
    }
    if interface == TCP && revision >= WITH_VERSION_PATCH {
        reader.varuint()?;
    }
    Ok(())
}

/// Settings as strings: name, flags, value, until an empty name.
fn read_settings(reader: &mut Reader<'_>) -> Read<Vec<(String, String)>> {
    let mut settings = Vec::new();
    loop {
        let name = reader.string()?;
        if name.is_empty() {
            return Ok(settings);
        }
        let _flags = reader.varuint()?;
        settings.push((name, reader.string()?));
    }
}

/// Settings as clients before revision 54429 send them: each value in its setting's own
/// layout, which only the setting's type tells. sluice reads those of the settings it honours
/// and refuses the rest.
fn read_binary_settings(reader: &mut Reader<'_>) -> Read<Vec<(String, String)>> {
    const NUMBERS: [&str; 4] = [
        "input_format_skip_unknown_fields",
        "input_format_null_as_default",
        "max_partitions_per_insert_block",
        "max_insert_block_size",
    ];
    let mut settings = Vec::new();
    loop {
        let name = reader.string()?;
        if name.is_empty() {
            return Ok(settings);
        }
        let value = if NUMBERS.contains(&name.as_str()) {
            reader.varuint()?.to_string()
        } else if name == "format_csv_delimiter" {
            reader.string()?
        } else {
            return bad(format!(
                "setting '{name}' from a client older than protocol revision \
                 {WITH_SETTINGS_AS_STRINGS} cannot be read: leave it out or use a newer client"
            ));
        };
        settings.push((name, value));
    }
}

/// Reads a block's `BlockInfo`, which comes before its columns: `(field number, value)` pairs
/// up to field 0.
pub fn skip_block_info(reader: &mut Reader<'_>) -> Read<()> {
    loop {
        match reader.varuint()? {
            0 => return Ok(()),
            1 => {
                reader.u8()?;
            }
            2 => {
                reader.i32()?;
            }
            other => return bad(format!("unknown block info field {other}")),
        }
    }
}

/// Writes the server's `Hello` for a client at `client_revision`.
pub(crate) fn write_hello(out: &mut Vec<u8>, client_revision: u64, display_name: &str) {
    let revision = client_revision.min(SERVER_REVISION);
    varuint(out, server::HELLO);
    string(out, "ClickHouse");
    varuint(out, VERSION.0);
    varuint(out, VERSION.1);
    varuint(out, SERVER_REVISION);
    if revision >= WITH_SERVER_TIMEZONE {
        string(out, "UTC");
    }
    if revision >= WITH_SERVER_DISPLAY_NAME {
        string(out, display_name);
    }
    if revision >= WITH_VERSION_PATCH {
        varuint(out, VERSION.2);
    }
}

/// Writes a `Data` packet holding `block` (its columns, without the block info), compressed
/// when the query asked for compression.
pub(crate) fn write_data(out: &mut Vec<u8>, block: &[u8], compression: bool) {
    varuint(out, server::DATA);
    string(out, "");
    let mut whole = Vec::with_capacity(block.len() + 8);
    write_block_info(&mut whole);
    whole.extend_from_slice(block);
    if compression {
        out.extend_from_slice(&crate::clickhouse::compressed::compress_block(&whole));
    } else {
        out.extend_from_slice(&whole);
    }
}

/// The block info ClickHouse writes for an ordinary block: not an overflow, no bucket.
fn write_block_info(out: &mut Vec<u8>) {
    varuint(out, 1);
    out.push(0);
    varuint(out, 2);
    out.extend_from_slice(&(-1_i32).to_le_bytes());
    varuint(out, 0);
}

/// Writes an `Exception` packet: ClickHouse's error code, its name and the message.
pub(crate) fn write_exception(out: &mut Vec<u8>, code: i32, message: &str) {
    varuint(out, server::EXCEPTION);
    out.extend_from_slice(&code.to_le_bytes());
    string(out, "DB::Exception");
    string(out, &format!("DB::Exception: {message}"));
    string(out, "");
    out.push(0);
}

/// Writes a `Progress` packet saying an insert wrote `rows` rows of `bytes` bytes, for a
/// client that reads written rows in it. Older clients take no `Progress` after an insert:
/// Debian's 18.16 fails the insert on one.
pub(crate) fn write_insert_progress(out: &mut Vec<u8>, revision: u64, rows: u64, bytes: u64) {
    if revision < WITH_CLIENT_WRITE_INFO {
        return;
    }
    varuint(out, server::PROGRESS);
    for read in [0, 0, 0] {
        varuint(out, read);
    }
    varuint(out, rows);
    varuint(out, bytes);
}

pub(crate) fn write_pong(out: &mut Vec<u8>) {
    varuint(out, server::PONG);
}

pub(crate) fn write_end_of_stream(out: &mut Vec<u8>) {
    varuint(out, server::END_OF_STREAM);
}

/// Writes the header of a block: column and row counts, then each column is named and typed
/// by the caller with [`string`].
pub(crate) fn write_block_header(out: &mut Vec<u8>, columns: usize, rows: usize) {
    varuint(out, columns as u64);
    varuint(out, rows as u64);
}

pub(crate) fn varuint(out: &mut Vec<u8>, value: u64) {
    crate::clickhouse::output::leb128(value, out);
}

pub(crate) fn string(out: &mut Vec<u8>, text: &str) {
    varuint(out, text.len() as u64);
    out.extend_from_slice(text.as_bytes());
}
