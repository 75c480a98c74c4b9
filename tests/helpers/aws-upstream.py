#!/usr/bin/env python3
# A fake S3/AWS endpoint for tests: HTTPS on loopback, and every request's SigV4 signature checked
# independently of the broker with botocore (Debian's python3-botocore; see aws_sigv4_check.py).
# Bodies are streamed and hashed as they arrive, never held whole beyond 16 MiB. It never echoes
# Authorization or X-Amz-Security-Token values, except GET /<bucket>/echo-key?at=N&tail=M: an object
# of N dots, the access key id the request was signed with, M dots (an echo, for ranges tests).
# Objects honour one Range as S3 does (206, or 416 past the end); several ranges get the whole object.
#
#   serve: aws-upstream.py serve --cert C --key K [--host 127.0.0.1]
#          env FAKE_AWS_ACCESS_KEY_ID, FAKE_AWS_SECRET_ACCESS_KEY, [FAKE_AWS_SESSION_TOKEN],
#          FAKE_AWS_REGION, FAKE_AWS_SERVICE. Prints {"port": N} then one JSON record per request.
#   sign:  aws-upstream.py sign < {"method","url","headers","body","access_key","secret_key",
#          "token"?,"region","service"}; prints the headers botocore's own signer produced.

import base64
import datetime
import json
import os
import re
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from aws_sigv4_check import UNSIGNED, UNSIGNED_TRAILER, Body, Refused, verify_signature

OBJECTS = {}
LOCK = threading.Lock()
CONFIG = {}


def emit(record):
    with LOCK:
        sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        self.handle_any()

    def do_PUT(self):
        self.handle_any()

    def do_POST(self):
        self.handle_any()

    def do_DELETE(self):
        self.handle_any()

    def do_HEAD(self):
        self.handle_any()

    def read_body(self, body):
        te = self.headers.get("transfer-encoding", "").lower()
        if "chunked" in te:
            while True:
                line = self.rfile.readline(4096).strip()
                size = int(line.split(b";", 1)[0], 16)
                if size == 0:
                    while self.rfile.readline(4096) not in (b"\r\n", b"\n", b""):
                        pass
                    return True
                left = size
                while left:
                    piece = self.rfile.read(min(left, 65536))
                    if not piece:
                        raise Refused(400, "IncompleteBody", "connection ended mid-chunk")
                    body.feed(piece)
                    left -= len(piece)
                self.rfile.readline(4096)
        left = int(self.headers.get("content-length", "0") or 0)
        while left:
            piece = self.rfile.read(min(left, 65536))
            if not piece:
                raise Refused(400, "IncompleteBody", "connection ended before Content-Length bytes")
            body.feed(piece)
            left -= len(piece)
        return False

    def handle_any(self):
        headers = list(self.headers.items())
        lower = {}
        for k, v in headers:
            lower.setdefault(k.lower(), v)
        claimed = lower.get("x-amz-content-sha256")
        aws_chunked = claimed == UNSIGNED_TRAILER
        body = Body(aws_chunked)
        record = {
            "method": self.command,
            "target": self.path,
            "content_sha256": claimed,
            "headers_seen": sorted({k.lower() for k, _ in headers}),
            "content_length": lower.get("content-length"),
            "content_encoding": lower.get("content-encoding"),
            "transfer_encoding": lower.get("transfer-encoding"),
            "host": lower.get("host"),
            "range": lower.get("range"),
        }
        try:
            try:
                chunked_transfer = self.read_body(body)
            except Refused:
                self.close_connection = True
                raise
            if body.decoder:
                body.decoder.finish()
            raw_hash = body.raw_hash.hexdigest()
            if claimed and claimed.startswith("STREAMING-") and claimed != UNSIGNED_TRAILER:
                raise Refused(400, "InvalidRequest", f"{claimed}: chunks signed by the agent reached the upstream")
            if claimed and claimed not in (UNSIGNED, UNSIGNED_TRAILER) and claimed != raw_hash:
                raise Refused(400, "XAmzContentSHA256Mismatch", f"x-amz-content-sha256 {claimed} but the body hashes to {raw_hash}")
            checked = verify_signature(CONFIG, self.command, self.path, headers, raw_hash, datetime.datetime.utcnow())
            if aws_chunked:
                declared = lower.get("x-amz-decoded-content-length")
                if declared is None or int(declared) != body.data_bytes:
                    raise Refused(400, "IncompleteBody", f"x-amz-decoded-content-length {declared}, decoded {body.data_bytes}")
                self.check_trailers(body)
            # S3 takes a PUT without Content-Length only as aws-chunked with its decoded length declared.
            if CONFIG["service"] == "s3" and self.command == "PUT" and lower.get("content-length") is None and not aws_chunked:
                raise Refused(411, "MissingContentLength", "You must provide the Content-Length HTTP header.")
            record.update(checked)
            record.update(
                ok=True,
                status=200,
                bytes=body.data_bytes,
                sha256=body.data_hash.hexdigest(),
                wire_bytes=body.raw_bytes,
                chunked_transfer=chunked_transfer,
                aws_chunked=aws_chunked,
                trailers=sorted(body.decoder.trailers) if body.decoder else [],
            )
            emit({"record": record})
            self.answer(record, body)
        except Refused as r:
            record.update(ok=False, status=r.status, code=r.code, reason=r.reason, **r.extra)
            emit({"record": record})
            self.send_json(r.status, {"ok": False, "code": r.code, "reason": r.reason, **r.extra})
        except Exception as e:  # a verifier bug must show, not hang the client
            record.update(ok=False, status=500, code="VerifierError", reason=repr(e))
            emit({"record": record})
            self.close_connection = True
            self.send_json(500, {"ok": False, "code": "VerifierError", "reason": repr(e)})

    def check_trailers(self, body):
        t = body.decoder.trailers
        if "x-amz-checksum-crc32" in t:
            want = base64.b64encode(body.crc32.to_bytes(4, "big")).decode()
            if t["x-amz-checksum-crc32"] != want:
                raise Refused(400, "BadDigest", f"crc32 trailer {t['x-amz-checksum-crc32']}, body {want}")
        if "x-amz-checksum-sha256" in t and t["x-amz-checksum-sha256"] != base64.b64encode(body.data_hash.digest()).decode():
            raise Refused(400, "BadDigest", "sha256 trailer does not match the body")
        if "x-amz-checksum-sha1" in t and t["x-amz-checksum-sha1"] != base64.b64encode(body.sha1.digest()).decode():
            raise Refused(400, "BadDigest", "sha1 trailer does not match the body")

    def answer(self, record, body):
        path = self.path.partition("?")[0]
        parts = unquote(path).lstrip("/").split("/", 1)
        bucket, key = parts[0], parts[1] if len(parts) > 1 else ""
        query = dict(record["decoded_query"])
        if self.command == "PUT" and bucket and key:
            etag = '"' + body.md5.hexdigest() + '"'
            data = b"".join(body.kept) if body.kept is not None else None
            with LOCK:
                OBJECTS[(bucket, key)] = {"data": data, "size": body.data_bytes, "etag": etag, "sha256": record["sha256"]}
            return self.send_json(200, {**record, "stored": data is not None}, {"ETag": etag})
        if self.command == "GET" and bucket and not key and query.get("list-type") == "2":
            return self.send_list(bucket, query.get("prefix", ""))
        if self.command in ("GET", "HEAD") and key == "echo-key":
            echo = b"." * int(query.get("at", "0")) + CONFIG["access_key"].encode() + b"." * int(query.get("tail", "0"))
            return self.send_object(echo, '"echo"')
        with LOCK:
            obj = OBJECTS.get((bucket, key)) if self.command in ("GET", "HEAD") and key else None
        if obj and obj["data"] is not None:
            return self.send_object(obj["data"], obj["etag"])
        self.send_json(200, record)

    def send_object(self, data, etag):
        """An object as S3 serves it: one Range honoured (206 with Content-Range, 416 past the end)."""
        size = len(data)
        wanted = one_range(self.headers.get("range"), size)
        if wanted == "unsatisfiable":
            return self.send_json(416, {"ok": False, "code": "InvalidRange", "reason": "The requested range is not satisfiable"}, {"Content-Range": f"bytes */{size}"})
        first, last = wanted or (0, size - 1)
        self.send_response(206 if wanted else 200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(last - first + 1))
        if wanted:
            self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", "Mon, 23 Nov 2026 00:00:00 GMT")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data[first : last + 1])

    def send_list(self, bucket, prefix):
        esc = lambda s: s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        with LOCK:
            items = sorted((k, o) for (b, k), o in OBJECTS.items() if b == bucket and k.startswith(prefix))
        contents = "".join(
            f"<Contents><Key>{esc(k)}</Key><LastModified>2026-11-23T00:00:00.000Z</LastModified>"
            f"<ETag>{esc(o['etag'])}</ETag><Size>{o['size']}</Size><StorageClass>STANDARD</StorageClass></Contents>"
            for k, o in items
        )
        xml = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            f"<Name>{esc(bucket)}</Name><Prefix>{esc(prefix)}</Prefix><KeyCount>{len(items)}</KeyCount>"
            f"<MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>{contents}</ListBucketResult>"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(xml)))
        self.end_headers()
        self.wfile.write(xml)

    def send_json(self, status, value, extra=None):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)


def one_range(value, size):
    """(first, last) for one bytes= range, "unsatisfiable", or None (no Range, several, or malformed: ignored)."""
    m = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", value or "")
    if not m or m.group(1) == m.group(2) == "":
        return None
    if m.group(1) == "":
        n = int(m.group(2))
        return (max(0, size - n), size - 1) if n > 0 and size > 0 else "unsatisfiable"
    first = int(m.group(1))
    last = size - 1 if m.group(2) == "" else min(int(m.group(2)), size - 1)
    if m.group(2) != "" and int(m.group(2)) < first:
        return None
    return (first, last) if first < size else "unsatisfiable"


def serve(argv):
    args = dict(zip(argv[::2], argv[1::2]))
    CONFIG.update(
        access_key=os.environ["FAKE_AWS_ACCESS_KEY_ID"],
        secret_key=os.environ["FAKE_AWS_SECRET_ACCESS_KEY"],
        session_token=os.environ.get("FAKE_AWS_SESSION_TOKEN") or None,
        region=os.environ.get("FAKE_AWS_REGION", "us-east-1"),
        service=os.environ.get("FAKE_AWS_SERVICE", "s3"),
    )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args["--cert"], args["--key"])
    server = ThreadingHTTPServer((args.get("--host", "127.0.0.1"), 0), Handler)
    server.daemon_threads = True
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    emit({"port": server.server_address[1]})
    server.serve_forever()


def sign():
    """Signs a request with botocore's own add_auth (current time), for the verifier's self-check."""
    spec = json.load(sys.stdin)
    cls = S3SigV4Auth if spec["service"] == "s3" else SigV4Auth
    body = spec.get("body", "").encode()
    request = AWSRequest(method=spec["method"], url=spec["url"], data=body, headers=spec.get("headers", {}))
    creds = Credentials(spec["access_key"], spec["secret_key"], spec.get("token"))
    cls(creds, spec["service"], spec["region"]).add_auth(request)
    json.dump(dict(request.headers.items()), sys.stdout)


if __name__ == "__main__":
    if sys.argv[1:2] == ["sign"]:
        sign()
    else:
        serve(sys.argv[2:])
