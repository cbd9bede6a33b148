# alibi-viz as a container: the app on port 8501, the shipped models inside the image.
#   docker build -t alibi-viz .
#   docker run -p 8501:8501 alibi-viz
# torch is pinned to 2.13.0; to get the CPU-only build (about 200 MB instead of several GB of
# CUDA libraries), pass your CPU wheel index:  --build-arg TORCH_INDEX_URL=<cpu wheel index>
FROM python:3.11-slim

ARG TORCH_INDEX_URL=""
ENV PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 \
    ALIBI_VIZ_TORCH_THREADS=1 \
    ALIBI_VIZ_ALLOW_CUSTOM_PATHS=0

WORKDIR /app
COPY requirements.txt .
RUN if [ -n "$TORCH_INDEX_URL" ]; then pip install torch==2.13.0 --index-url "$TORCH_INDEX_URL"; fi \
 && pip install -r requirements.txt

COPY alibi_viz alibi_viz
COPY app app
COPY assets assets
COPY .streamlit .streamlit

RUN useradd --create-home viewer
USER viewer
EXPOSE 8501
HEALTHCHECK CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health')"
CMD ["python", "-m", "streamlit", "run", "app/main.py", "--server.address", "0.0.0.0", \
     "--server.port", "8501"]
