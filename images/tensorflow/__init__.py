"""TensorFlow MultiWorkerMirroredStrategy sample (TFJob)."""
