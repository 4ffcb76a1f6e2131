//! A client of ClickHouse's native protocol for the lab's producers: one connection, inserts of
//! events, uncompressed. It speaks revision 54429, or the server's when that is older, so it
//! inserts into sluice and into ClickHouse 18.16 (revision 54412) alike.
//!
//! Written here rather than taken from a crate because the lab measures the server, and the
//! client must be light enough not to be what is measured.

use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use crate::events::{Event, write_native_block};

const REVISION: u64 = 54429;
const WITH_SERVER_TIMEZONE: u64 = 54058;
const WITH_QUOTA_KEY_IN_CLIENT_INFO: u64 = 54060;
const WITH_SERVER_DISPLAY_NAME: u64 = 54372;
const WITH_VERSION_PATCH: u64 = 54401;
const WITH_CLIENT_WRITE_INFO: u64 = 54420;
const WITH_SETTINGS_AS_STRINGS: u64 = 54429;

const CLIENT_HELLO: u64 = 0;
const CLIENT_QUERY: u64 = 1;
const CLIENT_DATA: u64 = 2;

const SERVER_HELLO: u64 = 0;
const SERVER_DATA: u64 = 1;
const SERVER_EXCEPTION: u64 = 2;
const SERVER_PROGRESS: u64 = 3;
const SERVER_END_OF_STREAM: u64 = 5;
const SERVER_PROFILE_INFO: u64 = 6;
const SERVER_TABLE_COLUMNS: u64 = 11;

/// Why an insert failed.
#[derive(Debug)]
pub enum NativeError {
    /// The server answered with an exception: its code and message. The connection is usable.
    Exception(i32, String),
    /// The connection failed or the server sent what this client does not read.
    Connection(String),
}

impl From<io::Error> for NativeError {
    fn from(error: io::Error) -> Self {
        NativeError::Connection(error.to_string())
    }
}

/// One connection.
pub struct NativeClient {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    revision: u64,
}

impl NativeClient {
    /// Connects and says hello.
    pub async fn connect(addr: SocketAddr) -> Result<Self, NativeError> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (read, writer) = stream.into_split();
        let mut client = Self {
            reader: BufReader::new(read),
            writer,
            revision: REVISION,
        };
        let mut hello = Vec::new();
        varuint(&mut hello, CLIENT_HELLO);
        string(&mut hello, "sluice-lab");
        for n in [25, 8, REVISION] {
            varuint(&mut hello, n);
        }
        for text in ["", "default", ""] {
            string(&mut hello, text);
        }
        client.writer.write_all(&hello).await?;
        match client.varuint().await? {
            SERVER_HELLO => client.read_server_hello().await?,
            SERVER_EXCEPTION => return Err(client.read_exception().await?),
            other => return Err(NativeError::Connection(format!("packet {other} for Hello"))),
        }
        Ok(client)
    }

    async fn read_server_hello(&mut self) -> Result<(), NativeError> {
        self.string().await?;
        self.varuint().await?;
        self.varuint().await?;
        self.revision = self.varuint().await?.min(REVISION);
        if self.revision >= WITH_SERVER_TIMEZONE {
            self.string().await?;
        }
        if self.revision >= WITH_SERVER_DISPLAY_NAME {
            self.string().await?;
        }
        if self.revision >= WITH_VERSION_PATCH {
            self.varuint().await?;
        }
        Ok(())
    }

    /// Inserts `events` (each with its id) into `table` with `settings`, as one block in the
    /// types the server announces; answered once the server has taken them.
    pub async fn insert(
        &mut self,
        table: &str,
        settings: &[(&str, &str)],
        events: &[(u64, Event)],
    ) -> Result<(), NativeError> {
        let mut out = self.query(&format!("INSERT INTO {table} VALUES"), settings)?;
        data_packet(&mut out, &[0, 0]);
        self.writer.write_all(&out).await?;
        let columns = self.read_sample_block().await?;
        let mut block = Vec::with_capacity(events.len() * 128);
        write_native_block(events, &columns, &mut block).map_err(NativeError::Connection)?;
        let mut out = Vec::with_capacity(block.len() + 32);
        data_packet(&mut out, &block);
        data_packet(&mut out, &[0, 0]);
        self.writer.write_all(&out).await?;
        self.read_to_end_of_stream().await
    }

    fn query(&self, text: &str, settings: &[(&str, &str)]) -> Result<Vec<u8>, NativeError> {
        let mut out = Vec::new();
        varuint(&mut out, CLIENT_QUERY);
        string(&mut out, "");
        out.push(1);
        for text in ["", "", "0.0.0.0:0"] {
            string(&mut out, text);
        }
        out.push(1);
        for text in ["", "", "sluice-lab"] {
            string(&mut out, text);
        }
        for n in [25, 8, REVISION] {
            varuint(&mut out, n);
        }
        if self.revision >= WITH_QUOTA_KEY_IN_CLIENT_INFO {
            string(&mut out, "");
        }
        if self.revision >= WITH_VERSION_PATCH {
            varuint(&mut out, 1);
        }
        if !settings.is_empty() && self.revision < WITH_SETTINGS_AS_STRINGS {
            return Err(NativeError::Connection(format!(
                "settings need revision {WITH_SETTINGS_AS_STRINGS}; the server speaks {}",
                self.revision
            )));
        }
        for (name, value) in settings {
            string(&mut out, name);
            varuint(&mut out, 0);
            string(&mut out, value);
        }
        string(&mut out, "");
        varuint(&mut out, 2);
        varuint(&mut out, 0);
        string(&mut out, text);
        Ok(out)
    }

    /// The columns the server asks for: names and types of its empty sample block.
    async fn read_sample_block(&mut self) -> Result<Vec<(String, String)>, NativeError> {
        loop {
            match self.varuint().await? {
                SERVER_DATA => break,
                SERVER_EXCEPTION => return Err(self.read_exception().await?),
                SERVER_TABLE_COLUMNS => {
                    self.string().await?;
                    self.string().await?;
                }
                other => {
                    return Err(NativeError::Connection(format!(
                        "packet {other} for the sample block"
                    )));
                }
            }
        }
        self.string().await?;
        self.skip_block_info().await?;
        let columns = self.varuint().await?;
        let rows = self.varuint().await?;
        if rows != 0 {
            return Err(NativeError::Connection(
                "a sample block with rows".to_owned(),
            ));
        }
        let mut out = Vec::new();
        for _ in 0..columns {
            out.push((self.string().await?, self.string().await?));
        }
        Ok(out)
    }

    async fn read_to_end_of_stream(&mut self) -> Result<(), NativeError> {
        loop {
            match self.varuint().await? {
                SERVER_END_OF_STREAM => return Ok(()),
                SERVER_EXCEPTION => return Err(self.read_exception().await?),
                SERVER_PROGRESS => {
                    let fields = if self.revision >= WITH_CLIENT_WRITE_INFO {
                        5
                    } else {
                        3
                    };
                    for _ in 0..fields {
                        self.varuint().await?;
                    }
                }
                SERVER_PROFILE_INFO => {
                    for _ in 0..3 {
                        self.varuint().await?;
                    }
                    self.reader.read_u8().await?;
                    self.varuint().await?;
                    self.reader.read_u8().await?;
                }
                other => {
                    return Err(NativeError::Connection(format!(
                        "packet {other} after an insert"
                    )));
                }
            }
        }
    }

    async fn skip_block_info(&mut self) -> Result<(), NativeError> {
        loop {
            match self.varuint().await? {
                0 => return Ok(()),
                1 => {
                    self.reader.read_u8().await?;
                }
                2 => {
                    self.reader.read_i32_le().await?;
                }
                other => return Err(NativeError::Connection(format!("block info field {other}"))),
            }
        }
    }

    async fn read_exception(&mut self) -> Result<NativeError, NativeError> {
        let code = self.reader.read_i32_le().await?;
        self.string().await?;
        let message = self.string().await?;
        self.string().await?;
        if self.reader.read_u8().await? != 0 {
            // A nested exception follows; the outer one says enough.
            Box::pin(self.read_exception()).await?;
        }
        Ok(NativeError::Exception(code, message))
    }

    async fn varuint(&mut self) -> Result<u64, NativeError> {
        let mut value = 0_u64;
        for shift in (0..64).step_by(7) {
            let byte = self.reader.read_u8().await?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(NativeError::Connection(
            "a number past ten bytes".to_owned(),
        ))
    }

    async fn string(&mut self) -> Result<String, NativeError> {
        let len = self.varuint().await?;
        if len > 1 << 20 {
            return Err(NativeError::Connection(format!("a {len}-byte string")));
        }
        let mut bytes = vec![0; len as usize];
        self.reader.read_exact(&mut bytes).await?;
        String::from_utf8(bytes).map_err(|e| NativeError::Connection(e.to_string()))
    }
}

/// A data packet of the insert: no temporary table, block info, then `block`.
fn data_packet(out: &mut Vec<u8>, block: &[u8]) {
    varuint(out, CLIENT_DATA);
    string(out, "");
    out.extend_from_slice(&[1, 0, 2, 0xff, 0xff, 0xff, 0xff, 0]);
    out.extend_from_slice(block);
}

fn varuint(out: &mut Vec<u8>, value: u64) {
    crate::events::leb128(out, value);
}

fn string(out: &mut Vec<u8>, text: &str) {
    varuint(out, text.len() as u64);
    out.extend_from_slice(text.as_bytes());
}
