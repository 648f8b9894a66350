# wai-dispatch: the decoder and its CLI. The HTTP service arrives with a later issue; until
# then the image installs the package and runs the demo decode by default.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 WAI_DATA_DIR=/var/lib/wai-dispatch
WORKDIR /app
COPY pyproject.toml README.md ./
COPY dispatch ./dispatch
COPY paths ./paths
COPY codec ./codec
COPY service ./service
COPY cli ./cli
COPY tools ./tools
COPY conformance ./conformance
RUN pip install . && useradd --system --home /var/lib/wai-dispatch --create-home wai
USER wai
ENTRYPOINT ["wai-dispatch"]
CMD ["demo", "-o", "/tmp/out"]
