package loadtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"syscall"
	"time"
)

// rawClient is a minimal HTTP/1.1 keep-alive client: it writes a prepared
// request and reads the response without building Request or Response
// values, so the load generator costs a fraction of what net/http's client
// does and the server, not the client, bounds the rate. One connection, not
// safe for concurrent use.
type rawClient struct {
	addr string
	conn net.Conn
	br   *bufio.Reader
	body []byte // the last response's body
}

func newRawClient(addr string) *rawClient { return &rawClient{addr: addr} }

// hostOf returns the host:port of a base URL.
func hostOf(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	if u.Port() == "" {
		return "", fmt.Errorf("%s: no port", base)
	}
	return u.Host, nil
}

// rawRequest builds a GET request with headers (pairs of name, value).
func rawRequest(host, path string, headers ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\n", path, host)
	for i := 0; i+1 < len(headers); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", headers[i], headers[i+1])
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

func (c *rawClient) Close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// do sends req and reads the response; it returns the status code. The
// body is in c.body until the next call. A broken connection is closed and
// redialled on the next call. A kept-alive connection the server closed
// while it was idle (a side's clients are idle while the other side of an
// interleaved measurement runs) is redialled at once, as net/http's client
// does: the request is sent again once on a new connection.
func (c *rawClient) do(req []byte, timeout time.Duration) (int, error) {
	reused := c.conn != nil
	status, err := c.try(req, timeout)
	if err != nil && reused && status == 0 && staleConn(err) {
		status, err = c.try(req, timeout)
	}
	return status, err
}

func (c *rawClient) try(req []byte, timeout time.Duration) (int, error) {
	if c.conn == nil {
		conn, err := net.DialTimeout("tcp", c.addr, timeout)
		if err != nil {
			return 0, err
		}
		c.conn = conn
		if c.br == nil {
			c.br = bufio.NewReaderSize(conn, 16<<10)
		} else {
			c.br.Reset(conn)
		}
	}
	c.conn.SetDeadline(time.Now().Add(timeout))
	status, keep, err := c.roundTrip(req)
	if err != nil || !keep {
		c.Close()
	}
	return status, err
}

// staleConn reports whether err is what a request on a connection the
// server had closed gets before any byte of an answer.
func staleConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

var errMalformed = errors.New("malformed HTTP response")

func (c *rawClient) roundTrip(req []byte) (status int, keep bool, err error) {
	if _, err := c.conn.Write(req); err != nil {
		return 0, false, err
	}
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, false, err
	}
	// HTTP/1.1 200 OK
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, false, errMalformed
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, false, errMalformed
	}
	length, chunked, keep := -1, false, true
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return status, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return status, false, errMalformed
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil {
				return status, false, errMalformed
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			keep = !bytes.EqualFold(value, []byte("close"))
		}
	}
	c.body = c.body[:0]
	switch {
	case status == 204 || status == 304:
	case chunked:
		for {
			line, err := c.br.ReadSlice('\n')
			if err != nil {
				return status, false, err
			}
			line = bytes.TrimRight(line, "\r\n")
			if i := bytes.IndexByte(line, ';'); i >= 0 {
				line = line[:i]
			}
			n, err := strconv.ParseInt(string(line), 16, 32)
			if err != nil {
				return status, false, errMalformed
			}
			if err := c.readBody(int(n) + 2); err != nil { // the chunk and its CRLF
				return status, false, err
			}
			c.body = c.body[:len(c.body)-2]
			if n == 0 {
				break
			}
		}
	case length >= 0:
		if err := c.readBody(length); err != nil {
			return status, false, err
		}
	default:
		return status, false, errors.New("response without a length")
	}
	return status, keep, nil
}

func (c *rawClient) readBody(n int) error {
	start := len(c.body)
	if cap(c.body)-start < n {
		nb := make([]byte, start, start+n+1024)
		copy(nb, c.body)
		c.body = nb
	}
	c.body = c.body[:start+n]
	_, err := io.ReadFull(c.br, c.body[start:])
	return err
}
