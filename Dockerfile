# Srift API/worker image: slim Python, non-root user, same start command as `make run` (srift serve).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    SRIFT_HOST=0.0.0.0 \
    SRIFT_PORT=8000 \
    SRIFT_WORKERS=0 \
    SRIFT_DATA_DIR=/data

RUN apt-get update \
 && apt-get install -y --no-install-recommends curl iproute2 \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
# Every runtime dependency from the hashed lock (`make lock`), the same versions `make test` ran: the CPU
# build of torch comes from PyTorch's CPU index; GPU users build FROM an image with their own torch.
COPY requirements/runtime.txt ./requirements/
RUN pip install --require-hashes --no-deps --extra-index-url https://download.pytorch.org/whl/cpu \
      -r requirements/runtime.txt
COPY pyproject.toml setup.py README.md ./
COPY srift ./srift
COPY migrations ./migrations
COPY models ./models
COPY probes ./probes
# gcc only while installing: it compiles the simulator's C stage kernel (srift/sim/_stage.c).
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && pip install --no-deps --no-build-isolation . \
 && pip check \
 && apt-get purge -y --auto-remove gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/* \
 && cd / && python -c "import srift.sim._stage"

RUN useradd --create-home --uid 10001 srift && mkdir -p /data && chown srift:srift /data
USER srift
VOLUME ["/data"]
EXPOSE 8000

HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=5 \
  CMD curl -fsS http://127.0.0.1:8000/v1/health || exit 1

# `srift serve` runs one worker process per CPU the container may use (`docker run --cpus` counted), under
# uvicorn's supervisor; SRIFT_WORKERS=N picks another count.
ENTRYPOINT ["srift"]
CMD ["serve"]
