//! One native-protocol connection: the handshake, then its queries one at a time.
//!
//! Bytes are read into a buffer and packets are parsed from it; a packet that has not fully
//! arrived is parsed again once more bytes have. An insert's blocks are collected whole,
//! uncompressed and without their block info, into one body of `Native` blocks, which goes to
//! the pipeline like any other insert's body once the client's closing empty block has come.
//! So nothing of an insert lands before all of it has arrived.
//!
//! While the instance is stopping, a connection is closed between queries, as
//! [`between_queries`] decides, so that the client's next query opens a new connection, which a
//! load balancer sends to another instance.

use std::time::Duration;

use bytes::{Buf, BytesMut};
use sluice_core::formats::native_block_len;
use sluice_core::name::printable;
use sluice_core::{InputFormat, TableLayout};
use sluice_pipeline::{Admission, Insert};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::Instant;

use super::packets::{
    self, ClientPacket, Hello, PacketError, Query, Reader, read_client_packet, skip_block_info,
};
use crate::AppState;
use crate::clickhouse::compressed::{BlockError, block_len, decompress_blocks};
use crate::clickhouse::handler::{data_start, insert_settings, query_error};
use crate::clickhouse::handshake::{DATABASE, Read, answer, parse_read};
use crate::clickhouse::output::OutputFormat;
use crate::clickhouse::query::{first_keyword, parse_insert};
use crate::clickhouse::types::{Known, announced};
use crate::error::{ApiError, Kind, count_rejection};

/// How long a connection may take at each step.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    /// From accepting to the client's `Hello`.
    pub(crate) handshake: Duration,
    /// Between queries.
    pub(crate) idle: Duration,
    /// Between two reads inside a packet or an insert's blocks.
    pub(crate) stall: Duration,
}

/// How long a connection closed by sluice is still read from, and its bytes dropped, so that
/// the client reads the last answer and the end rather than a reset.
const LINGER: Duration = Duration::from_secs(1);

/// Why a connection ends.
enum End {
    /// The client closed it, or went silent past a timeout, or the doors closed.
    Quietly,
    /// The instance is stopping and the connection is between queries: it is closed politely.
    Drained,
    /// It cannot go on: the exception is sent, then the connection is closed.
    Refused(ApiError),
}

impl From<std::io::Error> for End {
    fn from(_: std::io::Error) -> Self {
        End::Quietly
    }
}

/// How a query ends when it does not succeed.
enum Refusal {
    /// The exception is sent and the connection goes on.
    Answer(ApiError),
    /// The connection ends.
    End(End),
}

impl From<End> for Refusal {
    fn from(end: End) -> Self {
        Refusal::End(end)
    }
}

impl From<ApiError> for Refusal {
    fn from(error: ApiError) -> Self {
        Refusal::Answer(error)
    }
}

/// What a connection last answered, which says whether it may close while the instance stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Last {
    /// The client's `Hello`: its first query is still to come.
    Hello,
    /// A query: the connection is between queries.
    Query,
    /// A ping, which clients such as clickhouse-driver send just before a query to check the
    /// connection: its query is on its way.
    Ping,
}

/// What a connection does next, between two packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Between {
    /// Reads the packet whose first bytes have arrived.
    Read,
    /// Waits for the client's next packet.
    Wait,
    /// Closes, since the instance is stopping.
    Close,
}

/// What a connection does between two packets. Once the instance is stopping, it serves one
/// query more at most: the one in progress, or its first when it opened during the drain. Then
/// it closes, as HTTP answers with `Connection: close`, and at once when it waits idle. A
/// packet already begun is read, and the query a ping announces is waited for, so a connection
/// never closes under a client that has started to send.
fn between_queries(stopping: bool, last: Last, begun: bool) -> Between {
    if begun {
        Between::Read
    } else if stopping && last == Last::Query {
        Between::Close
    } else {
        Between::Wait
    }
}

/// What a connection reads next.
enum Packet {
    Query(Query),
    /// A data packet's header; its block follows.
    Data,
    Cancel,
    Ping,
}

struct Connection<S> {
    stream: S,
    received: BytesMut,
    state: AppState,
    timeouts: Timeouts,
    hello: Option<Hello>,
    last: Last,
}

/// Serves one connection until the client leaves or it is refused, or, while it is between
/// queries, until the instance is stopping ([`between_queries`]) or `closed` turns true.
pub(crate) async fn serve<S>(
    stream: S,
    state: AppState,
    timeouts: Timeouts,
    closed: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut connection = Connection {
        stream,
        received: BytesMut::with_capacity(64 * 1024),
        state,
        timeouts,
        hello: None,
        last: Last::Hello,
    };
    match connection.run(closed).await {
        End::Quietly => {}
        End::Drained => connection.close_politely().await,
        End::Refused(error) => connection.refuse(error).await,
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Connection<S> {
    async fn run(&mut self, mut closed: watch::Receiver<bool>) -> End {
        match tokio::time::timeout(self.timeouts.handshake, self.handshake()).await {
            Ok(Ok(())) => {}
            Ok(Err(end)) => return end,
            Err(_) => return End::Quietly,
        }
        loop {
            let served = match self.next_packet(&mut closed).await {
                Ok(packet) => self.serve_packet(packet).await,
                Err(end) => Err(end),
            };
            if let Err(end) = served {
                return end;
            }
        }
    }

    /// Answers one packet that comes between queries.
    async fn serve_packet(&mut self, packet: Packet) -> Result<(), End> {
        match packet {
            Packet::Ping => {
                self.send(packets::write_pong).await?;
                self.last = Last::Ping;
            }
            Packet::Cancel => {}
            Packet::Query(query) => {
                self.query(query).await?;
                self.last = Last::Query;
            }
            Packet::Data => return Err(protocol_error("a Data packet outside a query")),
        }
        Ok(())
    }

    /// The client's next packet, between queries. Once its first byte is in, the packet is read
    /// whole, with the stall timeout between reads.
    async fn next_packet(&mut self, closed: &mut watch::Receiver<bool>) -> Result<Packet, End> {
        self.await_packet(closed).await?;
        self.read_packet(self.timeouts.stall).await
    }

    /// Waits for the first bytes of the client's next packet. The connection ends instead when
    /// the client leaves or stays silent for the idle timeout, when the doors close, or when
    /// [`between_queries`] closes it, which it is asked again the moment the instance stops.
    async fn await_packet(&mut self, closed: &mut watch::Receiver<bool>) -> Result<(), End> {
        let stopping = self.state.stopping.clone();
        let idle_until = Instant::now() + self.timeouts.idle;
        loop {
            // Read once: a stop that comes after this is seen by `wait`, which then returns.
            let is_stopping = stopping.is_set();
            match between_queries(is_stopping, self.last, !self.received.is_empty()) {
                Between::Read => return Ok(()),
                Between::Close => return Err(End::Drained),
                Between::Wait => {}
            }
            // Bytes that have come are taken before the stop: see `Between::Read`.
            tokio::select! {
                biased;
                filled = self.fill(idle_until.saturating_duration_since(Instant::now())) => filled?,
                _ = closed.wait_for(|close| *close) => return Err(End::Quietly),
                () = stopping.wait(), if !is_stopping => {}
            }
        }
    }

    /// Reads the client's `Hello` and answers it.
    async fn handshake(&mut self) -> Result<(), End> {
        let hello = self
            .parse(
                self.timeouts.handshake,
                |reader| match read_client_packet(reader, 0)? {
                    ClientPacket::Hello(hello) => Ok(hello),
                    other => Err(PacketError::Bad(format!(
                        "the connection must start with Hello, not {other:?}"
                    ))),
                },
            )
            .await?;
        let revision = hello.revision;
        self.hello = Some(hello);
        self.send(|out| packets::write_hello(out, revision, "sluice"))
            .await?;
        Ok(())
    }

    fn hello(&self) -> &Hello {
        self.hello
            .as_ref()
            .expect("queries come after the handshake")
    }

    /// Reads the next packet; a data packet's block is left to [`Connection::read_block`].
    async fn read_packet(&mut self, first_byte_within: Duration) -> Result<Packet, End> {
        let revision = self.hello.as_ref().map_or(0, Hello::revision);
        self.parse(first_byte_within, |reader| {
            Ok(match read_client_packet(reader, revision)? {
                ClientPacket::Query(query) => Packet::Query(query),
                ClientPacket::Data { .. } => Packet::Data,
                ClientPacket::Cancel => Packet::Cancel,
                ClientPacket::Ping => Packet::Ping,
                ClientPacket::Hello(_) => {
                    return Err(PacketError::Bad("a second Hello".to_owned()));
                }
            })
        })
        .await
    }

    /// Parses the buffered bytes with `parse`, reading more while they end too early. The
    /// first read waits up to `first_byte_within`, later ones up to the stall timeout.
    async fn parse<T>(
        &mut self,
        first_byte_within: Duration,
        parse: impl Fn(&mut Reader<'_>) -> Result<T, PacketError>,
    ) -> Result<T, End> {
        let mut wait = first_byte_within;
        loop {
            if !self.received.is_empty() {
                let mut reader = Reader::new(&self.received);
                match parse(&mut reader) {
                    Ok(value) => {
                        let used = reader.pos();
                        self.received.advance(used);
                        return Ok(value);
                    }
                    Err(PacketError::Incomplete) => {}
                    Err(PacketError::Bad(message)) => return Err(protocol_error(&message)),
                }
                wait = self.timeouts.stall;
            }
            self.fill(wait).await?;
        }
    }

    /// Reads more bytes into the buffer, up to the body limit. The room it makes doubles with
    /// what is buffered. A block is measured again after each read; while one measure runs,
    /// the client's bytes pile up in the socket and the next read takes them all, so a large
    /// block is measured about once per socket buffer's worth, not once per packet.
    async fn fill(&mut self, within: Duration) -> Result<(), End> {
        if self.received.len() > self.state.limits.max_body_bytes {
            return Err(End::Refused(too_large(self.state.limits.max_body_bytes)));
        }
        self.received.reserve(self.received.len().max(64 * 1024));
        match tokio::time::timeout(within, self.stream.read_buf(&mut self.received)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => Err(End::Quietly),
            Ok(Ok(_)) => Ok(()),
        }
    }

    /// Reads a data packet's block, its header already read, and appends it to `body`
    /// without its block info: its row count.
    async fn read_block(&mut self, compressed: bool, body: &mut Vec<u8>) -> Result<u64, End> {
        if compressed {
            return self.read_compressed_block(body).await;
        }
        loop {
            let mut reader = Reader::new(&self.received);
            let measured = skip_block_info(&mut reader).map(|()| {
                let start = reader.pos();
                native_block_len(reader.rest()).map(|len| len.map(|(len, rows)| (start, len, rows)))
            });
            match measured {
                Ok(Ok(Some((start, len, rows)))) => {
                    self.check_room(body.len() + len)?;
                    body.extend_from_slice(&self.received[start..start + len]);
                    self.received.advance(start + len);
                    return Ok(rows);
                }
                Ok(Ok(None)) | Err(PacketError::Incomplete) => {
                    self.check_room(body.len() + self.received.len())?;
                    self.fill(self.timeouts.stall).await?;
                }
                Ok(Err(message)) | Err(PacketError::Bad(message)) => {
                    return Err(protocol_error(&message));
                }
            }
        }
    }

    /// Refuses an insert whose blocks would take more than the body limit.
    fn check_room(&self, bytes: usize) -> Result<(), End> {
        let limit = self.state.limits.max_body_bytes;
        if bytes > limit {
            return Err(End::Refused(too_large(limit)));
        }
        Ok(())
    }

    /// A block in ClickHouse's compressed blocks: as many as it takes to hold all of it.
    async fn read_compressed_block(&mut self, body: &mut Vec<u8>) -> Result<u64, End> {
        let limit = self.state.limits.max_body_bytes;
        let mut raw = Vec::new();
        loop {
            let len = loop {
                match block_len(&self.received) {
                    Ok(Some(len)) => break len,
                    Ok(None) => self.fill(self.timeouts.stall).await?,
                    Err(error) => return Err(protocol_error(&error.to_string())),
                }
            };
            let room = limit.saturating_sub(body.len() + raw.len());
            let decompressed =
                decompress_blocks(&self.received[..len], room).map_err(|error| match error {
                    BlockError::TooLarge { .. } => End::Refused(too_large(limit)),
                    error => protocol_error(&error.to_string()),
                })?;
            self.received.advance(len);
            raw.extend_from_slice(&decompressed);
            let mut reader = Reader::new(&raw);
            let info = skip_block_info(&mut reader);
            let start = reader.pos();
            match info.map(|()| native_block_len(&raw[start..])) {
                Ok(Ok(Some((len, rows)))) if start + len == raw.len() => {
                    body.extend_from_slice(&raw[start..]);
                    return Ok(rows);
                }
                Ok(Ok(Some(_))) => {
                    return Err(protocol_error(
                        "a compressed block holds more than one block",
                    ));
                }
                Ok(Ok(None)) | Err(PacketError::Incomplete) => {}
                Ok(Err(message)) | Err(PacketError::Bad(message)) => {
                    return Err(protocol_error(&message));
                }
            }
        }
    }

    /// Runs a query: an insert, or one of the reads clients send when they connect.
    async fn query(&mut self, query: Query) -> Result<(), End> {
        // Temporary tables for the query come first, up to an empty block; inserts have none.
        loop {
            match self.read_packet(self.timeouts.stall).await? {
                Packet::Data => {
                    let mut ignored = Vec::new();
                    if self.read_block(query.compression, &mut ignored).await? == 0 {
                        break;
                    }
                }
                _ => return Err(protocol_error("expected the query's temporary tables")),
            }
        }
        let result = if first_keyword(query.text.as_bytes()).as_deref() == Some("INSERT") {
            self.insert(&query).await
        } else {
            self.read(&query).await
        };
        match result {
            Ok(()) => Ok(()),
            Err(Refusal::Answer(error)) => Ok(self.send_exception(&error).await?),
            Err(Refusal::End(end)) => Err(end),
        }
    }

    async fn insert(&mut self, query: &Query) -> Result<(), Refusal> {
        let text = query.text.as_bytes();
        let insert = parse_insert(text).map_err(query_error)?;
        let hello = self.hello();
        self.state
            .access
            .check_user(&insert.table, &hello.user, &hello.password)?;
        let mut settings = insert_settings(&insert, &query.settings)?;
        let inline = &text[data_start(text, insert.data_offset)..];
        let body = if inline.iter().all(u8::is_ascii_whitespace) {
            let layout = self
                .state
                .pipeline
                .layout(&insert.table)
                .ok_or_else(|| unknown_table(&insert.table))?;
            let sample = sample_block(&layout, insert.columns.as_deref(), hello)?;
            let compression = query.compression;
            self.send(|out| packets::write_data(out, &sample, compression))
                .await
                .map_err(End::from)?;
            settings.options.format = InputFormat::Native;
            settings.options.columns = None;
            match self.receive_blocks(compression).await? {
                Some(body) => body,
                None => {
                    return self
                        .send(packets::write_end_of_stream)
                        .await
                        .map_err(|e| End::from(e).into());
                }
            }
        } else {
            inline.to_vec()
        };
        let inserted = self
            .state
            .door(crate::console::Door::ClickHouseNative)
            .insert_body(Insert {
                table: &insert.table,
                body: &body,
                options: settings.options,
                ack: settings.ack,
                admission: Admission::Refuse,
                max_partitions: settings.max_partitions,
                max_rows: Some(self.state.limits.max_rows_per_insert),
                key: settings.key.as_deref(),
            })
            .await
            .map_err(ApiError::from)?;
        let revision = self.hello().revision();
        let bytes = body.len() as u64;
        self.send(|out| {
            packets::write_insert_progress(out, revision, inserted.rows, bytes);
            packets::write_end_of_stream(out);
        })
        .await
        .map_err(|e| End::from(e).into())
    }

    /// Collects an insert's blocks up to the client's empty one; `None` when the client
    /// cancels the insert.
    async fn receive_blocks(&mut self, compression: bool) -> Result<Option<Vec<u8>>, Refusal> {
        let limits = self.state.limits;
        let (mut body, mut rows) = (Vec::new(), 0_u64);
        loop {
            match self.read_packet(self.timeouts.stall).await? {
                Packet::Data => {}
                Packet::Cancel => return Ok(None),
                _ => return Err(protocol_error("expected the insert's data blocks").into()),
            }
            let block_rows = self.read_block(compression, &mut body).await?;
            if block_rows == 0 {
                return Ok(Some(body));
            }
            rows += block_rows;
            if rows > limits.max_rows_per_insert as u64 {
                return Err(End::Refused(ApiError::new(
                    Kind::TooLarge,
                    format!(
                        "the insert has more than max_rows_per_insert = {} rows",
                        limits.max_rows_per_insert
                    ),
                ))
                .into());
            }
        }
    }

    /// Answers one of the reads clients send when they connect, as a header block, a block of
    /// rows and the end of the stream.
    async fn read(&mut self, query: &Query) -> Result<(), Refusal> {
        let read = parse_read(query.text.as_bytes()).map_err(query_error)?;
        let layout = match &read.read {
            Read::Exists(table) | Read::Describe(table) => {
                let hello = self.hello();
                self.state
                    .access
                    .check_user(table, &hello.user, &hello.password)?;
                self.state.pipeline.layout(table)
            }
            _ => None,
        };
        if let (Read::Describe(table), None) = (&read.read, &layout) {
            return Err(unknown_table(table).into());
        }
        let mut result = answer(&read.read, layout.as_ref());
        let rows = std::mem::take(&mut result.rows);
        let header = OutputFormat::Native.write(&result);
        result.rows = rows;
        let block = OutputFormat::Native.write(&result);
        let compression = query.compression;
        self.send(|out| {
            packets::write_data(out, &header, compression);
            packets::write_data(out, &block, compression);
            packets::write_end_of_stream(out);
        })
        .await
        .map_err(|e| End::from(e).into())
    }

    async fn send(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> std::io::Result<()> {
        let mut out = Vec::new();
        write(&mut out);
        self.stream.write_all(&out).await?;
        self.stream.flush().await
    }

    /// Counts the refusal and sends its exception packet.
    async fn send_exception(&mut self, error: &ApiError) -> std::io::Result<()> {
        count_rejection(error.kind);
        self.send(|out| exception(out, error)).await
    }

    /// Sends the exception, then closes politely.
    async fn refuse(&mut self, error: ApiError) {
        if self.send_exception(&error).await.is_ok() {
            self.close_politely().await;
        }
    }

    /// Ends the sending side, then drops what the client still sends for a moment before
    /// closing. Closing a socket with unread bytes sends a reset, which may discard the last
    /// answer before the client reads it; this way it reads the answer, then the end.
    async fn close_politely(&mut self) {
        let _ = self.stream.shutdown().await;
        let mut sink = vec![0; 64 * 1024];
        let drain = async { while matches!(self.stream.read(&mut sink).await, Ok(n) if n > 0) {} };
        let _ = tokio::time::timeout(LINGER, drain).await;
    }
}

fn exception(out: &mut Vec<u8>, error: &ApiError) {
    let spec = error.kind.spec();
    let message = format!("{}. ({})", error.message, spec.ch_name);
    packets::write_exception(out, spec.ch_code as i32, &message);
}

fn protocol_error(message: &str) -> End {
    End::Refused(ApiError::new(
        Kind::BadRequest,
        format!("native protocol: {message}"),
    ))
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        Kind::TooLarge,
        format!("the insert is larger than max_body_bytes = {limit} bytes"),
    )
}

fn unknown_table(table: &str) -> ApiError {
    ApiError::new(
        Kind::UnknownTable,
        format!(
            "Table {DATABASE}.{} does not exist: over the native protocol sluice inserts into \
             tables from the config or made by an insert over HTTP",
            printable(table)
        ),
    )
}

/// The block that tells the client which columns to send and in which types: the insert's
/// column list, else every column of the table.
fn sample_block(
    layout: &TableLayout,
    listed: Option<&[String]>,
    hello: &Hello,
) -> Result<Vec<u8>, ApiError> {
    let columns: Vec<_> = match listed {
        None => layout.columns.iter().collect(),
        Some(listed) => listed
            .iter()
            .map(|name| {
                layout
                    .columns
                    .iter()
                    .find(|c| &c.name == name)
                    .ok_or_else(|| {
                        ApiError::new(
                            Kind::BadRows,
                            format!("No such column {} in table", printable(name)),
                        )
                    })
            })
            .collect::<Result<_, _>>()?,
    };
    let known = Known::of(hello.version, hello.revision);
    let mut out = Vec::new();
    packets::write_block_header(&mut out, columns.len(), 0);
    for column in columns {
        packets::string(&mut out, &column.name);
        packets::string(&mut out, &announced(&column.ty, column.nullable, known));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use sluice_core::{Column, ColumnType};

    use super::*;

    fn hello(version: (u64, u64), revision: u64) -> Hello {
        Hello {
            client_name: "ClickHouse client".into(),
            version,
            revision,
            database: String::new(),
            user: "default".into(),
            password: String::new(),
        }
    }

    #[test]
    fn each_client_is_told_the_types_it_knows() {
        let decimal = ColumnType::Decimal {
            precision: 20,
            scale: 4,
        };
        let types = [
            ColumnType::Timestamp,
            decimal,
            ColumnType::Uuid,
            ColumnType::Json,
            ColumnType::map(ColumnType::Timestamp),
        ];
        let announced = |hello: &Hello| -> Vec<String> {
            let known = Known::of(hello.version, hello.revision);
            types.iter().map(|ty| announced(ty, false, known)).collect()
        };
        assert_eq!(
            announced(&hello((24, 8), 54472)),
            [
                "DateTime64(6, 'UTC')",
                "Decimal(20, 4)",
                "UUID",
                "String",
                "Map(String, Nullable(DateTime64(6, 'UTC')))"
            ]
        );
        // Debian's clickhouse-client 18.16 knows Decimal and UUID, not DateTime64 or Map.
        assert_eq!(
            announced(&hello((18, 16), 54412)),
            [
                "String",
                "Decimal(20, 4)",
                "UUID",
                "String",
                "Array(Tuple(String, Nullable(String)))"
            ]
        );
        assert_eq!(
            announced(&hello((18, 10), 54405)),
            [
                "String",
                "String",
                "String",
                "String",
                "Array(Tuple(String, Nullable(String)))"
            ]
        );
    }

    #[test]
    fn the_sample_block_names_the_columns_in_their_types() {
        let layout = TableLayout {
            columns: vec![
                Column::new(
                    "price",
                    ColumnType::Decimal {
                        precision: 9,
                        scale: 2,
                    },
                )
                .required(),
                Column::new("id", ColumnType::Uuid),
                Column::new("doc", ColumnType::Json),
            ],
            partition_by: String::new(),
            sort_by: vec![],
        };
        let block = sample_block(&layout, None, &hello((18, 16), 54412)).unwrap();
        let mut expected = Vec::new();
        packets::write_block_header(&mut expected, 3, 0);
        for text in [
            "price",
            "Decimal(9, 2)",
            "id",
            "Nullable(UUID)",
            "doc",
            "Nullable(String)",
        ] {
            packets::string(&mut expected, text);
        }
        assert_eq!(block, expected);
    }

    #[test]
    fn while_stopping_a_connection_closes_after_a_query_and_never_inside_a_packet() {
        use Between::{Close, Read, Wait};
        // (stopping, what was answered last, bytes of the next packet in): what happens next.
        let cases = [
            (false, Last::Hello, false, Wait),
            (false, Last::Query, false, Wait),
            (false, Last::Ping, false, Wait),
            (false, Last::Query, true, Read),
            // Stopping: a query answered, or an idle connection, closes.
            (true, Last::Query, false, Close),
            // A connection that opened during the drain is served its first query.
            (true, Last::Hello, false, Wait),
            (true, Last::Hello, true, Read),
            // A ping announces a query: it is waited for, then served.
            (true, Last::Ping, false, Wait),
            (true, Last::Ping, true, Read),
            // A packet begun is read whole.
            (true, Last::Query, true, Read),
        ];
        for (stopping, last, begun, next) in cases {
            assert_eq!(
                between_queries(stopping, last, begun),
                next,
                "stopping {stopping}, last {last:?}, begun {begun}"
            );
        }
    }
}
