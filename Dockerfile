# wai-dispatch: the decoder service (`wai-dispatch serve`) on uvicorn. `make image` builds it
# with docker or podman, starts it and decodes the three samples through HTTP (.ci/image).
# Build stage: the dependencies first, into the virtual environment /opt/wai (from
# pyproject.toml and constraints.txt only, so an edit of the source reuses that layer), then the
# package alone into /opt/wai-app, which the environment's path names. The runtime stage copies
# the two folders in the same order (installed files only: no wheel, no build tool, and pip never
# runs there), runs as a non-root user and checks /healthz. The demo weights stay out (they are
# not in the wheel): the bundled parameter sets are.
#
# The base is pinned by digest: python:3.11-slim's multi-arch index digest as published on
# Docker Hub (docker.io/library/python:3.11-slim, also served by the public.ecr.aws/docker/library
# mirror), read from public Dockerfiles that pin it, not pulled here. To move it:
#   docker buildx imagetools inspect python:3.11-slim   (the "Digest:" line), then edit ARG BASE.
# Where that registry cannot be reached, another base with Python 3.11 and `python` and `pip` on
# the PATH is given with --build-arg BASE=…: .ci/image builds one from Debian's packages with
# mmdebstrap (docs/operations.md, "The container image").
# Behind a TLS-intercepting proxy, the host's CA bundle is a build secret, mounted only while pip
# fetches and never in a layer: --secret id=ca,src=/etc/ssl/certs/ca-certificates.crt
ARG BASE=docker.io/library/python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

FROM ${BASE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# 1. the dependencies: the runtime's and PostgreSQL's driver (the postgres extra), every one at
#    its constraints.txt pin; their own test suites, which nothing here imports, left out (35 MB)
COPY pyproject.toml constraints.txt ./
RUN --mount=type=secret,id=ca \
    python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
print('\n'.join(p['dependencies'] + p['optional-dependencies']['postgres']))" > requirements.txt \
    && if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
    && python -m venv --without-pip /opt/wai \
    && pip --python /opt/wai/bin/python install -c constraints.txt -r requirements.txt \
    && find /opt/wai -depth -type d \( -path '*-packages/numpy/*' -name tests \
        -o -path '*-packages/onnx/backend/test' \) -exec rm -rf {} + \
    && echo /opt/wai-app > /opt/wai/lib/python3.11/site-packages/wai-app.pth
# 2. the package itself, without its dependencies (they are above); pip's build isolation
#    fetches setuptools, so the CA bundle again
COPY README.md ./
COPY wai_dispatch ./wai_dispatch
COPY dispatch ./dispatch
COPY setfacts ./setfacts
COPY paths ./paths
COPY codec ./codec
COPY service ./service
COPY cli ./cli
COPY tools ./tools
COPY conformance ./conformance
RUN --mount=type=secret,id=ca \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
    && pip --python /opt/wai/bin/python install --no-deps --target /opt/wai-app .

FROM ${BASE}
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/wai-app/bin:/opt/wai/bin:$PATH \
    WAI_DATA_DIR=/var/lib/wai-dispatch WAI_HOST=0.0.0.0 WAI_PORT=8080 WAI_WORKERS=1
RUN useradd --system --uid 10001 --home-dir /var/lib/wai-dispatch --create-home wai
COPY --from=build /opt/wai /opt/wai
COPY --from=build /opt/wai-app /opt/wai-app
USER 10001
WORKDIR /var/lib/wai-dispatch
VOLUME ["/var/lib/wai-dispatch"]
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]
ARG BASE
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
# OCI annotations, last (CREATED differs in every build, and no step after it is cached);
# REVISION and CREATED are given at build time:
#   docker build --build-arg REVISION="$(git rev-parse HEAD)" \
#     --build-arg CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)" -t wai-dispatch .
LABEL org.opencontainers.image.title="wai-dispatch" \
      org.opencontainers.image.description="A decoder service for learned image codecs that dispatches each decode to a unit under the determinism tier it needs." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE}"
ENTRYPOINT ["wai-dispatch"]
CMD ["serve"]
