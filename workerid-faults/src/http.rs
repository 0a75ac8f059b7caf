//! A minimal HTTP/1.1 client over a [`TcpStream`]: one keep-alive
//! connection, `GET` only, bodies framed by `Content-Length`. Enough to
//! drive `workerid-server` without pulling an HTTP stack into the suite.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One connection to a server, opened on first use and again after any
/// error (a killed or restarted server closes it).
#[derive(Debug)]
pub struct HttpClient {
    address: SocketAddr,
    timeout: Duration,
    conn: Option<BufReader<TcpStream>>,
}

/// What a request got back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The body, as text.
    pub body: String,
}

impl HttpClient {
    /// A client of `127.0.0.1:port` whose requests give up after `timeout`
    /// (connecting, and each read or write).
    pub fn new(port: u16, timeout: Duration) -> HttpClient {
        HttpClient::at(SocketAddr::from(([127, 0, 0, 1], port)), timeout)
    }

    /// A client of `address`, as [`HttpClient::new`].
    pub fn at(address: SocketAddr, timeout: Duration) -> HttpClient {
        HttpClient {
            address,
            timeout,
            conn: None,
        }
    }

    /// `GET path`. An error drops the connection: the next request opens a
    /// new one.
    ///
    /// # Errors
    /// The socket's, or [`io::ErrorKind::InvalidData`] for an answer that is
    /// not HTTP/1.1 as this client reads it.
    pub fn get(&mut self, path: &str) -> io::Result<Answer> {
        let answer = self.try_get(path);
        if answer.is_err() {
            self.conn = None;
        }
        answer
    }

    fn connection(&mut self) -> io::Result<&mut BufReader<TcpStream>> {
        if self.conn.is_none() {
            let stream = TcpStream::connect_timeout(&self.address, self.timeout)?;
            stream.set_read_timeout(Some(self.timeout))?;
            stream.set_write_timeout(Some(self.timeout))?;
            stream.set_nodelay(true)?;
            self.conn = Some(BufReader::new(stream));
        }
        self.conn
            .as_mut()
            .ok_or_else(|| io::Error::other("no connection"))
    }

    fn try_get(&mut self, path: &str) -> io::Result<Answer> {
        let conn = self.connection()?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        conn.get_mut().write_all(request.as_bytes())?;
        let mut line = String::new();
        if conn.read_line(&mut line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let status = line
            .strip_prefix("HTTP/1.1 ")
            .and_then(|rest| rest.get(..3))
            .and_then(|code| code.parse().ok())
            .ok_or_else(|| bad(format!("not a status line: {line:?}")))?;
        let mut length = None;
        let mut close = false;
        loop {
            line.clear();
            if conn.read_line(&mut line)? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                let value = value.trim();
                if name.eq_ignore_ascii_case("content-length") {
                    length = Some(value.parse::<usize>().map_err(bad)?);
                } else if name.eq_ignore_ascii_case("connection") {
                    close = value.eq_ignore_ascii_case("close");
                } else if name.eq_ignore_ascii_case("transfer-encoding") {
                    return Err(bad("chunked answers are not read"));
                }
            }
        }
        let length = length.ok_or_else(|| bad("an answer without Content-Length"))?;
        let mut body = vec![0; length];
        conn.read_exact(&mut body)?;
        if close {
            self.conn = None;
        }
        let body = String::from_utf8(body).map_err(bad)?;
        Ok(Answer { status, body })
    }
}

fn bad(e: impl ToString) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}
