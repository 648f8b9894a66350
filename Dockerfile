# wai-dispatch: the decoder service (`wai-dispatch serve`) on uvicorn.
# Build stage: wheels for the package and every dependency; the runtime stage installs them
# offline, runs as a non-root user, and checks /healthz. The demo weights stay out (they are
# not in the wheel): the bundled parameter sets are.
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY wai_dispatch ./wai_dispatch
COPY dispatch ./dispatch
COPY paths ./paths
COPY codec ./codec
COPY service ./service
COPY cli ./cli
COPY tools ./tools
COPY conformance ./conformance
RUN pip wheel --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    WAI_DATA_DIR=/var/lib/wai-dispatch WAI_HOST=0.0.0.0 WAI_PORT=8080
RUN useradd --system --uid 10001 --home-dir /var/lib/wai-dispatch --create-home wai
COPY --from=build /wheels /wheels
RUN pip install --no-index --find-links=/wheels /wheels/wai_dispatch-*.whl && rm -rf /wheels
USER 10001
WORKDIR /var/lib/wai-dispatch
VOLUME ["/var/lib/wai-dispatch"]
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]
ENTRYPOINT ["wai-dispatch"]
CMD ["serve"]
