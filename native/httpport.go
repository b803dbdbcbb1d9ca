package native

import (
	"bytes"
	"encoding/binary"
	"strconv"
)

// notHTTP is what an HTTP client that reached the native port is told
// (httpRefusal): the mix-up of listen and native_listen it almost always
// is.
const notHTTP = "this port speaks baton's native protocol (README \"Native protocol\"), not HTTP: send HTTP requests to the node's listen address, and baton:// to this one"

// http2Preface is the first line of an HTTP/2 connection with prior
// knowledge (RFC 9113 section 3.4), as the reader sees it (without its
// "\r\n").
const http2Preface = "PRI * HTTP/2.0"

// httpRefusal returns the answer to a connection's first line when it is
// an HTTP request's (an HTTP/1.x request line: isHTTP1RequestLine; or
// HTTP/2's preface), in that protocol, so that the client shows notHTTP
// instead of failing to read a native error line: for HTTP/1.x a 400
// response (RFC 9112), for HTTP/2 an empty SETTINGS frame (the server's
// preface) and a GOAWAY frame, PROTOCOL_ERROR, with notHTTP as its debug
// data, after which the connection ends (RFC 9113 sections 3.4, 6.5 and
// 6.8). ok is false for any other line.
func httpRefusal(line []byte) (a []byte, ok bool) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	switch {
	case string(line) == http2Preface:
		frame := func(b []byte, typ byte, payload []byte) []byte {
			b = append(b, byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload)), typ, 0, 0, 0, 0, 0)
			return append(b, payload...)
		}
		var goaway []byte
		// The last stream ID the largest there is: the client's requests
		// then end with the connection's end, with an error that shows
		// the debug data (Go's net/http ends a first stream above the
		// last ID at once, with the error code alone).
		goaway = binary.BigEndian.AppendUint32(goaway, 1<<31-1)
		goaway = binary.BigEndian.AppendUint32(goaway, 1) // PROTOCOL_ERROR
		goaway = append(goaway, notHTTP...)
		return frame(frame(nil, 0x4, nil), 0x7, goaway), true // SETTINGS, GOAWAY
	case isHTTP1RequestLine(line):
		body := notHTTP + "\n"
		return []byte("HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + body), true
	}
	return nil, false
}

// isHTTP1RequestLine reports whether line (without "\r") is an HTTP/1.x
// request line, "<method> <target> HTTP/1.x" (RFC 9112 section 3), whose
// method is no native op: "P HTTP/1.1" is a ping, "C k HTTP/1.1" a
// cancel, whatever their last field.
func isHTTP1RequestLine(line []byte) bool {
	f := bytes.Split(line, []byte(" "))
	if len(f) != 3 || len(f[0]) == 0 || len(f[1]) == 0 || !(string(f[2]) == "HTTP/1.1" || string(f[2]) == "HTTP/1.0") {
		return false
	}
	switch string(f[0]) {
	case OpAcquire, OpRelease, OpRenew, OpPing, OpCancel, OpAuth:
		return false
	}
	return true
}
