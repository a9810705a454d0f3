"""An OTLP/HTTP trace receiver for tests/telemetry_otlp.rs.

Decodes every POST /v1/traces body with the real OpenTelemetry protobuf schema (the
`opentelemetry-proto` package, installed by tests/otlp/setup.sh) and writes one JSON line per
span to stdout: trace and span ids in hex, the parent's, name, times, attributes, status and
the resource's attributes. Prints `listening <port>` first (stderr), on a free loopback port.

    receiver.py          answer 200 to every export
    receiver.py --hang   accept connections and never answer (a collector that hangs)
"""

import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

LOCK = threading.Lock()


def value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def attributes(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        if self.path != "/v1/traces" or self.headers.get("content-type") != "application/x-protobuf":
            self.send_response(415)
            self.end_headers()
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with LOCK:
            for rs in request.resource_spans:
                resource = attributes(rs.resource.attributes)
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        line = {
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex(),
                            "name": span.name,
                            "start": span.start_time_unix_nano,
                            "end": span.end_time_unix_nano,
                            "attributes": attributes(span.attributes),
                            "status": span.status.code,
                            "scope": ss.scope.name,
                            "resource": resource,
                            "tenant": self.headers.get("x-tenant"),
                        }
                        sys.stdout.write(json.dumps(line) + "\n")
            sys.stdout.flush()
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def hang():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(f"listening {listener.getsockname()[1]}", file=sys.stderr, flush=True)
    held = []
    while True:
        conn, _ = listener.accept()
        held.append(conn)  # never read, never answered, never closed


def main():
    if "--hang" in sys.argv:
        hang()
        return
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening {server.server_address[1]}", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
