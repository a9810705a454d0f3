"""A package registry on 127.0.0.1 as npm speaks to one: the packument of each package under
the directory given (one `NAME-VERSION.tgz` each, made by `npm pack`) and its tarball, with
the integrity npm checks. Prints the port, then serves until killed; logs each request's
path to stderr."""
import base64, hashlib, http.server, json, os, sys

root = sys.argv[1]


class Registry(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        sys.stderr.write(self.path + "\n")
        sys.stderr.flush()
        port = self.server.server_address[1]
        name = self.path.strip("/").split("/")[0]
        tarballs = sorted(f for f in os.listdir(root) if f.startswith(name + "-") and f.endswith(".tgz"))
        if "/-/" in self.path:
            path = os.path.join(root, os.path.basename(self.path))
            if not os.path.exists(path):
                return self.send_error(404)
            body, kind = open(path, "rb").read(), "application/octet-stream"
        elif tarballs:
            versions = {}
            for f in tarballs:
                data = open(os.path.join(root, f), "rb").read()
                version = f[len(name) + 1 : -len(".tgz")]
                versions[version] = {
                    "name": name,
                    "version": version,
                    "main": "index.js",
                    "dist": {
                        "tarball": f"http://127.0.0.1:{port}/{name}/-/{f}",
                        "shasum": hashlib.sha1(data).hexdigest(),
                        "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode(),
                    },
                }
            latest = sorted(versions)[-1]
            body = json.dumps({"name": name, "dist-tags": {"latest": latest}, "versions": versions}).encode()
            kind = "application/json"
        else:
            return self.send_error(404)
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Registry)
print(server.server_address[1], flush=True)
server.serve_forever()
