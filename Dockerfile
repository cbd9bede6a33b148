# alibi-viz as a container: the app on port 8501, the shipped models inside the image.
#   docker build -t alibi-viz .
#   docker run -p 8501:8501 alibi-viz
# The image of the Kubernetes deployment (deploy/k8s, deploy/README.md). No container engine
# runs on this project's machines: this file is checked by tests/test_k8s.py, never built here.
#
# The app's lock (requirements.lock, written by pip-compile from pyproject.toml). torch: the
# version it pins, from the CPU wheel index (about 200 MB instead of several GB of CUDA
# libraries), installed first so that `pip install -r requirements.lock` finds it already there. Another index: --build-arg TORCH_INDEX_URL=...
FROM python:3.11-slim

ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    ALIBI_VIZ_TORCH_THREADS=1 \
    ALIBI_VIZ_ALLOW_CUSTOM_PATHS=0 \
    HF_HUB_OFFLINE=1

WORKDIR /app
COPY requirements.lock .
RUN pip install --index-url "$TORCH_INDEX_URL" "$(grep -E '^torch==' requirements.lock)" \
 && pip install -r requirements.lock

COPY alibi_viz alibi_viz
COPY alibi_viz_app alibi_viz_app
COPY assets assets
COPY .streamlit .streamlit
# Compiled now: the Kubernetes pods run with a read-only root filesystem.
RUN python -m compileall -q alibi_viz alibi_viz_app

# A numeric user, so Kubernetes can check runAsNonRoot (deploy/k8s/deployment.yaml: 10001).
RUN groupadd --gid 10001 app && useradd --uid 10001 --gid 10001 --create-home --home-dir /home/app app
USER 10001:10001
EXPOSE 8501
HEALTHCHECK CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health')"
# make run's server (alibi_viz_app/serve.py: heavy imports before the port opens, then every page run
# once), listening on every address of the container.
CMD ["python", "-m", "alibi_viz_app.serve", "--server.address", "0.0.0.0", "--server.port", "8501", \
     "--server.headless", "true", "--browser.gatherUsageStats", "false"]
