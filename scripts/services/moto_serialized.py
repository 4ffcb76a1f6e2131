"""moto's S3 server with its requests handled one at a time: python moto_serialized.py HOST PORT.

moto checks a PUT's `If-None-Match: *` and stores the object in two steps, on one thread per
request, with nothing to stop another request's thread between them: of two PUTs racing for
one key, both can get 200 (about one race in 300 here). Handled one at a time, one gets 200
and the others 412, as on AWS S3. Connections are still served on a thread each, so a client's
kept-alive connection holds up nobody.
"""

import os
import sys
import threading

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    os.environ.setdefault("MOTO_PORT", str(port))
    app = DomainDispatcherApplication(create_backend_app)
    one_at_a_time = threading.Lock()

    def serialized(environ, start_response):
        with one_at_a_time:
            return list(app(environ, start_response))

    run_simple(host, port, serialized, threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
