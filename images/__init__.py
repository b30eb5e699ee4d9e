"""Container images and the sample training programs they run.

Each sample runs as ``python -m images.<name>.train``, from the repository root or the
image's working directory.
"""
