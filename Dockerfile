# The image every node of kuberay.yaml runs: Ray 2.60 with CUDA, torch pinned (PyPI's Linux wheel is the
# CUDA build), and structcse installed WITH its dependencies from pyproject.toml (the one list), C loops
# built. A job's --working-dir still ships the code it runs; the image holds what that code imports.
#   docker build -t YOUR-REGISTRY/structcse:2.60.0 . && docker push YOUR-REGISTRY/structcse:2.60.0
FROM rayproject/ray:2.60.0-py311-gpu
RUN (command -v gcc || (sudo apt-get update -q && sudo apt-get install -y -q gcc)) && \
    pip install -q "torch==2.13.0"
COPY --chown=ray:users . /home/ray/structcse
RUN pip install -q "/home/ray/structcse[cloud]" && python -c "import _structcse_wikitext"
