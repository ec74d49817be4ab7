# cubequeue image: build a wheel in one stage, install only the wheel in the next.
# Build: docker build -t cubequeue .   Run: docker run -p 5432:5432 -p 3030:3030 cubequeue
# Durable: docker run -v cubequeue-data:/data -p 5432:5432 -p 3030:3030 cubequeue --data-dir /data
# (a bind-mounted host directory must belong to uid 10001, the user the server runs as).

FROM python:3.12-slim AS build
WORKDIR /src
# uv only exports the lock: the runtime dependencies at the versions uv.lock pins, with hashes.
RUN pip install --no-cache-dir uv==0.13.9
COPY pyproject.toml uv.lock README.md ./
COPY server ./server
COPY grammar ./grammar
COPY storage ./storage
RUN uv export --frozen --no-dev --no-emit-project --no-header --format requirements-txt \
        --output-file /dist/requirements.txt \
    && pip wheel --no-cache-dir --no-deps --wheel-dir /dist .

FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    CUBEQUEUE_HOST=0.0.0.0
COPY --from=build /dist/ /tmp/dist/
# The locked dependencies (hash-checked), then the wheel alone. Importing the grammar once
# stores its built parser next to it (fast start as non-root).
RUN pip install --no-cache-dir --require-hashes -r /tmp/dist/requirements.txt \
    && pip install --no-cache-dir --no-deps /tmp/dist/*.whl \
    && python -c "import cubequeue.grammar" \
    && rm -rf /tmp/dist \
    && useradd --system --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin cubequeue \
    && mkdir /data && chown 10001:10001 /data
# --data-dir /data keeps the queue and cache across restarts (durable mode); without it the
# server runs in memory and the volume stays empty.
VOLUME ["/data"]
USER 10001:10001
EXPOSE 5432 3030
# The healthcheck reads the flags of PID 1 (this ENTRYPOINT plus the arguments of docker
# run), so "docker run cubequeue --port 6000" is checked on 6000.
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s --retries=3 CMD ["cubequeue", "healthcheck"]
# Exec form: cubequeue is PID 1 and gets SIGTERM itself; it stops within --shutdown-grace.
STOPSIGNAL SIGTERM
ENTRYPOINT ["cubequeue"]
