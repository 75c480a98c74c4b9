# SigV4 verification for the fake AWS endpoint (aws-upstream.py), independent of the broker: botocore
# recomputes the signature from what was received, as AWS does (the query and an S3 path decoded and
# re-encoded, SignedHeaders as the client listed them), with the known secret key at X-Amz-Date.
# Also the incremental body reader: hashes, and unsigned aws-chunked decoding. Never logs a key.

import datetime
import hashlib
import hmac
import re
import zlib
from urllib.parse import quote, unquote

from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.compat import HTTPHeaders
from botocore.credentials import Credentials

STORE_MAX = 16 * 1024 * 1024  # object bytes kept up to this; larger ones are counted and hashed only
SKEW = datetime.timedelta(minutes=15)  # what AWS allows between X-Amz-Date and its clock
AUTH_RE = re.compile(
    r"AWS4-HMAC-SHA256 Credential=([^/,\s]+)/(\d{8})/([^/,\s]+)/([^/,\s]+)/aws4_request,\s*"
    r"SignedHeaders=([a-z0-9;\-]+),\s*Signature=([0-9a-f]{64})"
)
UNSIGNED = "UNSIGNED-PAYLOAD"
UNSIGNED_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"


class Refused(Exception):
    def __init__(self, status, code, reason, **extra):
        super().__init__(reason)
        self.status, self.code, self.reason, self.extra = status, code, reason, extra


def canonical_pairs(raw_query):
    """The query as AWS reads it: split on '&', percent-decoded ('+' stays a plus sign)."""
    pairs = []
    for part in raw_query.split("&") if raw_query else []:
        if part == "":
            continue
        key, _, value = part.partition("=")
        pairs.append((unquote(key, errors="strict"), unquote(value, errors="strict")))
    return pairs


def auth_class(service, region):
    base = S3SigV4Auth if service == "s3" else SigV4Auth

    class Verifier(base):
        """botocore's signer, told which headers the client signed (AWS takes SignedHeaders as sent)."""

        def __init__(self, credentials, signed, body_hash):
            super().__init__(credentials, service, region)
            self._signed = signed
            self._body_hash = body_hash

        def headers_to_sign(self, request):
            out = HTTPHeaders()
            for name, value in request.headers.items():
                if name.lower() in self._signed:
                    out[name.lower()] = value
            return out

        def payload(self, request):
            return self._body_hash

    return Verifier


def verify_signature(config, method, raw_target, headers, body_hash, now):
    """config: access_key, secret_key, session_token, region, service. headers: (name, value) pairs as
    received. Raises Refused, or returns what was checked."""
    authz = [v for k, v in headers if k.lower() == "authorization"]
    if len(authz) != 1:
        raise Refused(403, "MissingAuthenticationToken", "exactly one Authorization header is required")
    m = AUTH_RE.fullmatch(authz[0].strip())
    if not m:
        raise Refused(403, "IncompleteSignature", "Authorization is not AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…")
    access_key, scope_date, region, service, signed_list, signature = m.groups()
    if access_key != config["access_key"]:
        raise Refused(403, "InvalidAccessKeyId", f"unknown access key {access_key}")
    if (region, service) != (config["region"], config["service"]):
        raise Refused(403, "SignatureDoesNotMatch", f"credential scope {region}/{service}, expected {config['region']}/{config['service']}")
    signed = signed_list.split(";")
    if signed != sorted(set(signed)):
        raise Refused(403, "SignatureDoesNotMatch", "SignedHeaders is not sorted and unique")
    present = {k.lower() for k, _ in headers}
    for name in signed:
        if name not in present:
            raise Refused(403, "SignatureDoesNotMatch", f"signed header {name} is missing")
    for name in ("host", "x-amz-date"):
        if name not in signed:
            raise Refused(403, "SignatureDoesNotMatch", f"{name} must be signed")
    if service == "s3":
        if "x-amz-content-sha256" not in present:
            raise Refused(400, "InvalidRequest", "missing x-amz-content-sha256")
        unsigned = sorted(n for n in present if n.startswith("x-amz-") and n not in signed)
        if unsigned:
            raise Refused(403, "AccessDenied", f"There were headers present in the request which were not signed: {', '.join(unsigned)}")
    amz_date = [v for k, v in headers if k.lower() == "x-amz-date"][0]
    try:
        when = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")
    except ValueError:
        raise Refused(403, "IncompleteSignature", f"bad x-amz-date {amz_date}")
    if abs(when - now) > SKEW:
        raise Refused(403, "RequestTimeTooSkewed", f"x-amz-date {amz_date} is more than 15 minutes from {now:%Y%m%dT%H%M%SZ}")
    if scope_date != amz_date[:8]:
        raise Refused(403, "SignatureDoesNotMatch", "credential scope date differs from x-amz-date")
    tokens = [v for k, v in headers if k.lower() == "x-amz-security-token"]
    expected_token = config["session_token"]
    if expected_token is not None and (tokens != [expected_token] or "x-amz-security-token" not in signed):
        raise Refused(403, "InvalidToken", "the session token is missing, unsigned or wrong")
    if expected_token is None and tokens:
        raise Refused(403, "InvalidToken", "a session token was sent for long-term keys")

    path, _, raw_query = raw_target.partition("?")
    host = [v for k, v in headers if k.lower() == "host"][0]
    try:
        decoded_path = unquote(path, errors="strict")
        pairs = canonical_pairs(raw_query)
    except UnicodeDecodeError:
        raise Refused(400, "InvalidURI", "percent-encoding is not UTF-8")
    # S3 reads the key from the decoded path and signs it encoded once; other services sign the path
    # as sent (botocore's SigV4Auth encodes it again, as AWS does).
    url_path = quote(decoded_path, safe="/~") if service == "s3" else path
    request = AWSRequest(method=method, url=f"https://{host}{url_path}")
    request.params = pairs
    for k, v in headers:
        if k.lower() != "authorization":
            request.headers[k] = v
    request.context["timestamp"] = amz_date
    creds = Credentials(config["access_key"], config["secret_key"], expected_token)
    signer = auth_class(service, region)(creds, set(signed), body_hash)
    if signer.signed_headers(signer.headers_to_sign(request)) != signed_list:
        raise Refused(403, "SignatureDoesNotMatch", "SignedHeaders does not match the headers present")
    canonical = signer.canonical_request(request)
    string_to_sign = signer.string_to_sign(request, canonical)
    expected = signer.signature(string_to_sign, request)
    if not hmac.compare_digest(expected, signature):
        raise Refused(
            403,
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided.",
            CanonicalRequest=canonical,
            StringToSign=string_to_sign,
        )
    canonical_query = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in pairs)
    return {
        "signed_headers": signed,
        "path_canonical": path == quote(decoded_path, safe="/~"),
        "query_canonical": raw_query == canonical_query,
        "decoded_query": pairs,
    }


class AwsChunked:
    """Incremental aws-chunked decoder (unsigned chunks): data bytes out, trailers kept."""

    def __init__(self, sink):
        self.buf = b""
        self.left = 0
        self.state = "size"
        self.sink = sink
        self.trailers = {}
        self.chunks = 0

    def feed(self, data):
        self.buf += data
        while True:
            if self.state == "size":
                at = self.buf.find(b"\r\n")
                if at < 0:
                    if len(self.buf) > 4096:
                        raise Refused(400, "IncompleteBody", "aws-chunked: chunk header too long")
                    return
                line, self.buf = self.buf[:at].decode("latin1"), self.buf[at + 2 :]
                size = line.split(";", 1)[0]
                if ";" in line and "chunk-signature" in line:
                    raise Refused(400, "InvalidRequest", "signed aws-chunked chunks reached the upstream")
                if not re.fullmatch(r"[0-9a-fA-F]{1,16}", size):
                    raise Refused(400, "IncompleteBody", f"aws-chunked: bad chunk header {line!r}")
                self.left = int(size, 16)
                self.chunks += 1
                self.state = "data" if self.left else "trailer"
            elif self.state == "data":
                if not self.buf:
                    return
                piece, self.buf = self.buf[: self.left], self.buf[self.left :]
                self.left -= len(piece)
                self.sink(piece)
                if self.left == 0:
                    self.state = "crlf"
            elif self.state == "crlf":
                if len(self.buf) < 2:
                    return
                if self.buf[:2] != b"\r\n":
                    raise Refused(400, "IncompleteBody", "aws-chunked: chunk not followed by CRLF")
                self.buf = self.buf[2:]
                self.state = "size"
            elif self.state == "trailer":
                at = self.buf.find(b"\r\n")
                if at < 0:
                    return
                line, self.buf = self.buf[:at].decode("latin1"), self.buf[at + 2 :]
                if line == "":
                    self.state = "done"
                else:
                    name, _, value = line.partition(":")
                    self.trailers[name.strip().lower()] = value.strip()
            else:
                if self.buf:
                    raise Refused(400, "IncompleteBody", "aws-chunked: bytes after the final chunk")
                return

    def finish(self):
        # The final CRLF after the trailers is optional in what SDKs send.
        if self.state == "trailer" and self.buf == b"":
            self.state = "done"
        if self.state != "done":
            raise Refused(400, "IncompleteBody", f"aws-chunked: body ended in state {self.state}")


class Body:
    """What arrived: the raw (transfer-decoded) bytes hashed, and the object's bytes (aws-chunked decoded)."""

    def __init__(self, aws_chunked):
        self.raw_hash = hashlib.sha256()
        self.raw_bytes = 0
        self.data_hash = hashlib.sha256()
        self.md5 = hashlib.md5()
        self.crc32 = 0
        self.sha1 = hashlib.sha1()
        self.data_bytes = 0
        self.kept = []
        self.decoder = AwsChunked(self._data) if aws_chunked else None

    def _data(self, piece):
        self.data_hash.update(piece)
        self.md5.update(piece)
        self.sha1.update(piece)
        self.crc32 = zlib.crc32(piece, self.crc32)
        self.data_bytes += len(piece)
        if self.kept is not None:
            self.kept.append(piece)
            if self.data_bytes > STORE_MAX:
                self.kept = None

    def feed(self, piece):
        self.raw_hash.update(piece)
        self.raw_bytes += len(piece)
        if self.decoder:
            self.decoder.feed(piece)
        else:
            self._data(piece)
