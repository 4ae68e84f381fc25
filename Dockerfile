# gmpscope: the explorer UI + ingest API (gmpscope serve), the ingest service
# (gmpscope ingest-server) and the live collector (gmpscope live): one image for the
# ingest, app and collector services of docker-compose.yml (the demo Go service has
# its own, Dockerfile.demo). Build: docker build -t gmpscope .
FROM python:3.11-slim-bookworm

# gcc and the Python headers build the C decoder extension, SQLite's headers the
# loader's SQLite binder (ingest/store/sqlite_fast.py; it binds into the libsqlite3 that
# this image's Python uses, and checks that it is the same); strace is what
# `gmpscope record` runs.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev libsqlite3-dev strace \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/gmpscope
COPY pyproject.toml setup.py README.md ./
COPY collectors ./collectors
COPY gmpscope ./gmpscope
COPY ingest ./ingest
COPY app ./app
COPY static ./static
COPY samples ./samples
RUN pip install --no-cache-dir . \
 && useradd --create-home --uid 10001 gmpscope \
 && mkdir -p /data && chown gmpscope /data

USER gmpscope
ENV GMPSCOPE_DATA=/data
EXPOSE 8050 8060
# Listening on every address, the servers need a token (docs/security.md): without
# GMPSCOPE_TOKEN they stop with one line. docker run -e GMPSCOPE_TOKEN=... gmpscope
CMD ["gmpscope", "serve", "--host", "0.0.0.0", "--port", "8050"]
